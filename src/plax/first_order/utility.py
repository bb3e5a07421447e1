"""Convenience lax operations built from the primitive families: collapse, broadcast_shapes,
broadcast_to_rank, broadcast_like, reciprocal, index_take, scatter_sub, shape_as_value; the
split, tile, stack, unstack and mulhi primitives; empty, dce_sink and stage; and the
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
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, effectful_primitives,
                             impl_rules, jvp_rules, lowering_rules, out_sharding_params,
                             register_lowering, transpose_rules)
from plax.core.sharding_types import like, sharding_rules
from plax.core.trace import Tracer, get_aval
from plax.first_order import arithmetic, bitwise, comparison, conversion, indexing, shapes, slicing
from plax.first_order.ad_util import deflinear, defzero, instantiate
from plax.first_order.batch_util import batch_size_of, move_batch_dim, vectorized
from plax.first_order.common import check_dtype, check_same_dtypes, shape_tuple
from plax.first_order.elementwise_util import binop
from plax.lowering.inline import lower_fun
from plax.sharding.named import out_sharding_param

__all__ = ["split", "collapse", "broadcast_shapes", "broadcast_to_rank", "broadcast_like",
           "reciprocal", "index_take", "scatter_sub", "mulhi", "reduce_precision",
           "reduce_precision_p", "copy_p", "optimization_barrier", "optimization_barrier_p",
           "split_p", "tile", "tile_p", "stack", "stack_p", "unstack", "unstack_p", "mulhi_p",
           "empty", "dce_sink", "dce_sink_p", "stage", "stage_p", "shape_as_value"]


def _canonicalize_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis + ndim if axis < 0 else axis


def _shape(x) -> tuple:
    return tuple(get_aval(x).shape)


# --- split ----------------------------------------------------------------------------------
split_p = Primitive("split", multiple_results=True)


def _split_abstract(x, *, sizes, axis):
    return [x.update(shape=x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]


def _split_pieces(x, *, sizes, axis):
    out, start = [], 0
    for s in sizes:
        out.append(slicing.slice_in_dim(x, start, start + s, axis=axis))
        start += s
    return out


def _split_transpose(cts, x, *, sizes, axis):
    cts = [instantiate(Zero(a)) if type(ct) is Zero else ct
           for ct, a in zip(cts, _split_abstract(x.aval, sizes=sizes, axis=axis))]
    return [shapes.concatenate(cts, axis)]


def _split_batch(axis_data, vals, dims, *, sizes, axis):
    (x,), (d,) = vals, dims
    axis = axis + (d <= axis)
    return split_p.bind(x, sizes=sizes, axis=axis), [d] * len(sizes)


abstract_eval_rules[split_p] = _split_abstract
register_lowering(split_p, lower_fun(_split_pieces, multiple_results=True))
deflinear(split_p)
transpose_rules[split_p] = _split_transpose
batch_rules[split_p] = _split_batch


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
    return split_p.bind(operand, sizes=sizes, axis=axis)


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


scatter_sub = indexing.scatter_sub  # the scatter-sub primitive's function (indexing.py)


_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _mulhi_words(x, y):
    """The high half of each product, from half-width partial products (XLA has no mulhi)."""
    dt = np.dtype(get_aval(x).dtype)
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


mulhi_p, mulhi = binop("mulhi", "int", None, "Elementwise multiply-high: the upper N bits of "
                       "the 2N-bit product of N-bit integers.")
register_lowering(mulhi_p, lower_fun(_mulhi_words))
defzero(mulhi_p)


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


# --- tile ---------------------------------------------------------------------------------
tile_p = Primitive("tile")


def _tile_abstract(x, *, reps):
    return x.update(shape=tuple(s * r for s, r in zip(x.shape, reps)))


def _tiled(x, *, reps):
    """Each dimension ``s`` repeated ``r`` times: broadcast to ``(r0, s0, r1, s1, ...)``, merge."""
    shape = _shape(x)
    wide = tuple(d for pair in zip(reps, shape) for d in pair)
    big = shapes.broadcast_in_dim(x, wide, tuple(range(1, 2 * len(shape), 2)))
    return shapes.reshape(big, tuple(s * r for s, r in zip(shape, reps)))


def _tile_transpose(ct, x, *, reps):
    shape = x.aval.shape
    wide = tuple(d for pair in zip(reps, shape) for d in pair)
    from plax.first_order.reductions import reduce_sum
    return [reduce_sum(shapes.reshape(instantiate(ct), wide), tuple(range(0, 2 * len(shape), 2)))]


def _tile_batch(axis_data, vals, dims, *, reps):
    (x,), (d,) = vals, dims
    return tile_p.bind(x, reps=reps[:d] + (1,) + reps[d:]), d


abstract_eval_rules[tile_p] = _tile_abstract
register_lowering(tile_p, lower_fun(_tiled))
deflinear(tile_p)
transpose_rules[tile_p] = _tile_transpose
batch_rules[tile_p] = _tile_batch


def tile(operand, reps):
    """``operand`` repeated ``reps[i]`` times along each dimension ``i`` (one entry per
    dimension)."""
    reps = tuple(operator.index(r) for r in reps)
    ndim = len(_shape(operand))
    if len(reps) != ndim:
        raise TypeError(f"reps length must be equal to the ndim of x, got len(reps)={len(reps)} "
                        f"and x.ndim={ndim}.")
    if any(r < 0 for r in reps):
        raise ValueError(f"lax.tile: reps must be nonnegative, got {reps}.")
    return tile_p.bind(operand, reps=reps)


# --- stack and unstack --------------------------------------------------------------------
stack_p = Primitive("stack")


def _stack_abstract(*xs, axis):
    first = xs[0]
    if any(x.shape != first.shape for x in xs):
        raise ValueError("All input arrays must have the same shape. Got "
                         f"{', '.join(str(x.shape) for x in xs)}.")
    check_same_dtypes("stack", *xs)
    weak = all(x.weak_type for x in xs)
    return first.update(shape=first.shape[:axis] + (len(xs),) + first.shape[axis:],
                        weak_type=weak)


def _stacked(*xs, axis):
    return shapes.concatenate([shapes.expand_dims(x, (axis,)) for x in xs], axis)


def _stack_transpose(ct, *xs, axis):
    if type(ct) is Zero:
        return [None] * len(xs)
    return unstack_p.bind(ct, axis=axis)


def _stack_batch(axis_data, vals, dims, *, axis):
    size = batch_size_of(vals, dims)
    vals = [move_batch_dim(v, d, 0, size) for v, d in zip(vals, dims)]
    return stack_p.bind(*vals, axis=axis + 1), 0


abstract_eval_rules[stack_p] = _stack_abstract
register_lowering(stack_p, lower_fun(_stacked))
deflinear(stack_p)
transpose_rules[stack_p] = _stack_transpose
batch_rules[stack_p] = _stack_batch


def stack(operands, axis=0):
    """The arrays ``operands`` (one shape and dtype) stacked along a new dimension ``axis``."""
    operands = list(operands)
    if not operands:
        raise ValueError("lax.stack requires at least one array to stack.")
    ndim = len(_shape(operands[0]))
    axis = _canonicalize_axis(axis, ndim + 1)
    return stack_p.bind(*operands, axis=axis)


unstack_p = Primitive("unstack", multiple_results=True)


def _unstack_abstract(x, *, axis):
    piece = x.update(shape=x.shape[:axis] + x.shape[axis + 1:])
    return [piece] * x.shape[axis]


def _unstacked(x, *, axis):
    return [shapes.squeeze(slicing.slice_in_dim(x, i, i + 1, axis=axis), (axis,))
            for i in range(_shape(x)[axis])]


def _unstack_transpose(cts, x, *, axis):
    piece = _unstack_abstract(x.aval, axis=axis)
    cts = [instantiate(Zero(a)) if type(ct) is Zero else ct for ct, a in zip(cts, piece)]
    if not cts:
        return [instantiate(Zero(x.aval))]
    return [stack_p.bind(*cts, axis=axis)]


def _unstack_batch(axis_data, vals, dims, *, axis):
    (x,), (d,) = vals, dims
    x = move_batch_dim(x, d, 0, _shape(x)[d])
    outs = unstack_p.bind(x, axis=axis + 1)
    return outs, [0] * len(outs)


abstract_eval_rules[unstack_p] = _unstack_abstract
register_lowering(unstack_p, lower_fun(_unstacked, multiple_results=True))
deflinear(unstack_p)
transpose_rules[unstack_p] = _unstack_transpose
batch_rules[unstack_p] = _unstack_batch


def unstack(x, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple of arrays of one rank less."""
    ndim = len(_shape(x))
    axis = _canonicalize_axis(axis, ndim)
    return tuple(unstack_p.bind(x, axis=axis))


