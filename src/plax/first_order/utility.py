"""Convenience lax operations built from the primitive families: split, collapse,
broadcast_shapes, broadcast_to_rank, reciprocal, index_take, scatter_sub, mulhi, and the
reduce_precision, copy and optimization_barrier primitives."""
from __future__ import annotations

import math
import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.errors import ConcretizationTypeError
from plax.core.primitive import Primitive
from plax import tree_util
from plax.core.rules import (abstract_eval_rules, batch_rules, jvp_rules, lowering_rules,
                             register_lowering, transpose_rules)
from plax.core.trace import Tracer, get_aval
from plax.first_order import arithmetic, bitwise, comparison, conversion, indexing, shapes, slicing
from plax.first_order.ad_util import deflinear
from plax.first_order.batch_util import vectorized
from plax.first_order.common import check_dtype

__all__ = ["split", "collapse", "broadcast_shapes", "broadcast_to_rank", "reciprocal",
           "index_take", "scatter_sub", "mulhi", "reduce_precision", "reduce_precision_p",
           "copy_p", "optimization_barrier", "optimization_barrier_p"]


def _canonicalize_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis + ndim if axis < 0 else axis


def _shape(x) -> tuple:
    return tuple(get_aval(x).shape)


def split(operand, sizes, axis=0):
    """Splits ``operand`` along ``axis`` into ``len(sizes)`` chunks of the given sizes."""
    shape = _shape(operand)
    axis = _canonicalize_axis(axis, len(shape))
    sizes = tuple(operator.index(s) for s in sizes)
    if any(s < 0 for s in sizes):
        raise ValueError(f"Sizes passed to split must be nonnegative, got {list(sizes)}")
    if sum(sizes) != shape[axis]:
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                         f"operand shape {list(shape)}")
    out, start = [], 0
    for s in sizes:
        out.append(slicing.slice_in_dim(operand, start, start + s, axis=axis))
        start += s
    return out


def collapse(operand, start_dimension, stop_dimension=None):
    """Collapses dimensions ``[start_dimension, stop_dimension)`` of ``operand`` into one."""
    shape = _shape(operand)
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise ValueError(f"Invalid dimension range passed to collapse: {shape}"
                         f"[{start_dimension}:{stop_dimension}]")
    size = math.prod(shape[lo:hi])
    return shapes.reshape(operand, shape[:lo] + (size,) + shape[hi:])


def broadcast_shapes(*shapes_):
    """The shape that NumPy-style broadcasting of ``shapes`` gives."""
    if len(shapes_) == 1:
        return tuple(shapes_[0])
    shapes_ = [tuple(operator.index(d) for d in s) for s in shapes_]
    ndim = max((len(s) for s in shapes_), default=0)
    padded = [(1,) * (ndim - len(s)) + s for s in shapes_]
    out = []
    for dims in zip(*padded):
        non1 = {d for d in dims if d != 1}
        if len(non1) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes_)}")
        out.append(non1.pop() if non1 else 1)
    return tuple(out)


def broadcast_to_rank(x, rank):
    """Adds leading dimensions of ``1`` to give ``x`` rank ``rank``."""
    ndim = len(_shape(x))
    if ndim == rank:
        return shapes.reshape(x, _shape(x))
    return shapes.broadcast(x, (1,) * (rank - ndim))


def reciprocal(x):
    r"""Elementwise reciprocal: :math:`1 \over x`."""
    return arithmetic.integer_pow(x, -1)


def index_take(src, idxs, axes):
    """Gathers ``src`` at the index arrays ``idxs`` along ``axes`` (indices wrap modulo the
    axis sizes)."""
    src_shape = _shape(src)
    axes = tuple(operator.index(a) for a in axes)
    idx_list = list(idxs)
    indices = shapes.concatenate([shapes.expand_dims(i, (1,)) for i in idx_list], 1)
    idx_aval = get_aval(indices)
    max_idx = np.array([src_shape[ax] for ax in axes], idx_aval.dtype)
    max_idx = shapes.broadcast_in_dim(max_idx, idx_aval.shape, (idx_aval.ndim - 1,))
    # Python's %: the result has the divisor's sign.
    r = arithmetic.rem(indices, max_idx)
    if not dtypes.is_unsigned(idx_aval.dtype):
        zero = np.zeros((), idx_aval.dtype)
        r = comparison.select(comparison.lt(r, zero), arithmetic.add(r, max_idx), r)
    slice_sizes = list(src_shape)
    for ax in axes:
        slice_sizes[ax] = 1
    offset_dims = tuple(range(1, len(src_shape) - idx_aval.shape[1] + 1))
    dnums = indexing.GatherDimensionNumbers(offset_dims=offset_dims,
                                            collapsed_slice_dims=axes, start_index_map=axes)
    return indexing.gather(src, r, dimension_numbers=dnums, slice_sizes=tuple(slice_sizes))


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """``operand`` with ``updates`` subtracted at the windows the indices select."""
    return indexing.scatter_add(operand, scatter_indices, arithmetic.neg(updates),
                                dimension_numbers, indices_are_sorted=indices_are_sorted,
                                unique_indices=unique_indices, mode=mode)


