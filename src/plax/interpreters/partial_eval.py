"""``plax.interpreters.partial_eval``: staging functions to jaxprs, as
``jax.interpreters.partial_eval``.

``trace_to_jaxpr_dynamic`` stages a ``linear_util.WrappedFun`` with plax's staging trace;
``trace_to_jaxpr_nounits`` partially evaluates one with plax's partial-evaluation trace
(work on known inputs runs now, work on unknown ones is staged); ``dce_jaxpr`` and
``dce_rules`` are plax's dead-code elimination and its rule table, whose convention
(``rule(used_outputs, eqn) -> (used_inputs, eqn or None)``) is JAX's.
"""
from __future__ import annotations

from typing import Any

from plax.core.dce import dce_jaxpr
from plax.core.jaxpr import Jaxpr
from plax.core.rules import dce_rules  # noqa: F401
from plax.higher_order.call import call_p as _call_p, closed_call_p as _closed_call_p
from plax.core.staging import StagingTracer, trace_to_jaxpr
from plax.core.trace import current_trace, set_current_trace
from plax.transforms.linearize import PartialEvalTrace

DynamicJaxprTracer = StagingTracer  # the tracer of a staging (jit, make_jaxpr) trace
JaxprTracer = StagingTracer  # the staged tracer of a partial-evaluation trace
Val = Any

__all__ = ["DynamicJaxprTracer", "JaxprTracer", "PartialVal", "Val", "dce_jaxpr",
           "dce_jaxpr_call_rule", "dce_jaxpr_closed_call_rule", "dce_jaxpr_consts",
           "dce_rules", "trace_to_jaxpr_dynamic", "trace_to_jaxpr_nounits"]

# The DCE rules of a call whose body is its ``call_jaxpr`` parameter, for a library's own
# call primitives: ``dce_rules[my_call_p] = dce_jaxpr_call_rule``. The body is pruned to
# the used outputs and the equation keeps the inputs the rest reads; ``call_jaxpr`` is an
# open ``Jaxpr`` (``dce_jaxpr_call_rule``) or a ``ClosedJaxpr`` (``..._closed_call_rule``).
dce_jaxpr_call_rule = dce_rules[_call_p]
dce_jaxpr_closed_call_rule = dce_rules[_closed_call_p]


class PartialVal(tuple):
    """A value known now (``(None, const)``) or only by its type (``(aval, None)``)."""

    def __new__(cls, xs):
        pv, const = xs
        if pv is not None and const is not None:
            raise ValueError("PartialVal: a value is either known or unknown, not both")
        return tuple.__new__(cls, (pv, const))

    @classmethod
    def known(cls, const) -> "PartialVal":
        return cls((None, const))

    @classmethod
    def unknown(cls, aval) -> "PartialVal":
        return cls((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self):
        """The value, when known (else None)."""
        return self[1] if self[0] is None else None

    def get_aval(self):
        """The type of the value, known or not."""
        from plax.core.trace import get_aval
        return self[0] if self[0] is not None else get_aval(self[1])


def _arg_mask(name: str, mask, n: int) -> list:
    mask = [True] * n if mask is None else [bool(m) for m in mask]
    if len(mask) != n:
        raise ValueError(f"{name}: got {len(mask)} entries for {n} inputs")
    return mask


def trace_to_jaxpr_dynamic(fun, in_avals, *, keep_inputs=None, lower: bool = False,
                           auto_dce: bool = False):
    """Stage ``fun`` (a ``WrappedFun`` of flat inputs to a list of outputs) on inputs of
    types ``in_avals``. Returns ``(jaxpr, out_avals, consts)``: ``jaxpr``'s constvars take
    ``consts``; its invars are the inputs ``keep_inputs`` keeps (all by default)."""
    del lower
    keep = _arg_mask("trace_to_jaxpr_dynamic: keep_inputs", keep_inputs, len(in_avals))
    debug = getattr(fun, "debug_info", None)
    names = getattr(debug, "arg_names", None)
    jaxpr, consts = trace_to_jaxpr(lambda *xs: list(fun.call_wrapped(*xs)), list(in_avals),
                                   description=f"staging {getattr(fun, '__name__', 'fun')}",
                                   arg_names=list(names) if names else None)
    if not all(keep):
        jaxpr = Jaxpr(jaxpr.constvars, [v for v, k in zip(jaxpr.invars, keep) if k],
                      jaxpr.outvars, jaxpr.eqns)
    if auto_dce:
        jaxpr, _ = dce_jaxpr(jaxpr, instantiate=True)
        used = set(jaxpr.constvars)
        consts = [c for v, c in zip(jaxpr.constvars, consts) if v in used]
    return jaxpr, [v.aval for v in jaxpr.outvars], consts


def trace_to_jaxpr_nounits(fun, pvals, instantiate=False):
    """Partially evaluate ``fun`` (a ``WrappedFun``) on ``pvals`` (one ``PartialVal`` per
    input). Work on known inputs runs now; work on unknown ones is staged. Returns
    ``(jaxpr, out_pvals, consts)``: ``jaxpr`` maps the unknown inputs to the unknown
    outputs (its constvars take ``consts``), and ``out_pvals`` gives each output, known
    or not. ``instantiate`` (a bool, or one per output) forces outputs to be unknown."""
    pe = PartialEvalTrace(current_trace(), f"partial evaluation of {getattr(fun, '__name__', 'fun')}")
    args = [pe.new_arg(pv[0]) if pv[0] is not None else pv[1] for pv in pvals]
    try:
        with set_current_trace(pe):
            outs = list(fun.call_wrapped(*args))
            inst = _arg_mask("trace_to_jaxpr_nounits: instantiate",
                             [instantiate] * len(outs) if isinstance(instantiate, bool)
                             else instantiate, len(outs))
            unknown = [pe.is_unknown(o) or i for o, i in zip(outs, inst)]
            atoms = [pe.lift(o) for o, u in zip(outs, unknown) if u]
    finally:
        pe.finish()
    jaxpr = Jaxpr(pe.const_order, [a._var for a in args if pe.is_unknown(a)], atoms, pe.eqns)
    jaxpr, _ = dce_jaxpr(jaxpr, instantiate=True)
    used = set(jaxpr.constvars)
    consts = [c for v, c in zip(pe.const_order, pe.const_vals) if v in used]
    known_outs = iter(o for o, u in zip(outs, unknown) if not u)
    unknown_avals = iter(a.aval for a in atoms)
    out_pvals = [PartialVal.unknown(next(unknown_avals)) if u else PartialVal.known(next(known_outs))
                 for u in unknown]
    return jaxpr, out_pvals, consts


def dce_jaxpr_consts(jaxpr: Jaxpr, used_outputs, instantiate=False):
    """``dce_jaxpr`` treating the constvars as leading inputs: returns ``(new_jaxpr,
    used_consts, used_inputs)``, the new jaxpr's constvars being the used ones."""
    n = len(jaxpr.constvars)
    as_inputs = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.outvars, jaxpr.eqns)
    inst = [False] * n + ([instantiate] * len(jaxpr.invars) if isinstance(instantiate, bool)
                          else list(instantiate))
    new, used = dce_jaxpr(as_inputs, used_outputs, instantiate=inst)
    used_consts, used_inputs = used[:n], used[n:]
    constvars = [v for v, u in zip(jaxpr.constvars, used_consts) if u]
    return Jaxpr(constvars, new.invars[len(constvars):], new.outvars, new.eqns), \
        used_consts, used_inputs