# --- broadcast_like and shape_as_value ---------------------------------------------------
def broadcast_like(arr, like_arr):
    """``arr`` broadcast (NumPy's rules) to the shape of ``like_arr``."""
    target = _shape(like_arr)
    src = _shape(arr)
    if len(src) > len(target):
        raise ValueError("Cannot broadcast to shape with fewer dimensions: "
                         f"arr_shape={src} shape={target}")
    lead = len(target) - len(src)
    for i, d in enumerate(src):
        if d != 1 and d != target[lead + i]:
            raise ValueError(f"Incompatible shapes for broadcasting: {src} and requested "
                             f"shape {target}")
    if src == target:
        return arr
    keep = tuple(i for i, d in enumerate(src) if d == target[lead + i])
    squeezed = shapes.reshape(arr, tuple(src[i] for i in keep)) if len(keep) != len(src) else arr
    return shapes.broadcast_in_dim(squeezed, target, tuple(lead + i for i in keep))


def shape_as_value(shape):
    """A shape as an int array (int64 when a dimension needs it), a NumPy constant."""
    shape = shape_tuple(shape, "shape_as_value shape")
    big = any(d > np.iinfo(np.int32).max for d in shape)
    dt = dtypes.canonicalize_user_dtype(np.int64 if big else np.int32)
    return np.asarray(shape, dtype=dt).reshape(len(shape))


