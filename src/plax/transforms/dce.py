"""Pruning what a staged transformation computes but does not return.

``grad`` computes the function's value on the way to its gradient; under jit or
make_jaxpr those equations would stay in the jaxpr although nothing reads them.
``stage_without_dead_code(run, kept)`` runs ``run`` in the current staging trace and
then prunes, in place and with the one DCE (``plax.core.dce.dce_eqns``), the
equations it appended that neither ``kept(result)`` nor a tracer still alive (stored in a
reference or any other object) needs.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.dce import dce_eqns
from plax.core.staging import StagingTrace, StagingTracer
from plax.core.trace import current_trace


def stage_without_dead_code(run, kept):
    """``kept(run())``; under a jit/make_jaxpr trace, without what that does not need.

    Elsewhere (eagerly, or inside another transformation) nothing is pruned. Only the
    equations (and hoisted constants) added while ``run`` ran are candidates, so what was
    staged before or after is untouched. A value ``run`` computed stays when it leaves
    through ``kept(result)``, a mutable reference, or any other way that keeps its tracer
    alive (a Python object it was stored in, such as a library's variable).
    """
    trace = current_trace()
    if not (isinstance(trace, StagingTrace) and trace.records_all):
        return kept(run())
    first_eqn, first_const = len(trace.eqns), len(trace.const_order)
    outer, trace.made_tracers = trace.made_tracers, []
    made = trace.made_tracers
    try:
        out = kept(run())
    finally:
        trace.made_tracers = outer
        if outer is not None:
            outer.extend(made)
    live = {x._var for x in tree_util.tree_leaves(out)
            if isinstance(x, StagingTracer) and x._trace is trace}
    live.update(t._var for t in (ref() for ref in made) if t is not None)
    trace.eqns[first_eqn:] = dce_eqns(trace.eqns[first_eqn:], live)
    _drop_unused_consts(trace, first_const, live)
    return out


def _drop_unused_consts(trace: StagingTrace, first: int, live: set) -> None:
    """Forget the constants hoisted since index ``first`` that no kept equation reads."""
    new_vars = trace.const_order[first:]
    if live.issuperset(new_vars):
        return
    dead = {v for v in new_vars if v not in live}
    trace.const_vars = {k: v for k, v in trace.const_vars.items() if v not in dead}
    trace.const_vals[first:] = [c for v, c in zip(new_vars, trace.const_vals[first:])
                                if v not in dead]
    trace.const_order[first:] = [v for v in new_vars if v not in dead]
