"""Partial evaluation: run what is known now, stage what is not.

Linearizing a function runs its JVP with known primals and unknown tangents
under a ``PartialEvalTrace``: operations on known values execute in the
parent trace (eagerly, or staged into an enclosing jit), operations touching
unknown tangents are recorded into a linear jaxpr whose constants are the
residuals (known values the tangent computation needs).

A primitive that partial-evaluates specially registers
``partial_eval_rules[prim] = rule(trace, args, params)``; the rule runs known work
with ``trace.known(...)``, records unknown work with ``trace.stage(...)`` and
asks ``trace.is_unknown(x)``. ``partial_eval_jaxpr`` splits a whole jaxpr into
its known and unknown parts (for the bodies of higher-order primitives).
"""
from __future__ import annotations

from plax.core import dtypes
from plax.core.caches import WeakKeyCache
from plax.core.dce import dce_closed
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, as_mask, eval_jaxpr
from plax.core.rules import Zero, differentiable, partial_eval_rules, tangent_aval
from plax.core.staging import StagingTrace, StagingTracer, trace_to_jaxpr
from plax.core.trace import (NameStack, Tracer, current_trace, get_aval, name_stack,
                             set_current_trace)
from plax.first_order.ad_util import zeros_like_aval
from plax.transforms.jvp import jvp_flat


class PartialEvalTrace(StagingTrace):
    """Stages only operations that depend on unknown inputs; the rest runs in the parent."""

    tracer_repr = "Traced<{}:JaxprTrace>"  # as JAX shows its partial-eval tracers
    partial_eval = True  # a JVP trace under this one is linearizing: JVPTracer shows as GradTracer
    records_all = False

    def evaluates_eagerly(self) -> bool:
        return self.parent.evaluates_eagerly()

    def is_unknown(self, x) -> bool:
        return isinstance(x, StagingTracer) and x._trace is self

    def known(self, prim, args, params):
        """Run ``prim`` on known values in the parent trace (now, or staged into an outer jit)."""
        with set_current_trace(self.parent):
            return prim.bind(*args, **params)

    def eval_jaxpr(self, closed: ClosedJaxpr, args):
        """Evaluate ``closed`` equation by equation in this trace: known parts run now."""
        with set_current_trace(self):
            return eval_jaxpr(closed.jaxpr, closed.consts, *args)

    def process_primitive(self, prim, args, params):
        if not any(self.is_unknown(a) for a in args):
            return self.known(prim, args, params)
        rule = partial_eval_rules.get(prim)
        if rule is not None:
            return rule(self, args, params)
        return self.stage(prim, args, params)


def linearize_flat(fun, primals, description: str = "", num_aux=0):
    """Linearize ``fun(*flat) -> list`` at ``primals``.

    Returns ``(primal_outs, linear ClosedJaxpr, has_out)``: the jaxpr maps the tangents
    of the inexact (float or complex) inputs to the tangents of the outputs where
    ``has_out`` (all but the float0 tangents of integer outputs); its consts
    are the residuals. Integer and boolean inputs have zero tangents and no invar. The
    last ``num_aux`` outputs are auxiliary: their primals are returned, their tangents
    are not part of the jaxpr (``num_aux`` may be a callable, asked once ``fun`` has run).
    """
    base = name_stack()
    pe = PartialEvalTrace(current_trace(), description)
    tangent_in = [pe.new_arg(tangent_aval(get_aval(p))) if differentiable(get_aval(p))
                  else Zero(tangent_aval(get_aval(p))) for p in primals]
    try:
        with set_current_trace(pe):
            out_primals, out_tangents = jvp_flat(fun, primals, tangent_in, description)
            n_aux = num_aux() if callable(num_aux) else num_aux
            out_tangents = out_tangents[:len(out_tangents) - n_aux]
            # float0 tangents (of integer outputs) are always zero and XLA cannot carry them.
            has_out = [not (type(t) is Zero and t.aval.dtype == dtypes.float0)
                       for t in out_tangents]
            out_atoms = [pe.lift(zeros_like_aval(t.aval) if type(t) is Zero else t)
                         for t, h in zip(out_tangents, has_out) if h]
    finally:
        pe.finish()
    invars = [t._var for t in tangent_in if type(t) is not Zero]
    return out_primals, _relative_scopes(_closed_dce(pe, invars, out_atoms), base), has_out


