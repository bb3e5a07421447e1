"""Pruning what a staged transformation computes but does not return.

``grad`` computes the function's value on the way to its gradient; under jit or
make_jaxpr those equations would stay in the jaxpr although nothing reads them.
``stage_without_dead_code(run, kept)`` runs ``run`` into a region of its own,
removes with the one DCE (``plax.core.dce.dce_jaxpr``) what ``kept(result)`` does
not need, and stages what is left into the enclosing trace.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.dce import dce_jaxpr
from plax.core.jaxpr import Jaxpr, Var
from plax.core.staging import StagingTrace, StagingTracer
from plax.core.trace import current_trace, set_current_trace


class _Region(StagingTrace):
    """A staging trace whose equations will join its parent's; it speaks for the parent in
    error messages (what a value depends on, which equation made it)."""

    def __init__(self, parent: StagingTrace):
        super().__init__(parent, parent.description)
        self.tracer_repr = parent.tracer_repr

    def equation_making(self, var):
        return super().equation_making(var) or self.parent.equation_making(var)

    def argument_names_for(self, var) -> list[str]:
        needed = self.depends_on(var)
        names = []
        for v, value in zip(self.const_order, self.const_vals):
            if v in needed and isinstance(value, StagingTracer) and value._trace is self.parent:
                names += [n for n in self.parent.argument_names_for(value.var) if n not in names]
        return names


def stage_without_dead_code(run, kept):
    """``run()``; under a jit/make_jaxpr trace, without what ``kept(result)`` does not need.

    Elsewhere (eagerly, or inside another transformation) this is just ``run()``.
    Values computed by ``run`` must leave it only through ``kept(result)``.
    """
    trace = current_trace()
    if not (isinstance(trace, StagingTrace) and trace.records_all):
        return run()
    region = _Region(trace)
    try:
        with set_current_trace(region):
            result = run()
            leaves = tree_util.tree_leaves(kept(result))
            outs = [region.lift(x) for x in leaves]
    finally:
        region.finish()
    live, _ = dce_jaxpr(Jaxpr(region.const_order, [], outs, region.eqns))
    # The region's constants are the parent's values: its tracers, or concrete arrays.
    used = set(live.constvars)
    subst = {v: trace.lift(c) for v, c in zip(region.const_order, region.const_vals) if v in used}
    for e in live.eqns:
        if any(v in subst for v in e.invars):
            e = e.replace(invars=[subst.get(v, v) if isinstance(v, Var) else v for v in e.invars])
        trace.eqns.append(e)
    adopted = {id(x): StagingTracer(trace, x.aval, x.var) for x in leaves
               if isinstance(x, StagingTracer) and x._trace is region}
    if not adopted:
        return result
    return tree_util.tree_map(lambda x: adopted.get(id(x), x), result)
