"""Partial evaluation: run what is known now, stage what is not.

Linearizing a function runs its JVP with known primals and unknown tangents
under a ``PartialEvalTrace``: operations on known values execute in the
parent trace (eagerly, or staged into an enclosing jit), operations touching
unknown tangents are recorded into a linear jaxpr whose constants are the
residuals (known values the tangent computation needs).
"""
from __future__ import annotations

from plax.core import dtypes
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, dce_jaxpr
from plax.core.staging import StagingTrace, StagingTracer
from plax.core.trace import current_trace, get_aval, set_current_trace
from plax.transforms.jvp import Zero, jvp_flat, tangent_aval, zeros_like_aval

# Primitives that partial-evaluate specially (e.g. pjit inlines its body):
# rule(trace, args, params) -> outputs.
partial_eval_rules: dict = {}


class PartialEvalTrace(StagingTrace):
    """Stages only operations that depend on unknown inputs; the rest runs in the parent."""

    tracer_repr = "Traced<{}:JaxprTrace>"  # as JAX shows its partial-eval tracers
    partial_eval = True  # a JVP trace under this one is linearizing: JVPTracer shows as GradTracer

    def is_unknown(self, x) -> bool:
        return isinstance(x, StagingTracer) and x._trace is self

    def process_primitive(self, prim, args, params):
        if not any(self.is_unknown(a) for a in args):
            with set_current_trace(self.parent):
                return prim.bind(*args, **params)
        rule = partial_eval_rules.get(prim)
        if rule is not None:
            return rule(self, args, params)
        return super().process_primitive(prim, args, params)


def linearize_flat(fun, primals, description: str = "", num_aux=0):
    """Linearize ``fun(*flat) -> list`` at ``primals``.

    Returns ``(primal_outs, linear ClosedJaxpr, has_out)``: the jaxpr maps the tangents
    of the inexact (float or complex) inputs to the tangents of the outputs where
    ``has_out`` (all but the float0 tangents of integer outputs); its consts
    are the residuals. Integer and boolean inputs have zero tangents and no invar. The
    last ``num_aux`` outputs are auxiliary: their primals are returned, their tangents
    are not part of the jaxpr (``num_aux`` may be a callable, asked once ``fun`` has run).
    """
    pe = PartialEvalTrace(current_trace(), description)
    tangent_in = [pe.new_arg(get_aval(p)) if dtypes.is_inexact(get_aval(p).dtype)
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
    invars = [t.var for t in tangent_in if type(t) is not Zero]
    return out_primals, _closed_dce(pe, invars, out_atoms), has_out


def _closed_dce(pe: PartialEvalTrace, invars, out_atoms) -> ClosedJaxpr:
    """The jaxpr staged by ``pe`` without equations (or residuals) the outputs do not need."""
    jaxpr, _ = dce_jaxpr(Jaxpr(pe.const_order, invars, out_atoms, pe.eqns))
    live = set(jaxpr.constvars)
    consts = [c for v, c in zip(pe.const_order, pe.const_vals) if v in live]
    return ClosedJaxpr(jaxpr, consts)


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
    return _closed_dce(pe, [a.var for a in args], out_atoms)


def _inline_pjit(trace, args, params):
    """Partially evaluate a jit by evaluating its body in this trace (known parts run now)."""
    from plax.core.jaxpr import eval_jaxpr
    with set_current_trace(trace):
        return eval_jaxpr(params["jaxpr"].jaxpr, params["jaxpr"].consts, *args)


# (jaxpr, unknown-input mask, input avals) -> _Split; jits stay jits through linearize.
_split_cache: dict = {}


class _Split:
    """A jit's body split into a known jit (known outputs + residuals) and an unknown one
    (residuals + unknown inputs -> unknown outputs)."""

    __slots__ = ("known", "known_consts", "unknown", "out_unknown", "num_res")

    def __init__(self, known, known_consts, unknown, out_unknown, num_res):
        self.known, self.known_consts, self.unknown = known, known_consts, unknown
        self.out_unknown, self.num_res = out_unknown, num_res


def dce_with_consts(jaxpr: Jaxpr, consts):
    """``jaxpr`` without dead equations, and the consts of the constvars it still uses."""
    new, _ = dce_jaxpr(jaxpr)
    live = set(new.constvars)
    return new, [c for v, c in zip(jaxpr.constvars, consts) if v in live]


def as_callee(jaxpr: Jaxpr) -> ClosedJaxpr:
    """A jit body taking its constants as leading arguments."""
    return ClosedJaxpr(Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.outvars,
                             jaxpr.eqns), [])


def _split_pjit(closed: ClosedJaxpr, unknown, avals, name) -> _Split:
    from plax.core.jaxpr import eval_jaxpr
    from plax.core.staging import trace_to_jaxpr
    box = {}

    def known_fun(*known_args):
        pe = PartialEvalTrace(current_trace(), f"partial_eval({name})")
        it = iter(known_args)
        ins = [pe.new_arg(a) if u else next(it) for a, u in zip(avals, unknown)]
        try:
            with set_current_trace(pe):
                outs = eval_jaxpr(closed.jaxpr, closed.consts, *ins)
        finally:
            pe.finish()
        out_unknown = tuple(pe.is_unknown(o) for o in outs)
        unknown_jaxpr, res = dce_with_consts(
            Jaxpr(pe.const_order, [t.var for t, u in zip(ins, unknown) if u],
                  [o.var for o, u in zip(outs, out_unknown) if u], pe.eqns), pe.const_vals)
        box["unknown"], box["out_unknown"], box["num_res"] = unknown_jaxpr, out_unknown, len(res)
        return [o for o, u in zip(outs, out_unknown) if not u] + res

    known_jaxpr, consts = dce_with_consts(*trace_to_jaxpr(
        known_fun, [a for a, u in zip(avals, unknown) if not u], description=name))
    return _Split(as_callee(known_jaxpr), consts, as_callee(box["unknown"]),
                  box["out_unknown"], box["num_res"])


def _partial_eval_pjit(trace, args, params):
    """Run the known part of a jit now (as a jit) and stage the rest as a jit of residuals."""
    from plax.core.trace import Tracer
    from plax.lax.pjit import pjit_p
    if params["inline"]:
        return _inline_pjit(trace, args, params)
    closed = params["jaxpr"]
    unknown = tuple(trace.is_unknown(a) for a in args)
    avals = tuple(get_aval(a) for a in args)
    key = (closed, unknown, avals)
    split = _split_cache.get(key)
    if split is None:
        with set_current_trace(trace.parent):
            split = _split_pjit(closed, unknown, avals, params["name"])
        if not any(isinstance(c, Tracer) for c in split.known_consts):
            _split_cache[key] = split
    known_in = [*split.known_consts, *(a for a, u in zip(args, unknown) if not u)]
    with set_current_trace(trace.parent):
        known_out = pjit_p.bind(*known_in, **dict(
            params, jaxpr=split.known, donated_invars=(False,) * len(known_in)))
    n_known = len(known_out) - split.num_res
    unknown_out = []
    if any(split.out_unknown):
        unknown_in = [*known_out[n_known:], *(a for a, u in zip(args, unknown) if u)]
        unknown_out = StagingTrace.process_primitive(trace, pjit_p, unknown_in, dict(
            params, jaxpr=split.unknown, donated_invars=(False,) * len(unknown_in)))
    k, u = iter(known_out[:n_known]), iter(unknown_out)
    return [next(u) if unk else next(k) for unk in split.out_unknown]


def _register():
    from plax.lax.pjit import pjit_p
    partial_eval_rules[pjit_p] = _partial_eval_pjit


_register()