_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def mulhi(x, y, /):
    r"""Elementwise multiply-high: the upper N bits of the 2N-bit product of N-bit integers."""
    xa, ya = get_aval(x), get_aval(y)
    check_dtype("mulhi", xa, "int")
    check_dtype("mulhi", ya, "int")
    if xa.dtype != ya.dtype:
        raise TypeError("lax.mulhi requires arguments to have the same dtypes, got "
                        f"{xa.dtype.name}, {ya.dtype.name}.")
    dt = np.dtype(xa.dtype)
    bits = dt.itemsize * 8
    udt = np.dtype(_UNSIGNED[bits])
    signed = not dtypes.is_unsigned(dt)
    u = conversion.bitcast_convert_type(x, udt) if signed else x
    v = conversion.bitcast_convert_type(y, udt) if signed else y
    h = bits // 2
    mask, sh = udt.type((1 << h) - 1), udt.type(h)
    band, shr, add, mul = (bitwise.bitwise_and, bitwise.shift_right_logical, arithmetic.add,
                           arithmetic.mul)
    a0, a1 = band(u, mask), shr(u, sh)
    b0, b1 = band(v, mask), shr(v, sh)
    t = mul(a0, b0)
    k = shr(t, sh)
    t = add(mul(a1, b0), k)
    w1, w2 = band(t, mask), shr(t, sh)
    t = add(mul(a0, b1), w1)
    k = shr(t, sh)
    hi = add(add(mul(a1, b1), w2), k)
    if signed:
        # Signed correction: subtract y where x < 0 and x where y < 0 (mod 2**N).
        sign = dt.type(bits - 1)
        mx = conversion.bitcast_convert_type(bitwise.shift_right_arithmetic(x, sign), udt)
        my = conversion.bitcast_convert_type(bitwise.shift_right_arithmetic(y, sign), udt)
        hi = arithmetic.sub(arithmetic.sub(hi, band(mx, v)), band(my, u))
        hi = conversion.bitcast_convert_type(hi, dt)
    return hi


# --- reduce_precision ---------------------------------------------------------------------
reduce_precision_p = Primitive("reduce_precision")


def _reduce_precision_abstract(x, *, exponent_bits, mantissa_bits):
    check_dtype("reduce_precision", x, "float")
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(
            f"reduce_precision: mantissa_bits must be non-negative; got {mantissa_bits}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _reduce_precision_lowering(ctx, x, *, exponent_bits, mantissa_bits):
    return ctx.op1("stablehlo.reduce_precision", [x],
                   props=f"exponent_bits = {int(exponent_bits)} : i32, "
                         f"mantissa_bits = {int(mantissa_bits)} : i32")


def _reduce_precision_transpose(ct, x, *, exponent_bits, mantissa_bits):
    return [reduce_precision_p.bind(ct, exponent_bits=exponent_bits,
                                    mantissa_bits=mantissa_bits)]


abstract_eval_rules[reduce_precision_p] = _reduce_precision_abstract
register_lowering(reduce_precision_p, _reduce_precision_lowering)
deflinear(reduce_precision_p)
transpose_rules[reduce_precision_p] = _reduce_precision_transpose
vectorized(reduce_precision_p)


def _static_bits(v, name: str) -> int:
    if isinstance(v, Tracer):
        val = v.to_concrete_value()
        if val is None:
            raise ConcretizationTypeError(
                v, f"The {name} argument of lax.reduce_precision must be static.")
        v = val
    if isinstance(v, np.ndarray):
        v = v.item() if v.ndim == 0 else v
    return operator.index(v)


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """Rounds ``operand`` to a floating-point format with ``exponent_bits`` exponent bits and
    ``mantissa_bits`` mantissa bits (XLA's ReducePrecision)."""
    exponent_bits = _static_bits(exponent_bits, "exponent_bits")
    mantissa_bits = _static_bits(mantissa_bits, "mantissa_bits")
    return reduce_precision_p.bind(operand, exponent_bits=exponent_bits,
                                   mantissa_bits=mantissa_bits)


# --- copy ---------------------------------------------------------------------------------
# An array's copy in a new buffer (jnp.array(x, copy=True), jnp.copy, x.copy()): arrays are
# immutable, but donation tells buffers apart, so a donated copy must not take the original
# with it. Inside a compiled program it is the value itself (XLA copies where it must).
copy_p = Primitive("copy")
abstract_eval_rules[copy_p] = lambda x: x
register_lowering(copy_p, lambda ctx, x: x)
deflinear(copy_p)
transpose_rules[copy_p] = lambda ct, x: [copy_p.bind(ct)]
vectorized(copy_p)


# --- optimization_barrier -----------------------------------------------------------------
optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
abstract_eval_rules[optimization_barrier_p] = lambda *avals: list(avals)
lowering_rules[optimization_barrier_p] = lambda ctx, *args: ctx.op(
    "stablehlo.optimization_barrier", list(args))


def _barrier_jvp(primals, tangents):
    outs = optimization_barrier_p.bind(*primals)
    return outs, list(tangents)


jvp_rules[optimization_barrier_p] = _barrier_jvp
transpose_rules[optimization_barrier_p] = lambda cts, *args: list(cts)
batch_rules[optimization_barrier_p] = lambda axis, vals, dims: (
    optimization_barrier_p.bind(*vals), list(dims))


def optimization_barrier(operand):
    """The identity, but XLA may not move computation across it (a pytree of arrays)."""
    leaves, tree = tree_util.tree_flatten(operand)
    return tree_util.tree_unflatten(tree, optimization_barrier_p.bind(*leaves))
