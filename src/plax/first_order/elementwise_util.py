"""Factories for elementwise primitives, and the helpers their rules share.

``unop`` and ``binop`` declare a primitive from one row (name, accepted dtypes,
StableHLO op): each creates the primitive, registers its abstract evaluation,
its lowering and its batching rule (``vectorized`` for one operand,
``broadcasting`` for two), and returns the primitive with its public function.
Primitives with special typing or lowering register their rules by hand, in
their family's module.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray, unchecked_shaped_array
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order.batch_util import broadcasting, vectorized
from plax.first_order.common import check_dtype, check_same_dtypes, check_same_shapes, weak_of
from plax.first_order.shapes import broadcast_in_dim


def standard_lowering(op: str):
    """Lower to one StableHLO op, first broadcasting rank-0 and size-1 operands."""
    def rule(ctx, *args, **params):
        out_shape = ctx.avals_out[0].shape
        in_avals = ctx.avals_in
        if any(a.shape != out_shape for a in in_avals):
            args = [ctx.broadcast(x, a, a.update(shape=out_shape), range(a.ndim) if a.ndim else ())
                    for x, a in zip(args, in_avals)]
            in_avals = [a.update(shape=out_shape) for a in in_avals]
        return ctx.op1(op, list(args), in_avals)
    return rule


def named(name: str, fn, doc: str):
    """``fn`` under the public ``name``, documented by ``doc``."""
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def unop(name: str, category: str, hlo_op: str | None, doc: str, *, public: str | None = None,
         out_dtype=None):
    """A one-operand primitive accepting dtypes of ``category``, and its public function.

    The result has the operand's type, or dtype ``out_dtype(operand dtype)`` when given.
    With ``hlo_op=None`` the caller registers the lowering.
    """
    prim = Primitive(name)
    if out_dtype is None:
        def abstract(x, **params):
            check_dtype(name, x, category)
            return x
    else:
        def abstract(x):
            check_dtype(name, x, category)
            return ShapedArray(x.shape, out_dtype(x.dtype), x.weak_type)
    abstract_eval_rules[prim] = abstract
    if hlo_op is not None:
        register_lowering(prim, standard_lowering(hlo_op))
    vectorized(prim)
    return prim, named(public or name, lambda x: prim.bind(x), doc)


def binop(name: str, category: str, hlo_op: str | None, doc: str, *, public: str | None = None,
          out_bool: bool = False):
    """A two-operand primitive on operands of one dtype of ``category`` (rank-0 and size-1
    operands broadcast), and its public function. The result is bool when ``out_bool``.
    With ``hlo_op=None`` the caller registers the lowering."""
    prim = Primitive(name)
    out_dtype = np.dtype(np.bool_) if out_bool else None

    def abstract(x, y):
        check_dtype(name, x, category)
        check_dtype(name, y, category)
        dt = check_same_dtypes(public or name, x, y)
        shape = check_same_shapes(name, x, y)
        # Every field comes from checked operands: no need for ShapedArray()'s checks.
        return unchecked_shaped_array(shape, dt if out_dtype is None else out_dtype, weak_of(x, y))

    abstract_eval_rules[prim] = abstract
    if hlo_op is not None:
        register_lowering(prim, standard_lowering(hlo_op))
    broadcasting(prim)
    return prim, named(public or name, lambda x, y: prim.bind(x, y), doc)


# --- constants for differentiation rules, in the operand's dtype ----------------------------
def const(x, value):
    """``value`` as a scalar of ``x``'s dtype."""
    return np.asarray(value, get_aval(x).dtype)


def full_of(x, value):
    """``value`` in ``x``'s dtype, broadcast to ``x``'s shape."""
    return broadcast_in_dim(const(x, value), get_aval(x).shape, ())
