"""Dead-code removal for transformations that stage more than their result needs.

``grad`` computes the function's value on the way to its gradient; under jit or
make_jaxpr those equations would stay in the jaxpr although nothing reads them.
``drop_dead_equations`` runs a computation and then removes, from the equations
it appended to the staging trace, those that its kept results do not depend on.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.jaxpr import Var
from plax.core.staging import StagingTrace, StagingTracer
from plax.core.trace import current_trace


# Primitives that can drop some of their outputs (a jit call shrinking its body):
# rule(eqn, used_outputs) -> an equation producing only the used outputs.
dce_rules: dict = {}


def drop_dead_equations(run, kept):
    """``run()``; if a jit/make_jaxpr trace is current, prune what ``kept(result)`` does not need.

    Only the equations (and hoisted constants) appended while ``run`` ran are
    candidates, so code staged before or after is untouched. Values computed by
    ``run`` must leave it only through ``kept(result)`` (any other escape would be
    a leaked tracer of an inner transformation anyway).
    """
    trace = current_trace()
    if type(trace) is not StagingTrace:  # eager, or inside another transformation
        return run()
    first_eqn, first_const = len(trace.eqns), len(trace.const_order)
    result = run()
    live = {x.var for x in tree_util.tree_leaves(kept(result))
            if isinstance(x, StagingTracer) and x._trace is trace}
    kept_eqns = []
    for e in reversed(trace.eqns[first_eqn:]):
        used = [v in live for v in e.outvars]
        if any(used):
            rule = dce_rules.get(e.primitive)
            if not all(used) and rule is not None:
                e = rule(e, used)
            kept_eqns.append(e)
            live.update(v for v in e.invars if isinstance(v, Var))
    trace.eqns[first_eqn:] = kept_eqns[::-1]
    _drop_unused_consts(trace, first_const, live)
    return result


def _drop_unused_consts(trace, first: int, live: set):
    """Forget constants hoisted since index ``first`` that no kept equation reads."""
    new_vars, new_vals = trace.const_order[first:], trace.const_vals[first:]
    if all(v in live for v in new_vars):
        return
    dead = {v for v in new_vars if v not in live}
    trace.const_vars = {k: v for k, v in trace.const_vars.items() if v not in dead}
    trace.const_order[first:] = [v for v in new_vars if v not in dead]
    trace.const_vals[first:] = [c for v, c in zip(new_vars, new_vals) if v not in dead]
