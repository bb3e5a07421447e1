"""Helpers for writing differentiation rules: zeros, tangent sums, and rule factories.

They build tangents out of lax operations, so they live in lax (below the
transformations, which import them) rather than in ``plax.transforms``. The families
register their rules with these factories while they are being imported, so this module
sits below them (see the order in ``plax/lax/__init__.py``) and imports the few ops it
builds (broadcast_in_dim, add) inside the functions that use them.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.rules import (Zero, is_undefined, jvp_rules, linear_primitives, tangent_aval,
                             transpose_rules)
from plax.core.trace import get_aval


def zeros_like_aval(aval):
    """A concrete (or staged) zero array of ``aval``'s type."""
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    from plax.first_order.shapes import broadcast_in_dim
    if dtypes.is_extended(aval.dtype):  # a user's extended dtype: its rules give the zero
        dt = aval.dtype
        zero = getattr(dt._rules, "zero", None)
        if zero is None:  # (no zero of its own: its representation's)
            from plax.first_order.conversion import convert_element_type
            return convert_element_type(np.zeros(aval.shape + dt.physical_shape,
                                                 dt.physical_dtype), dt)
        return broadcast_in_dim(zero(dt), aval.shape, ())
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
    """The sum of two tangents, either of which may be a symbolic Zero."""
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    dt = get_aval(a).dtype
    if dtypes.is_extended(dt):  # a user's extended dtype: its rules say how tangents add
        return dt._rules.add(dt, a, b)
    from plax.first_order.arithmetic import add
    return add(a, b)


def broadcast_tangent(t, shape):
    """``t`` broadcast to ``shape`` the way lax's elementwise ops broadcast operands
    (rank-0 values and size-1 dimensions)."""
    if type(t) is Zero:
        return Zero(t.aval.update(shape=shape))
    s = get_aval(t).shape
    if s == tuple(shape):
        return t
    from plax.first_order.shapes import broadcast_in_dim
    return broadcast_in_dim(t, tuple(shape), tuple(range(len(s))) if s else ())


def zero_tangents_of(prim, ans):
    """Zero tangents for the output(s) ``ans`` of ``prim``."""
    if prim.multiple_results:
        return [Zero(tangent_aval(get_aval(a))) for a in ans]
    return Zero(tangent_aval(get_aval(ans)))


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
    """A primitive linear in all its arguments: its tangent is itself applied to the tangents.
    It is marked linear, so it must also register a transpose rule."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            return ans, zero_tangents_of(prim, ans)
        return ans, prim.bind(*[instantiate(t) for t in tangents], **params)
    jvp_rules[prim] = rule
    linear_primitives.add(prim)


def defbilinear(prim, lhs_rule, rhs_rule):
    """A primitive linear in each of its two arguments separately (mul, dot_general, conv).

    Its tangent is ``prim(dx, y) + prim(x, dy)``. Transposed, one argument is the
    linear unknown and the other is known: ``lhs_rule(ct, x, y, **params)`` gives x's
    cotangent when x is the unknown, ``rhs_rule(ct, x, y, **params)`` gives y's.
    """
    defjvp(prim, lambda g, ans, x, y, **params: prim.bind(g, y, **params),
           lambda g, ans, x, y, **params: prim.bind(x, g, **params))

    def transpose(ct, x, y, **params):
        if is_undefined(x) == is_undefined(y):
            raise ValueError(f"{prim.name} is not linear in both operands at once: it is "
                             "bilinear, so exactly one must be unknown (linear) to transpose it.")
        if is_undefined(x):
            return [lhs_rule(ct, x, y, **params), None]
        return [None, rhs_rule(ct, x, y, **params)]
    transpose_rules[prim] = transpose


def defzero(prim):
    """A primitive whose outputs are piecewise constant (comparisons, integer ops, ...)."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, zero_tangents_of(prim, ans)
    jvp_rules[prim] = rule