def _relative_scopes(closed: ClosedJaxpr, base) -> ClosedJaxpr:
    """``closed`` with the name stack ``base`` (the caller's, in force while the equations
    were staged) taken off the front of theirs: the linear jaxpr is a body of its own,
    whose scopes are relative to it (as a traced body's are), so that where its equations
    are staged again (transposed) they go under the stack in force then."""
    if not base:
        return closed
    n, eqns, changed = len(base), [], False
    for e in closed.jaxpr.eqns:
        info = e.source_info
        if info is not None and tuple(info.name_stack[:n]) == tuple(base):
            e = e.replace(source_info=info._replace(name_stack=NameStack(info.name_stack[n:])))
            changed = True
        eqns.append(e)
    if not changed:
        return closed
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.outvars, eqns), closed.consts)


def _closed_dce(pe: PartialEvalTrace, invars, out_atoms) -> ClosedJaxpr:
    """The jaxpr staged by ``pe`` without equations (or residuals) the outputs do not need."""
    closed, _ = dce_closed(ClosedJaxpr(Jaxpr(pe.const_order, invars, out_atoms, pe.eqns),
                                       pe.const_vals), instantiate=True)
    return closed


def trace_linear_flat(fun, in_avals, description: str = ""):
    """Stage ``fun(*flat) -> list`` with every input unknown (for transposing a linear function).

    Operations on values that do not depend on the inputs run in the parent trace.
    Returns the ClosedJaxpr (inputs to outputs).
    """
    pe = PartialEvalTrace(current_trace(), description)
    args = [pe.new_arg(a) for a in in_avals]
    try:
        with set_current_trace(pe):
            out_atoms = [pe.lift(o) for o in fun(*args)]
    finally:
        pe.finish()
    return _closed_dce(pe, [a._var for a in args], out_atoms)


# --- partial evaluation of a jaxpr (for the bodies of higher-order primitives) ---------------
_partial_evals = WeakKeyCache("partial_eval_jaxpr")


def partial_eval_jaxpr(closed: ClosedJaxpr, unknowns, instantiate, description: str = ""):
    """Split ``closed`` into what can be computed from its known inputs and what cannot.

    ``unknowns`` has one bool per input; ``instantiate`` (a bool, or one per output)
    forces outputs to be unknown even when they could be known, so a caller can
    iterate to a fixed point (a loop carry that becomes unknown on the next pass).
    Returns ``(known, unknown, out_unknowns, num_res)``:

    - ``known``: known inputs -> known outputs followed by ``num_res`` residuals;
    - ``unknown``: residuals followed by the unknown inputs -> the unknown outputs;
    - ``out_unknowns``: per output of ``closed``, whether ``unknown`` computes it.
    """
    unknowns = tuple(bool(u) for u in unknowns)
    inst = as_mask(instantiate, len(closed.jaxpr.outvars), "partial_eval_jaxpr: instantiate")
    key = (unknowns, inst)
    hit = _partial_evals.get(closed, key)
    if hit is not None:
        return hit
    avals = closed.in_avals
    box = {}
    name = description or "partial_eval_jaxpr"

    def known_fun(*known_args):
        pe = PartialEvalTrace(current_trace(), name)
        it = iter(known_args)
        ins = [pe.new_arg(a) if u else next(it) for a, u in zip(avals, unknowns)]
        try:
            outs = pe.eval_jaxpr(closed, ins)
            with set_current_trace(pe):
                out_unknown = [pe.is_unknown(o) or i for o, i in zip(outs, inst)]
                staged_outs = [pe.lift(o) for o, u in zip(outs, out_unknown) if u]
        finally:
            pe.finish()
        unknown_closed, _ = dce_closed(ClosedJaxpr(
            Jaxpr(pe.const_order, [t._var for t, u in zip(ins, unknowns) if u], staged_outs,
                  pe.eqns), pe.const_vals), instantiate=True)
        box["unknown"], box["out_unknown"] = unknown_closed.jaxpr, out_unknown
        residuals = unknown_closed.consts
        box["num_res"] = len(residuals)
        return [o for o, u in zip(outs, out_unknown) if not u] + list(residuals)

    known_jaxpr, consts = trace_to_jaxpr(known_fun, [a for a, u in zip(avals, unknowns) if not u],
                                         description=name)
    known, _ = dce_closed(ClosedJaxpr(known_jaxpr, consts), instantiate=True)
    u = box["unknown"]
    unknown = ClosedJaxpr(Jaxpr([], list(u.constvars) + list(u.invars), u.outvars, u.eqns), [])
    result = (known, unknown, box["out_unknown"], box["num_res"])
    if not any(isinstance(c, Tracer) for c in known.consts):
        _partial_evals.put(closed, key, result)
    return result
