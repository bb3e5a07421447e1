"""Forward-mode differentiation: the JVP trace, and jvp_flat / jvp_jaxpr built on it.

A ``JVPTracer`` carries a primal and a tangent. Primitives applied to JVP
tracers run their rule from ``jvp_rules`` (a table of ``plax.core.rules``, as ``Zero``
is): ``rule(primals, tangents, **params) -> (primal_out, tangent_out)``. Tangents may
be ``Zero`` (a symbolic zero that costs nothing); rules either propagate it or
``instantiate`` it. Each trace
has its own identity, so nested differentiation never confuses perturbations.
"""
from __future__ import annotations

import numpy as np

from plax.core.caches import WeakKeyCache
from plax.core.jaxpr import ClosedJaxpr, as_mask, eval_jaxpr
from plax.core.rules import Zero, jvp_rules, tangent_aval
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Trace, Tracer, aval_text, current_trace, get_aval, set_current_trace
from plax.first_order.ad_util import instantiate as instantiate_zeros

def _part_text(x) -> str:
    if type(x) is Zero:
        return f"Zero({aval_text(x.aval)})"
    return repr(x) if isinstance(x, Tracer) else str(x)


class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def to_concrete_value(self):
        p = self.primal
        if isinstance(p, Tracer):
            return p.to_concrete_value()
        return np.asarray(p)

    def __repr__(self):
        primal = _part_text(self.primal)
        if getattr(self._trace.parent, "partial_eval", False):  # linearize, grad, vjp
            return f"GradTracer(primal={primal}, typeof(tangent)={get_aval(self.tangent).str_short()})"
        return f"JVPTracer(primal={primal}, tangent={_part_text(self.tangent)})"

    def _debug_origin(self) -> str:
        if isinstance(self.primal, Tracer):
            return self.primal._debug_origin()
        return f"The tracer was created while differentiating {self._trace.description or 'a function'}."


class JVPTrace(Trace):
    """Carries tangents alongside primals; primal and tangent ops run in the parent trace."""

    def __init__(self, parent: Trace, description: str = ""):
        super().__init__(parent, description)

    def evaluates_eagerly(self) -> bool:
        return self.parent.evaluates_eagerly()

    @property
    def main(self):
        """This jvp's identity (JAX's tag): the trace itself."""
        return self

    def to_primal_tangent(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x)
        return x, Zero(tangent_aval(get_aval(x)))

    def new(self, primal, tangent):
        return JVPTracer(self, primal, tangent)

    def maybe_new(self, primal, tangent):
        """A result of this trace: ``primal`` itself when its tangent is a symbolic zero
        (as in JAX, such a result is no tracer of this jvp), else a tracer."""
        return primal if type(tangent) is Zero else JVPTracer(self, primal, tangent)

    def process_primitive(self, prim, args, params):
        primals, tangents = zip(*(self.to_primal_tangent(x) for x in args)) if args else ((), ())
        with set_current_trace(self.parent):
            if all(type(t) is Zero for t in tangents):
                return prim.bind(*primals, **params)
            rule = jvp_rules.get(prim)
            if rule is None:
                raise NotImplementedError(
                    f"Differentiation rule for '{prim.name}' not implemented")
            out, tan = rule(primals, tangents, **params)  # tuples, as JAX's rules get
        if prim.multiple_results:
            return [self.maybe_new(o, t) for o, t in zip(out, tan)]
        return self.maybe_new(out, tan)


def jvp_flat(fun, primals, tangents, description=""):
    """Run ``fun(*flat)`` (returning a list) forward-differentiated at ``primals``."""
    trace = JVPTrace(current_trace(), description)
    ins = [trace.new(p, t) for p, t in zip(primals, tangents)]
    try:
        with set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_primal_tangent(o) for o in outs]
    finally:
        trace.finish()
    return [p for p, _ in pairs], [t for _, t in pairs]


# --- the jvp of a jaxpr (for the bodies of higher-order primitives) -------------------------
_jvp_jaxprs = WeakKeyCache("jvp_jaxpr")


def jvp_jaxpr(closed: ClosedJaxpr, nonzeros, instantiate, description: str = ""):
    """The forward-mode derivative of ``closed``, as a jaxpr.

    ``nonzeros`` says, per input, whether its tangent is an argument (else it is a
    symbolic zero); ``instantiate`` (a bool, or one per output) forces an output's
    tangent to be returned even when it is zero. Returns ``(jvp, out_nonzeros)``:
    ``jvp`` maps ``(*primals, *nonzero tangents)`` to ``(*primal outputs, *tangents
    of the outputs where out_nonzeros)``.
    """
    nonzeros = tuple(bool(n) for n in nonzeros)
    inst = as_mask(instantiate, len(closed.jaxpr.outvars), "jvp_jaxpr: instantiate")
    key = (nonzeros, inst)
    hit = _jvp_jaxprs.get(closed, key)
    if hit is not None:
        return hit
    in_avals = closed.in_avals
    n = len(in_avals)
    box = []

    def body(*args):
        it = iter(args[n:])
        tangents = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, nonzeros)]
        outs, out_tangents = jvp_flat(lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                      list(args[:n]), tangents, description)
        out_nonzeros = [type(t) is not Zero or i for t, i in zip(out_tangents, inst)]
        box.append(out_nonzeros)
        return list(outs) + [instantiate_zeros(t) for t, nz in zip(out_tangents, out_nonzeros) if nz]

    tangent_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
    jaxpr, consts = trace_to_jaxpr(body, [*in_avals, *tangent_avals],
                                   description=description or "jvp_jaxpr")
    result = (ClosedJaxpr(jaxpr, consts), box[0])
    if not any(isinstance(c, Tracer) for c in consts):
        _jvp_jaxprs.put(closed, key, result)
    return result