# --- empty --------------------------------------------------------------------------------
empty_p = Primitive("empty")


def _empty_abstract(*, shape, dtype, out_sharding):
    return ShapedArray(shape, dtype)


def _empty_lowering(ctx, *, shape, dtype, out_sharding):
    # XLA CPU has no uninitialised buffers: zeros, as JAX gives there.
    aval = ctx.avals_out[0]
    scalar = aval.update(shape=())
    return ctx.broadcast(ctx.constant(np.zeros((), aval.dtype), scalar), scalar, aval, ())


def _empty_tpu_lowering(ctx, *, shape, dtype, out_sharding):
    # (a buffer XLA leaves unwritten, as JAX asks for one on a TPU)
    if not all(type(d) is int for d in shape):
        return _empty_lowering(ctx, shape=shape, dtype=dtype, out_sharding=out_sharding)
    return ctx.op("stablehlo.custom_call", [], [], ctx.avals_out,
                  props='call_target_name = "AllocateBuffer"')


def _empty_batch(axis_data, vals, dims, *, shape, dtype, out_sharding):
    return empty_p.bind(shape=(axis_data.size,) + shape, dtype=dtype, out_sharding=None), 0


abstract_eval_rules[empty_p] = _empty_abstract
register_lowering(empty_p, _empty_lowering)
register_lowering(empty_p, _empty_tpu_lowering, platform="tpu")
defzero(empty_p)
batch_rules[empty_p] = _empty_batch
out_sharding_params[empty_p] = "out_sharding"
sharding_rules[empty_p] = lambda avals_in, avals_out, *, out_sharding, **_: [
    None if out_sharding is None else like(out_sharding, out_sharding.spec)]


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` and ``dtype`` whose values are unspecified (zeros on CPU)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = shape_tuple(shape, "empty shape")
    dtype = dtypes.canonicalize_user_dtype(dtype)
    out_sharding = out_sharding_param(out_sharding, len(shape), "lax.empty")
    return empty_p.bind(shape=shape, dtype=dtype, out_sharding=out_sharding)


# --- dce_sink -----------------------------------------------------------------------------
# Marks a value as used: dead-code elimination keeps what computes it. It has no outputs and
# lowers to nothing (with ``prevent_mlir_dce`` XLA may still drop the computation on CPU).
dce_sink_p = Primitive("dce_sink", multiple_results=True)
abstract_eval_rules[dce_sink_p] = lambda x, **_: []
register_lowering(dce_sink_p, lambda ctx, x, **_: [])
impl_rules[dce_sink_p] = lambda x, **_: []
effectful_primitives.add(dce_sink_p)


def _dce_sink_jvp(primals, tangents, **params):
    dce_sink_p.bind(*primals, **params)
    return [], []


def _dce_sink_batch(axis_data, vals, dims, **params):
    dce_sink_p.bind(*vals, **params)
    return [], []


jvp_rules[dce_sink_p] = _dce_sink_jvp
batch_rules[dce_sink_p] = _dce_sink_batch


def dce_sink(val, *, prevent_mlir_dce=False):
    """Keeps every array of the pytree ``val`` alive through dead-code elimination."""
    for leaf in tree_util.tree_leaves(val):
        dce_sink_p.bind(leaf, prevent_mlir_dce=bool(prevent_mlir_dce))


# --- stage --------------------------------------------------------------------------------
stage_p = Primitive("stage")
abstract_eval_rules[stage_p] = lambda x: x
register_lowering(stage_p, lambda ctx, x: x)
deflinear(stage_p)
transpose_rules[stage_p] = lambda ct, x: [ct]
vectorized(stage_p)


def stage(x, /):
    """The identity, lifting ``x`` (a Python scalar, a NumPy array) into the current trace:
    outside any trace it gives an Array."""
    return stage_p.bind(x)
