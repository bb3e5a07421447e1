"""Block-scaled contractions: ``scaled_dot`` and its primitive.

Each operand comes with a scale array of the same rank whose contracting dimensions are
smaller by a whole factor (the block size): every block of that many consecutive operand
entries is multiplied by one scale entry before the contraction (the microscaling formats'
matmul, e.g. float8 values with float8_e8m0fnu scales). On CPU it is computed as written:
operands and scales in float32, the scales repeated over their blocks, one dot_general,
the result in ``preferred_element_type`` (bfloat16 unless given). As in JAX it batches under
vmap but has no derivative.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering
from plax.core.trace import get_aval
from plax.first_order import conversion, dot, shapes
from plax.first_order.arithmetic import mul
from plax.first_order.batch_util import batch_size_of, move_batch_dim
from plax.lowering.inline import lower_fun

__all__ = ["scaled_dot"]

_F32 = np.dtype(np.float32)
scaled_dot_p = Primitive("scaled_dot")


def _check_scale(side: str, x, scale, contracting) -> None:
    if scale.ndim != x.ndim:
        raise TypeError(f"scaled_dot: {side}_scale must have the rank of {side} ({x.ndim}), got "
                        f"shape {scale.shape} for {side} of shape {x.shape}.")
    for d in range(x.ndim):
        if d in contracting:
            if scale.shape[d] == 0 or x.shape[d] % scale.shape[d]:
                raise TypeError(f"{side.upper()} contracting dim {d} of size {x.shape[d]} must be "
                                f"divisible by its scale's dim size {scale.shape[d]}.")
        elif scale.shape[d] != x.shape[d]:
            raise TypeError(f"scaled_dot: {side}_scale must match {side} outside the contracting "
                            f"dimensions, got {scale.shape} for {side} of shape {x.shape}.")


def _abstract(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers, preferred_element_type):
    (lc, rc), _ = dimension_numbers
    _check_scale("lhs", lhs, lhs_scale, lc)
    _check_scale("rhs", rhs, rhs_scale, rc)
    shape = dot._dot_general_shape(lhs, rhs, dimension_numbers)
    return ShapedArray(shape, preferred_element_type)


def _scaled(x, scale, contracting):
    """``x`` (float32) times ``scale`` repeated over its blocks along the contracting dims."""
    x = conversion.convert_element_type(x, _F32)
    scale = conversion.convert_element_type(scale, _F32)
    for d in contracting:
        s_shape = get_aval(scale).shape
        n, block = s_shape[d], get_aval(x).shape[d] // s_shape[d]
        if block == 1:
            continue
        wide = s_shape[:d + 1] + (block,) + s_shape[d + 1:]
        dims = tuple(i if i <= d else i + 1 for i in range(len(s_shape)))
        scale = shapes.reshape(shapes.broadcast_in_dim(scale, wide, dims),
                               s_shape[:d] + (n * block,) + s_shape[d + 1:])
    return mul(x, scale)


def _composite(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers, preferred_element_type):
    (lc, rc), _ = dimension_numbers
    out = dot.dot_general(_scaled(lhs, lhs_scale, lc), _scaled(rhs, rhs_scale, rc),
                          dimension_numbers, preferred_element_type=_F32)
    return conversion.convert_element_type(out, preferred_element_type)


def _batch(axis_data, vals, dims, *, dimension_numbers, preferred_element_type):
    """Every operand batched at 0 (unbatched ones broadcast), a new leading batch dimension."""
    size = batch_size_of(vals, dims)
    vals = [move_batch_dim(v, d, 0, size) for v, d in zip(vals, dims)]
    (lc, rc), (lb, rb) = dimension_numbers
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    new = ((up(lc), up(rc)), ((0,) + up(lb), (0,) + up(rb)))
    return scaled_dot_p.bind(*vals, dimension_numbers=new,
                             preferred_element_type=preferred_element_type), 0


abstract_eval_rules[scaled_dot_p] = _abstract
register_lowering(scaled_dot_p, lower_fun(_composite))
batch_rules[scaled_dot_p] = _batch


def _ones_scale(x, contracting):
    shape = tuple(1 if d in contracting else s for d, s in enumerate(get_aval(x).shape))
    return shapes.broadcast_in_dim(np.ones((), _F32), shape, ())


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """``dot_general`` of ``lhs`` and ``rhs`` with each operand's blocks along the contracting
    dimensions multiplied by its scale (see the module docstring); a missing scale is 1.
    ``dimension_numbers`` defaults to a matmul (2-D) or a batched matmul (3-D)."""
    ndim = get_aval(lhs).ndim
    if dimension_numbers is None:
        if ndim == 2:
            dimension_numbers = (((1,), (0,)), ((), ()))
        elif ndim == 3:
            dimension_numbers = (((2,), (1,)), ((0,), (0,)))
        else:
            raise ValueError(f"scaled_dot: dimension_numbers must be given for operands of rank "
                             f"{ndim} (the default covers 2-D and 3-D operands).")
    dn = dot._canonical_dimension_numbers(dimension_numbers)
    (lc, rc), _ = dn
    if lhs_scale is None:
        lhs_scale = _ones_scale(lhs, lc)
    if rhs_scale is None:
        rhs_scale = _ones_scale(rhs, rc)
    pref = dtypes.canonicalize_user_dtype(
        "bfloat16" if preferred_element_type is None else preferred_element_type,
        "preferred_element_type")
    return scaled_dot_p.bind(lhs, rhs, lhs_scale, rhs_scale, dimension_numbers=dn,
                             preferred_element_type=pref)
