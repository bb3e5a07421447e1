"""Forward-mode differentiation: the JVP trace, symbolic zeros and the jvp rule table.

A ``JVPTracer`` carries a primal and a tangent. Primitives applied to JVP
tracers run their rule from ``jvp_rules``: ``rule(primals, tangents, **params)
-> (primal_out, tangent_out)``. Tangents may be ``Zero`` (a symbolic zero that
costs nothing); rules either propagate it or ``instantiate`` it. Each trace
has its own identity, so nested differentiation never confuses perturbations.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.trace import Trace, Tracer, aval_text, get_aval, set_current_trace

jvp_rules: dict = {}


class Zero:
    """A symbolic zero tangent of type ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The tangent type of values of ``aval``: same, or float0 for integers and booleans."""
    if dtypes.is_inexact(aval.dtype):
        return aval
    return ShapedArray(aval.shape, dtypes.float0)


def zeros_like_aval(aval: ShapedArray):
    """A concrete (or staged) zero array of ``aval``'s type."""
    from plax.lax.shapes import broadcast_in_dim
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    zero = np.zeros((), aval.dtype)
    if aval.weak_type:  # a Python scalar zero keeps the weak type
        py = zero.item()
        if get_aval(py).dtype == aval.dtype:
            zero = py
    return broadcast_in_dim(zero, aval.shape, ())


def instantiate(t):
    """A real array for tangent ``t`` (a Zero becomes an array of zeros)."""
    return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(a, b):
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    from plax.lax.elementwise import add
    return add(a, b)


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

    def to_primal_tangent(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x)
        return x, Zero(tangent_aval(get_aval(x)))

    def new(self, primal, tangent):
        return JVPTracer(self, primal, tangent)

    def process_primitive(self, prim, args, params):
        primals, tangents = zip(*(self.to_primal_tangent(x) for x in args)) if args else ((), ())
        with set_current_trace(self.parent):
            if all(type(t) is Zero for t in tangents):
                out = prim.bind(*primals, **params)
                if prim.multiple_results:
                    return [self.new(o, Zero(tangent_aval(get_aval(o)))) for o in out]
                return self.new(out, Zero(tangent_aval(get_aval(out))))
            rule = jvp_rules.get(prim)
            if rule is None:
                raise NotImplementedError(
                    f"Differentiation rule for '{prim.name}' not implemented")
            out, tan = rule(list(primals), list(tangents), **params)
        if prim.multiple_results:
            return [self.new(o, t) for o, t in zip(out, tan)]
        return self.new(out, tan)


def jvp_flat(fun, primals, tangents, description=""):
    """Run ``fun(*flat)`` (returning a list) forward-differentiated at ``primals``."""
    from plax.core.trace import current_trace
    trace = JVPTrace(current_trace(), description)
    ins = [trace.new(p, t) for p, t in zip(primals, tangents)]
    try:
        with set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_primal_tangent(o) for o in outs]
    finally:
        trace.finish()
    return [p for p, _ in pairs], [t for _, t in pairs]


# --- helpers for writing rules ------------------------------------------------------------
def defjvp(prim, *per_argument):
    """Rule from one function per argument: ``fn(tangent, ans, *primals, **params)``.

    Each gives that argument's contribution to the output tangent; zero
    tangents contribute nothing.
    """
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        out = None
        for fn, t in zip(per_argument, tangents):
            if fn is None or type(t) is Zero:
                continue
            contrib = broadcast_tangent(fn(t, ans, *primals, **params), get_aval(ans).shape)
            out = contrib if out is None else add_tangents(out, contrib)
        return ans, (Zero(tangent_aval(get_aval(ans))) if out is None else out)
    jvp_rules[prim] = rule


def deflinear(prim):
    """A primitive linear in all its arguments: its tangent is itself applied to the tangents."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            zero = [Zero(tangent_aval(get_aval(a))) for a in ans] if prim.multiple_results \
                else Zero(tangent_aval(get_aval(ans)))
            return ans, zero
        return ans, prim.bind(*[instantiate(t) for t in tangents], **params)
    jvp_rules[prim] = rule


def defzero(prim):
    """A primitive whose outputs are piecewise constant (comparisons, integer ops, ...)."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if prim.multiple_results:
            return ans, [Zero(tangent_aval(get_aval(a))) for a in ans]
        return ans, Zero(tangent_aval(get_aval(ans)))
    jvp_rules[prim] = rule




def broadcast_tangent(t, shape):
    """``t`` broadcast to ``shape`` the way lax's elementwise ops broadcast operands
    (rank-0 values and size-1 dimensions)."""
    if type(t) is Zero:
        return Zero(t.aval.update(shape=shape))
    s = get_aval(t).shape
    if s == tuple(shape):
        return t
    from plax.lax.shapes import broadcast_in_dim
    return broadcast_in_dim(t, tuple(shape), tuple(range(len(s))) if s else ())
