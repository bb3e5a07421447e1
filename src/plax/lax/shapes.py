"""Shape and slicing primitives: broadcast, reshape, transpose, squeeze, rev,
concatenate, pad, static and dynamic slices, iota.

These ops move data without arithmetic, so every result keeps its operand's
dtype and weak type (n-ary ones are weak only when all inputs are).
"""
from __future__ import annotations

import operator

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.errors import shape_type_error
from plax.core.jaxpr import param_printers
from plax.core.primitive import Primitive, abstract_eval_rules
from plax.core.trace import get_aval
from plax.lax import elementwise as E
from plax.lax.common import as_int_tuple, canonical_axis, check_dtype, check_same_dtypes, weak_of
from plax.lowering.stablehlo import i64_array, lowering_rules

__all__ = [
    "broadcast_in_dim", "broadcast", "full", "full_like", "reshape", "transpose", "squeeze",
    "expand_dims", "rev",
    "concatenate", "pad", "slice", "slice_in_dim", "index_in_dim", "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
    "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim", "iota", "broadcasted_iota",
]


# --- shared checks ----------------------------------------------------------------------
def _shape_tuple(shape, name: str) -> tuple:
    """A static shape given as a sequence of ints (or one int)."""
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    try:
        return tuple(int(operator.index(d)) for d in shape)
    except TypeError:
        raise shape_type_error(shape, name) from None


def _check_nonnegative(prim: str, what: str, values: tuple) -> None:
    if any(v < 0 for v in values):
        raise TypeError(f"{prim} {what} must have every element be nonnegative, got {values}.")


def _is_permutation(perm: tuple, ndim: int) -> bool:
    return sorted(perm) == list(range(ndim))


def _check_unique_dims(prim: str, what: str, dims: tuple, ndim: int, shape) -> None:
    """Each of ``dims`` is a distinct axis in ``[0, ndim)``."""
    _check_nonnegative(prim, what, dims)
    if any(d >= ndim for d in dims):
        raise TypeError(f"{prim} {what} must all be less than operand ndim, got {what} {dims} "
                        f"for operand shape {tuple(shape)} (ndim {ndim}).")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{prim} {what} must be unique, got {dims}.")


def _is_array_value(x) -> bool:
    """Whether ``x`` is already a plax value that a no-op may return unchanged."""
    return not isinstance(x, (np.ndarray, np.generic, bool, int, float, complex))


# --- broadcast_in_dim -------------------------------------------------------------------
broadcast_in_dim_p = Primitive("broadcast_in_dim")


def _broadcast_in_dim_abstract(x, *, shape, broadcast_dimensions, sharding=None):
    _check_nonnegative("broadcast_in_dim", "shape", shape)
    dims = broadcast_dimensions
    if len(dims) != x.ndim:
        raise TypeError("broadcast_in_dim broadcast_dimensions must have length equal to operand "
                        f"ndim; got broadcast_dimensions {dims} for operand shape {x.shape} "
                        f"(ndim {x.ndim}).")
    if any(not 0 <= d < len(shape) for d in dims) or len(set(dims)) != len(dims):
        raise TypeError("broadcast_in_dim broadcast_dimensions must be distinct output dimensions, "
                        f"got {dims} for operand shape {x.shape} and target shape {shape}.")
    if any(x.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
        raise TypeError("broadcast_in_dim operand dimension sizes must either be 1, or be equal to "
                        "their corresponding dimensions in the target broadcast shape; got operand "
                        f"of shape {x.shape}, target broadcast shape {shape}, broadcast_dimensions "
                        f"{dims}.")
    return ShapedArray(shape, x.dtype, x.weak_type)


abstract_eval_rules[broadcast_in_dim_p] = _broadcast_in_dim_abstract
lowering_rules[broadcast_in_dim_p] = lambda ctx, x, *, shape, broadcast_dimensions, sharding=None: \
    ctx.op1("stablehlo.broadcast_in_dim", [x],
            props=f"broadcast_dimensions = {i64_array(broadcast_dimensions)}")
# As in JAX's jaxprs, the result type already shows the shape; hide it.
param_printers[broadcast_in_dim_p] = lambda p: {
    k: v for k, v in p.items() if k == "broadcast_dimensions" and v != ()}


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Broadcast ``operand`` to ``shape``; its axis i becomes axis broadcast_dimensions[i]."""
    shape = _shape_tuple(shape, "broadcast_in_dim shape")
    dims = as_int_tuple(broadcast_dimensions, "broadcast_in_dim broadcast_dimensions")
    aval = get_aval(operand)
    if aval.shape == shape and dims == tuple(range(aval.ndim)) and _is_array_value(operand):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims, sharding=None)


def broadcast(operand, sizes):
    """Add leading dimensions of the given ``sizes`` to ``operand``."""
    sizes = _shape_tuple(sizes, "broadcast sizes")
    aval = get_aval(operand)
    return broadcast_in_dim(operand, sizes + aval.shape,
                            tuple(range(len(sizes), len(sizes) + aval.ndim)))


def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of ``shape`` filled with the scalar ``fill_value`` (in ``dtype`` if given,
    else the value's own dtype, weakly typed for a Python scalar)."""
    if dtype is None:
        dt, weak = dtypes.dtype(fill_value, canonicalize=True), dtypes.is_weakly_typed(fill_value)
    else:
        dt, weak = dtypes.canonicalize_user_dtype(dtype), False
    return _full(shape, fill_value, dt, weak, sharding)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """``full`` with the shape and dtype (and weak type) of ``x`` unless given."""
    aval = get_aval(x)
    if dtype is None:
        dt, weak = aval.dtype, aval.weak_type
    else:
        dt, weak = dtypes.canonicalize_user_dtype(dtype), False
    return _full(aval.shape if shape is None else shape, fill_value, dt, weak, sharding)


def _full(shape, fill_value, dt, weak: bool, sharding):
    from plax.core.avals import weak_host_value
    shape = _shape_tuple(shape, "full shape")
    traced = hasattr(fill_value, "aval")  # an Array or a tracer
    fill_shape = get_aval(fill_value).shape if traced else np.shape(fill_value)
    if fill_shape != ():
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{fill_shape}.")
    if not traced:
        if type(fill_value) is int and dtypes.is_integer(dt):
            fill_value = np.asarray(fill_value).astype(dt)  # wraps around, as a conversion does
        fill = weak_host_value(fill_value, dt) if weak else np.array(fill_value, dt)
    elif (get_aval(fill_value).dtype, get_aval(fill_value).weak_type) != (dt, weak):
        fill = E._convert_weak(fill_value, dt, weak)
    else:
        fill = fill_value
    out = broadcast_in_dim(fill, shape, ())
    if sharding is not None:
        from plax.api import device_put
        out = device_put(out, sharding)
    return out


# --- reshape ----------------------------------------------------------------------------
reshape_p = Primitive("reshape")


def _reshape_abstract(x, *, new_sizes, dimensions, sharding=None):
    if any(d < 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must all be nonnegative, got {new_sizes}.")
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        # A ValueError, as JAX's (which comes from the StableHLO verifier).
        raise ValueError(f"reshape total size must be unchanged, got new_sizes {new_sizes} "
                        f"(size {int(np.prod(new_sizes, dtype=np.int64))}) for operand shape "
                        f"{x.shape} (size {x.size}).")
    if dimensions is not None and not _is_permutation(dimensions, x.ndim):
        raise TypeError("reshape dimensions must be a permutation of operand dimensions, got "
                        f"dimensions {dimensions} for shape {x.shape}.")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _reshape_lowering(ctx, x, *, new_sizes, dimensions, sharding=None):
    aval = ctx.avals_in[0]
    if dimensions is not None:
        moved = aval.update(shape=tuple(aval.shape[d] for d in dimensions))
        x = ctx.op1("stablehlo.transpose", [x], [aval], moved,
                    props=f"permutation = {i64_array(dimensions)}")
        aval = moved
    return ctx.op1("stablehlo.reshape", [x], [aval])


abstract_eval_rules[reshape_p] = _reshape_abstract
lowering_rules[reshape_p] = _reshape_lowering


def reshape(operand, new_sizes, dimensions=None):
    """Reshape ``operand`` to ``new_sizes``, first transposing by ``dimensions`` if given."""
    new_sizes = _shape_tuple(new_sizes, "reshape new_sizes")
    aval = get_aval(operand)
    if dimensions is not None:
        dimensions = as_int_tuple(dimensions, "reshape dimensions")
        if dimensions == tuple(range(aval.ndim)):
            dimensions = None
    if new_sizes == aval.shape and dimensions is None and _is_array_value(operand):
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dimensions, sharding=None)


# --- transpose --------------------------------------------------------------------------
transpose_p = Primitive("transpose")


def _transpose_abstract(x, *, permutation):
    if not _is_permutation(permutation, x.ndim):
        raise TypeError("transpose permutation isn't a permutation of operand dimensions, got "
                        f"permutation {permutation} for operand shape {x.shape}.")
    return x.update(shape=tuple(x.shape[p] for p in permutation))


abstract_eval_rules[transpose_p] = _transpose_abstract
lowering_rules[transpose_p] = lambda ctx, x, *, permutation: ctx.op1(
    "stablehlo.transpose", [x], props=f"permutation = {i64_array(permutation)}")


def transpose(operand, permutation):
    """Permute the axes of ``operand``: output axis i is input axis permutation[i]."""
    permutation = as_int_tuple(permutation, "transpose permutation")
    if permutation == tuple(range(len(permutation))) and _is_array_value(operand) \
            and get_aval(operand).ndim == len(permutation):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


# --- squeeze / expand_dims ----------------------------------------------------------------
squeeze_p = Primitive("squeeze")


def _squeeze_abstract(x, *, dimensions):
    _check_unique_dims("squeeze", "dimensions", dimensions, x.ndim, x.shape)
    if any(x.shape[d] != 1 for d in dimensions):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one, "
                         f"got shape={x.shape} and dimensions={dimensions}.")
    return x.update(shape=tuple(s for i, s in enumerate(x.shape) if i not in dimensions))


abstract_eval_rules[squeeze_p] = _squeeze_abstract
lowering_rules[squeeze_p] = lambda ctx, x, *, dimensions: ctx.op1("stablehlo.reshape", [x])


def squeeze(array, dimensions):
    """Remove the size-1 axes ``dimensions`` (negative values count from the end)."""
    ndim = get_aval(array).ndim
    dims = as_int_tuple(dimensions, "squeeze dimensions")
    canon = tuple(sorted(canonical_axis(d, ndim, "squeeze dimension") for d in dims))
    if len(set(canon)) != len(canon):
        raise ValueError(f"squeeze dimensions are not unique: {dims}.")
    if not canon and _is_array_value(array):
        return array
    return squeeze_p.bind(array, dimensions=canon)


def expand_dims(array, dimensions):
    """Insert size-1 axes at ``dimensions`` (result positions; negatives count from the end)."""
    aval = get_aval(array)
    dims = as_int_tuple(dimensions, "expand_dims dimensions")
    ndim_out = aval.ndim + len(dims)
    canon = []
    for d in dims:
        if not -ndim_out <= d < ndim_out:
            raise ValueError(f"expand_dims axis {d} is out of bounds for a result of dimension "
                             f"{ndim_out} (operand shape {aval.shape}).")
        canon.append(d % ndim_out)
    if len(set(canon)) != len(canon):
        raise ValueError(f"repeated axis in lax.expand_dims: {dims}.")
    if not canon:
        return array
    kept = [i for i in range(ndim_out) if i not in canon]
    shape = [1] * ndim_out
    for i, s in zip(kept, aval.shape):
        shape[i] = s
    return broadcast_in_dim(array, tuple(shape), tuple(kept))


# --- rev --------------------------------------------------------------------------------
rev_p = Primitive("rev")


def _rev_abstract(x, *, dimensions):
    _check_unique_dims("rev", "dimensions", dimensions, x.ndim, x.shape)
    return x


abstract_eval_rules[rev_p] = _rev_abstract
lowering_rules[rev_p] = lambda ctx, x, *, dimensions: ctx.op1(
    "stablehlo.reverse", [x], props=f"dimensions = {i64_array(dimensions)}")


def rev(operand, dimensions):
    """Reverse ``operand`` along each axis in ``dimensions``."""
    return rev_p.bind(operand, dimensions=as_int_tuple(dimensions, "rev dimensions"))


# --- concatenate ------------------------------------------------------------------------
concatenate_p = Primitive("concatenate")


def _concatenate_abstract(*xs, dimension):
    if not xs:
        raise ValueError("concatenate requires a non-empty sequence of arrays.")
    check_same_dtypes("concatenate", *xs)
    shapes = ", ".join(str(x.shape) for x in xs)
    if len({x.ndim for x in xs}) != 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: got "
                        f"{shapes}.")
    if not 0 <= dimension < xs[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for shapes "
                        f"{shapes}.")
    rest = {x.shape[:dimension] + x.shape[dimension + 1:] for x in xs}
    if len(rest) != 1:
        raise TypeError("Cannot concatenate arrays with shapes that differ in dimensions other "
                        f"than the one being concatenated: concatenating along dimension "
                        f"{dimension} for shapes {shapes}.")
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, weak_of(*xs))


abstract_eval_rules[concatenate_p] = _concatenate_abstract
lowering_rules[concatenate_p] = lambda ctx, *xs, dimension: ctx.op1(
    "stablehlo.concatenate", list(xs), props=f"dimension = {int(dimension)} : i64")


def concatenate(operands, dimension):
    """Join ``operands`` (same dtype, same shape except along ``dimension``) along ``dimension``."""
    operands = list(operands)
    dimension = int(dimension)
    if len(operands) == 1 and _is_array_value(operands[0]):
        _concatenate_abstract(get_aval(operands[0]), dimension=dimension)
        return operands[0]
    return concatenate_p.bind(*operands, dimension=dimension)


# --- pad --------------------------------------------------------------------------------
pad_p = Primitive("pad")


def _padded_size(size: int, lo: int, hi: int, interior: int) -> int:
    return lo + hi + size + max(size - 1, 0) * interior


def _pad_abstract(x, padding_value, *, padding_config):
    if padding_value.ndim != 0:
        raise ValueError(f"pad padding_value must be a scalar, got shape {padding_value.shape}.")
    if x.dtype != padding_value.dtype:
        raise TypeError("pad operand and padding_value must be same dtype: got "
                        f"{x.dtype.name} and {padding_value.dtype.name}.")
    if len(padding_config) != x.ndim:
        raise ValueError("length of padding_config must equal the number of axes of operand, got "
                         f"padding_config {padding_config} for operand shape {x.shape}.")
    if any(interior < 0 for _, _, interior in padding_config):
        raise ValueError("interior padding in padding_config must be nonnegative, got "
                         f"padding_config {padding_config}.")
    shape = tuple(_padded_size(s, *cfg) for s, cfg in zip(x.shape, padding_config))
    if any(s < 0 for s in shape):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{shape}, for padding_config {padding_config} and operand shape "
                         f"{x.shape}.")
    return ShapedArray(shape, x.dtype, weak_of(x, padding_value))


def _pad_lowering(ctx, x, padding_value, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    return ctx.op1("stablehlo.pad", [x, padding_value],
                   props=f"edge_padding_low = {i64_array(lo)}, edge_padding_high = "
                         f"{i64_array(hi)}, interior_padding = {i64_array(interior)}")


abstract_eval_rules[pad_p] = _pad_abstract
lowering_rules[pad_p] = _pad_lowering


def pad(operand, padding_value, padding_config):
    """Pad each axis with (low, high, interior) copies of the scalar ``padding_value``.

    Negative low/high padding removes elements from that edge.
    """
    config = []
    for cfg in padding_config:
        cfg = as_int_tuple(cfg, "pad padding_config entry")
        if len(cfg) != 3:
            raise ValueError(f"pad padding_config entries must be (low, high, interior) triples, "
                             f"got {cfg}.")
        config.append(cfg)
    return pad_p.bind(operand, padding_value, padding_config=tuple(config))


# --- static slices ----------------------------------------------------------------------
slice_p = Primitive("slice")


def _slice_abstract(x, *, start_indices, limit_indices, strides):
    if len(start_indices) != x.ndim:
        raise ValueError("slice start_indices must have length equal to the number of dimensions "
                        f"of the operand, got indices {start_indices} for operand shape {x.shape}.")
    if len(limit_indices) != len(start_indices):
        raise TypeError("slice limit_indices must have the same length as start_indices, got "
                        f"start_indices {start_indices} and limit_indices {limit_indices}.")
    if strides is not None and len(strides) != x.ndim:
        raise TypeError("slice strides must have length equal to the number of dimensions of the "
                        f"operand, got strides {strides} for operand shape {x.shape}.")
    if any(lim > s for lim, s in zip(limit_indices, x.shape)):
        raise TypeError("slice limit_indices must be less than or equal to operand shape, got "
                        f"limit_indices {limit_indices} for operand shape {x.shape}.")
    _check_nonnegative("slice", "start_indices", start_indices)
    if any(lim < st for st, lim in zip(start_indices, limit_indices)):
        raise TypeError("slice limit_indices must be greater than or equal to start_indices, got "
                        f"start_indices {start_indices} and limit_indices {limit_indices}.")
    strides = strides if strides is not None else (1,) * x.ndim
    if any(s <= 0 for s in strides):
        raise TypeError(f"slice strides must be positive, got {strides}.")
    shape = tuple((lim - st + s - 1) // s
                  for st, lim, s in zip(start_indices, limit_indices, strides))
    return x.update(shape=shape)


def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides):
    strides = strides if strides is not None else (1,) * len(start_indices)
    return ctx.op1("stablehlo.slice", [x],
                   props=f"start_indices = {i64_array(start_indices)}, limit_indices = "
                         f"{i64_array(limit_indices)}, strides = {i64_array(strides)}")


abstract_eval_rules[slice_p] = _slice_abstract
lowering_rules[slice_p] = _slice_lowering


def slice(operand, start_indices, limit_indices, strides=None):
    """The static slice ``operand[start:limit:stride]`` along every axis."""
    start = as_int_tuple(start_indices, "slice start_indices")
    limit = as_int_tuple(limit_indices, "slice limit_indices")
    strides = None if strides is None else as_int_tuple(strides, "slice strides")
    return slice_p.bind(operand, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """A static slice along one ``axis``; None bounds mean the whole axis, negatives wrap once."""
    shape = get_aval(operand).shape
    axis = canonical_axis(int(axis), len(shape))
    size = shape[axis]
    start = 0 if start_index is None else int(start_index)
    limit = size if limit_index is None else int(limit_index)
    start = start + size if start < 0 else start
    limit = limit + size if limit < 0 else limit
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, int(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """Element ``index`` (static, may be negative) along ``axis``; ``keepdims`` keeps the axis."""
    shape = get_aval(operand).shape
    axis = canonical_axis(int(axis), len(shape))
    index, size = int(index), shape[axis]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}.")
    index = index % size
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# --- dynamic slices ---------------------------------------------------------------------
def _check_start_indices(prim: str, x: ShapedArray, indices) -> None:
    if len(indices) != x.ndim:
        raise ValueError(f"Length of slice indices must match number of operand dimensions: "
                         f"{prim} needs one start index per operand dimension, got "
                         f"{len(indices)} start indices for operand shape {x.shape}.")
    if any(i.ndim != 0 for i in indices):
        raise TypeError(f"{prim} start indices must be scalars, got index shapes "
                        f"{[i.shape for i in indices]}.")
    for i in indices:
        check_dtype(prim, i, "int", "start_indices")
    if len({i.dtype for i in indices}) > 1:
        raise TypeError(f"{prim} start indices must all have the same integer dtype, got "
                        f"{', '.join(i.dtype.name for i in indices)}.")


dynamic_slice_p = Primitive("dynamic_slice")


def _dynamic_slice_abstract(x, *indices, slice_sizes):
    _check_start_indices("dynamic_slice", x, indices)
    if len(slice_sizes) != x.ndim:
        raise ValueError("dynamic_slice slice_sizes must have one size per operand dimension, got "
                        f"slice_sizes {slice_sizes} for operand shape {x.shape}.")
    _check_nonnegative("dynamic_slice", "slice_sizes", slice_sizes)
    if any(s > d for s, d in zip(slice_sizes, x.shape)):
        raise TypeError("dynamic_slice slice_sizes must be less than or equal to operand shape, "
                        f"got slice_sizes {slice_sizes} for operand shape {x.shape}.")
    return x.update(shape=slice_sizes)


abstract_eval_rules[dynamic_slice_p] = _dynamic_slice_abstract
lowering_rules[dynamic_slice_p] = lambda ctx, x, *idx, slice_sizes: ctx.op1(
    "stablehlo.dynamic_slice", [x, *idx], props=f"slice_sizes = {i64_array(slice_sizes)}")

dynamic_update_slice_p = Primitive("dynamic_update_slice")


def _dynamic_update_slice_abstract(x, update, *indices):
    check_same_dtypes("dynamic_update_slice", x, update)
    if update.ndim != x.ndim:
        raise TypeError("dynamic_update_slice update must have the same rank as operand, got "
                        f"update shape {update.shape} for operand shape {x.shape}.")
    if any(u > d for u, d in zip(update.shape, x.shape)):
        raise TypeError("dynamic_update_slice update shape must be smaller than operand shape, "
                        f"got update shape {update.shape} for operand shape {x.shape}.")
    _check_start_indices("dynamic_update_slice", x, indices)
    return x.update(weak_type=False)  # as in JAX, the result is never weak


abstract_eval_rules[dynamic_update_slice_p] = _dynamic_update_slice_abstract
lowering_rules[dynamic_update_slice_p] = lambda ctx, x, update, *idx: ctx.op1(
    "stablehlo.dynamic_update_slice", [x, update, *idx])


def _is_static_index(i) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _split_index_vector(start_indices) -> list:
    """Start indices as a list of scalars (a 1-d index array is split into its elements)."""
    if isinstance(start_indices, (list, tuple)):
        return list(start_indices)
    if isinstance(start_indices, np.ndarray) and start_indices.ndim == 1:
        return list(start_indices)
    aval = get_aval(start_indices)
    if aval.ndim != 1:
        raise TypeError(f"start_indices must be a sequence of scalars or a 1-d array, got shape "
                        f"{aval.shape}.")
    return [squeeze(slice(start_indices, (k,), (k + 1,)), (0,)) for k in range(aval.shape[0])]


def _common_index_dtype(fixed: list) -> np.dtype:
    """One dtype for all start indices; Python ints adapt to the others."""
    kinds = set(fixed)
    if not kinds:
        return dtypes.default_int_dtype()
    if len(kinds) == 1:
        return kinds.pop()
    # Mixed index dtypes (JAX rejects these): use the default index type.
    wide = any(dtypes.itemsize_bits(d) == 64 for d in kinds)
    return dtypes.canonicalize_dtype(np.int64 if wide else np.int32)


def _start_index_operands(prim: str, shape: tuple, start_indices, allow_negative) -> list:
    """Scalar operands of one integer dtype; negative indices count from the end of their axis.

    Static indices are wrapped and clipped to the dtype's range here (XLA clamps
    indices into bounds anyway); traced ones get a select on their sign.
    """
    indices = _split_index_vector(start_indices)
    if len(indices) != len(shape):
        raise ValueError(f"Length of slice indices must match number of operand dimensions: "
                         f"{prim} needs one start index per operand dimension, got "
                         f"{len(indices)} start indices for operand shape {shape}.")
    allow = ([bool(allow_negative)] * len(shape) if isinstance(allow_negative, (bool, np.bool_))
             else [bool(a) for a in allow_negative])
    if len(allow) != len(shape):
        raise TypeError(f"{prim} allow_negative_indices must be a bool or have one entry per "
                        f"operand dimension, got {allow_negative!r} for operand shape {shape}.")
    fixed = []
    for i in indices:
        if _is_static_index(i):
            if isinstance(i, np.integer):
                fixed.append(dtypes.canonicalize_dtype(i.dtype))
            continue
        aval = get_aval(i)
        if aval.ndim != 0 or not dtypes.is_integer(aval.dtype):
            raise TypeError(f"{prim} start indices must be integer scalars, got "
                            f"{aval.str_short()}.")
        fixed.append(aval.dtype)
    dt = _common_index_dtype(fixed)
    info = dtypes.iinfo(dt)
    out = []
    for i, size, neg in zip(indices, shape, allow):
        if _is_static_index(i):
            v = int(i) + size if neg and int(i) < 0 else int(i)
            out.append(np.asarray(min(max(v, int(info.min)), int(info.max)), dt)[()])
            continue
        i = _as_index_dtype(i, dt)
        if neg and not dtypes.is_unsigned(dt):
            zero, n = np.asarray(0, dt)[()], np.asarray(size, dt)[()]
            i = E.select_n(E.lt(i, zero), i, E.add(i, n))
        out.append(i)
    return out


def _as_index_dtype(i, dt: np.dtype):
    aval = get_aval(i)
    if aval.dtype == dt and not aval.weak_type:
        return i
    return E.convert_element_type_p.bind(i, new_dtype=dt, weak_type=False, sharding=None)


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """The slice of size ``slice_sizes`` at traced ``start_indices`` (clamped into bounds)."""
    shape = get_aval(operand).shape
    sizes = _shape_tuple(slice_sizes, "dynamic_slice slice_sizes")
    idx = _start_index_operands("dynamic_slice", shape, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *idx, slice_sizes=sizes)


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *, allow_negative_indices=True):
    """A dynamic slice of length ``slice_size`` along one ``axis``."""
    shape = get_aval(operand).shape
    axis = canonical_axis(int(axis), len(shape))
    starts, sizes = [0] * len(shape), list(shape)
    starts[axis], sizes[axis] = start_index, int(slice_size)
    allow = [True] * len(shape)
    allow[axis] = bool(allow_negative_indices)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *, allow_negative_indices=True):
    """Element at traced ``index`` along ``axis``; the axis is kept if ``keepdims``."""
    axis = canonical_axis(int(axis), get_aval(operand).ndim)
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """``operand`` with ``update`` written at traced ``start_indices`` (clamped into bounds)."""
    shape = get_aval(operand).shape
    idx = _start_index_operands("dynamic_update_slice", shape, start_indices,
                                allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *idx)


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *,
                                allow_negative_indices=True):
    """``operand`` with ``update`` written at traced ``start_index`` along ``axis``."""
    ndim = get_aval(operand).ndim
    axis = canonical_axis(int(axis), ndim)
    starts = [0] * ndim
    starts[axis] = start_index
    allow = [True] * ndim
    allow[axis] = bool(allow_negative_indices)
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow)


def dynamic_update_index_in_dim(operand, update, index, axis, *, allow_negative_indices=True):
    """``operand`` with the slice at traced ``index`` along ``axis`` replaced by ``update``.

    ``update`` may lack the indexed axis.
    """
    ndim = get_aval(operand).ndim
    axis = canonical_axis(int(axis), ndim)
    if get_aval(update).ndim == ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# --- iota -------------------------------------------------------------------------------
iota_p = Primitive("iota")


def _iota_abstract(*, dtype, shape, dimension, sharding=None):
    check_dtype("iota", ShapedArray((), dtype), "numeric")
    _check_nonnegative("iota", "shape", shape)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}.")
    return ShapedArray(shape, dtype)


abstract_eval_rules[iota_p] = _iota_abstract
lowering_rules[iota_p] = lambda ctx, *, dtype, shape, dimension, sharding=None: ctx.op1(
    "stablehlo.iota", [], props=f"iota_dimension = {int(dimension)} : i64")


def broadcasted_iota(dtype, shape, dimension):
    """An array of ``shape`` whose values count 0, 1, ... along ``dimension``."""
    dtype = dtypes.canonicalize_user_dtype(dtype, fun_name="broadcasted_iota")
    shape = _shape_tuple(shape, "broadcasted_iota shape")
    return iota_p.bind(dtype=dtype, shape=shape, dimension=int(dimension), sharding=None)


def iota(dtype, size):
    """The vector [0, 1, ..., size - 1] of ``dtype``."""
    return broadcasted_iota(dtype, _shape_tuple(size, "iota size"), 0)


# --- differentiation rules --------------------------------------------------------------------
# Shape ops are linear: the tangent is the op applied to the tangent; transposes move the
# cotangent back to the operand's layout.
from plax.transforms.jvp import Zero, deflinear, defzero, instantiate, jvp_rules  # noqa: E402
from plax.transforms.transpose import is_undefined, transpose_rules  # noqa: E402

for _p in (broadcast_in_dim_p, reshape_p, transpose_p, squeeze_p, rev_p, concatenate_p, pad_p,
           slice_p):
    deflinear(_p)
defzero(iota_p)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions, sharding=None):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    from plax.lax.reductions import reduce_sum
    new_dims = tuple(i for i in range(len(shape)) if i not in broadcast_dimensions)
    grown = tuple(d for d, size in zip(broadcast_dimensions, x.aval.shape)
                  if size == 1 and shape[d] != 1)
    summed = reduce_sum(ct, tuple(sorted(new_dims + grown)))
    return [reshape(summed, x.aval.shape)]


transpose_rules[broadcast_in_dim_p] = _broadcast_in_dim_transpose
transpose_rules[reshape_p] = lambda ct, x, *, new_sizes, dimensions, sharding=None: [
    Zero(x.aval) if type(ct) is Zero else (
        reshape(ct, x.aval.shape) if dimensions is None else
        transpose(reshape(ct, tuple(x.aval.shape[d] for d in dimensions)),
                  tuple(np.argsort(dimensions))))]
transpose_rules[transpose_p] = lambda ct, x, *, permutation: [
    Zero(x.aval) if type(ct) is Zero else transpose(ct, tuple(int(i) for i in np.argsort(permutation)))]
transpose_rules[squeeze_p] = lambda ct, x, *, dimensions: [
    Zero(x.aval) if type(ct) is Zero else reshape(ct, x.aval.shape)]
transpose_rules[rev_p] = lambda ct, x, *, dimensions: [
    Zero(x.aval) if type(ct) is Zero else rev(ct, dimensions)]


def _concatenate_transpose(ct, *xs, dimension):
    out, start = [], 0
    for x in xs:
        size = (x.aval if is_undefined(x) else get_aval(x)).shape[dimension]
        if not is_undefined(x):
            out.append(None)
        elif type(ct) is Zero:
            out.append(Zero(x.aval))
        else:
            out.append(slice_in_dim(ct, start, start + size, axis=dimension))
        start += size
    return out


transpose_rules[concatenate_p] = _concatenate_transpose


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    strides = strides or (1,) * len(start_indices)
    config = []
    for size, start, n, s in zip(x.aval.shape, start_indices, get_aval(ct).shape, strides):
        used = start + (n - 1) * s + 1 if n else start
        config.append((start, size - used, s - 1 if n else 0))
    return [pad(ct, np.zeros((), x.aval.dtype), tuple(config))]


transpose_rules[slice_p] = _slice_transpose


def _pad_transpose(ct, x, padding_value, *, padding_config):
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined(x) else None,
                Zero(padding_value.aval) if is_undefined(padding_value) else None]
    from plax.lax.reductions import reduce_sum
    # Undo the padding with a negative pad, then keep every (interior+1)-th element.
    unpadded = pad(ct, np.zeros((), get_aval(ct).dtype),
                   tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
    t_x = slice(unpadded, (0,) * len(padding_config), get_aval(unpadded).shape,
                tuple(i + 1 for _, _, i in padding_config))
    out = [t_x if is_undefined(x) else None]
    if is_undefined(padding_value):
        all_axes = tuple(range(len(padding_config)))
        out.append(E.sub(reduce_sum(ct, all_axes), reduce_sum(t_x, all_axes)))
    else:
        out.append(None)
    return out


transpose_rules[pad_p] = _pad_transpose


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    x, *idx = primals
    ans = dynamic_slice_p.bind(x, *idx, slice_sizes=slice_sizes)
    t = tangents[0]
    if type(t) is Zero:
        return ans, Zero(get_aval(ans))
    return ans, dynamic_slice_p.bind(t, *idx, slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, x, *idx, slice_sizes):
    if type(ct) is Zero:
        return [Zero(x.aval)] + [None] * len(idx)
    zeros = broadcast_in_dim(np.zeros((), x.aval.dtype), x.aval.shape, ())
    return [dynamic_update_slice_p.bind(zeros, ct, *idx)] + [None] * len(idx)


def _dynamic_update_slice_jvp(primals, tangents):
    x, upd, *idx = primals
    ans = dynamic_update_slice_p.bind(x, upd, *idx)
    tx, tu = tangents[0], tangents[1]
    if type(tx) is Zero and type(tu) is Zero:
        return ans, Zero(get_aval(ans))
    return ans, dynamic_update_slice_p.bind(instantiate(tx), instantiate(tu), *idx)


def _dynamic_update_slice_transpose(ct, x, upd, *idx):
    upd_aval = upd.aval if is_undefined(upd) else get_aval(upd)
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined(x) else None,
                Zero(upd_aval) if is_undefined(upd) else None] + [None] * len(idx)
    zeros = broadcast_in_dim(np.zeros((), upd_aval.dtype), upd_aval.shape, ())
    ct_x = dynamic_update_slice_p.bind(ct, zeros, *idx) if is_undefined(x) else None
    ct_u = dynamic_slice_p.bind(ct, *idx, slice_sizes=upd_aval.shape) if is_undefined(upd) else None
    return [ct_x, ct_u] + [None] * len(idx)


jvp_rules[dynamic_slice_p] = _dynamic_slice_jvp
transpose_rules[dynamic_slice_p] = _dynamic_slice_transpose
jvp_rules[dynamic_update_slice_p] = _dynamic_update_slice_jvp
transpose_rules[dynamic_update_slice_p] = _dynamic_update_slice_transpose


# --- batching ---------------------------------------------------------------------------
# Each rule keeps the operand's batch dimension where it is when the op allows it, and
# says where it ended up. Static index parameters are shifted past the batch dimension.
def _shift_dims(dims, at: int) -> tuple:
    """Per-example axis numbers as axes of the batched value (batch at ``at``)."""
    return tuple(d + 1 if d >= at else d for d in dims)


def _broadcast_in_dim_batch(axis, vals, dims, *, shape, broadcast_dimensions, sharding=None):
    (x,), (bd,) = vals, dims
    # The new output axis sits after the output axis of the operand's previous axis and
    # before that of its next, so broadcast_dimensions stay increasing when they were.
    # The lowest such place: a leading batch stays leading, as JAX puts it.
    bdims = broadcast_dimensions
    out = bdims[bd - 1] + 1 if bd > 0 else 0
    new_dims = _shift_dims(broadcast_dimensions, out)
    new_dims = new_dims[:bd] + (out,) + new_dims[bd:]
    new_shape = shape[:out] + (axis.size,) + shape[out:]
    return broadcast_in_dim_p.bind(x, shape=new_shape, broadcast_dimensions=new_dims,
                                   sharding=sharding), out


def _reshape_batch(axis, vals, dims, *, new_sizes, dimensions, sharding=None):
    (x,), (bd,) = vals, dims
    # Bring the batch to the front within the reshape's own transposition.
    order = tuple(range(get_aval(x).ndim - 1)) if dimensions is None else dimensions
    perm = (bd,) + _shift_dims(order, bd)
    return reshape(x, (axis.size,) + tuple(new_sizes), perm), 0


def _transpose_batch(axis, vals, dims, *, permutation):
    (x,), (bd,) = vals, dims
    perm = _shift_dims(permutation, bd)
    return transpose(x, perm[:bd] + (bd,) + perm[bd:]), bd


def _squeeze_batch(axis, vals, dims, *, dimensions):
    (x,), (bd,) = vals, dims
    return squeeze_p.bind(x, dimensions=_shift_dims(dimensions, bd)), \
        bd - sum(d < bd for d in dimensions)


def _rev_batch(axis, vals, dims, *, dimensions):
    (x,), (bd,) = vals, dims
    return rev_p.bind(x, dimensions=_shift_dims(dimensions, bd)), bd


def _concatenate_batch(axis, vals, dims, *, dimension):
    from plax.transforms.vmap import common_dim, move_batch_dim, not_mapped
    batched = [(v, d) for v, d in zip(vals, dims) if d is not not_mapped]
    bd = common_dim(*zip(*batched))
    xs = [move_batch_dim(v, d, bd, axis.size) for v, d in zip(vals, dims)]
    return concatenate_p.bind(*xs, dimension=dimension + (dimension >= bd)), bd


def _pad_batch(axis, vals, dims, *, padding_config):
    from plax.transforms.vmap import move_batch_dim, not_mapped
    (x, pv), (bx, bp) = vals, dims
    bd = 0 if bx is not_mapped else bx
    x = move_batch_dim(x, bx, bd, axis.size)
    config = padding_config[:bd] + ((0, 0, 0),) + padding_config[bd:]
    if bp is not_mapped:
        return pad_p.bind(x, pv, padding_config=config), bd
    # A batched padding value: pad with zeros, then select the padding value where a padded
    # mask says there was no operand element.
    zero = np.zeros((), get_aval(x).dtype)
    padded = pad_p.bind(x, zero, padding_config=config)
    shape = get_aval(x).shape
    ones = broadcast_in_dim(np.bool_(True), shape[:bd] + shape[bd + 1:], ())
    mask = pad_p.bind(ones, np.bool_(False), padding_config=padding_config)
    out_shape = get_aval(padded).shape
    kept = tuple(i for i in range(len(out_shape)) if i != bd)
    return E.select_n(broadcast_in_dim(mask, out_shape, kept),
                      broadcast_in_dim(pv, out_shape, (bd,)), padded), bd


def _slice_batch(axis, vals, dims, *, start_indices, limit_indices, strides):
    (x,), (bd,) = vals, dims
    start = start_indices[:bd] + (0,) + start_indices[bd:]
    limit = limit_indices[:bd] + (axis.size,) + limit_indices[bd:]
    strides = None if strides is None else strides[:bd] + (1,) + strides[bd:]
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides), bd


def _stacked_indices(idx, dims, size: int):
    """Scalar start indices (batched along 0, or not) as one (size, len(idx)) array."""
    from plax.transforms.vmap import not_mapped
    cols = [broadcast_in_dim(i, (size, 1), () if d is not_mapped else (0,))
            for i, d in zip(idx, dims)]
    return concatenate(cols, 1)


def _index_dtype(idx) -> np.dtype:
    return get_aval(idx[0]).dtype if idx else dtypes.default_int_dtype()


def _dynamic_slice_batch(axis, vals, dims, *, slice_sizes):
    from plax.lax import indexing as I
    from plax.transforms.vmap import not_mapped
    (x, *idx), (bx, *bis) = vals, dims
    if all(b is not_mapped for b in bis):
        zero = np.zeros((), _index_dtype(idx))
        sizes = slice_sizes[:bx] + (axis.size,) + slice_sizes[bx:]
        return dynamic_slice_p.bind(x, *idx[:bx], zero, *idx[bx:], slice_sizes=sizes), bx
    # Batched start indices: a gather of one clamped window per example.
    ndim = len(slice_sizes)
    dn = I.GatherDimensionNumbers(offset_dims=tuple(range(ndim)), collapsed_slice_dims=(),
                                  start_index_map=tuple(range(ndim)))
    return I._gather_batch(axis, [x, _stacked_indices(idx, bis, axis.size)], [bx, 0],
                           dimension_numbers=dn, slice_sizes=slice_sizes, mode=I.CLIP,
                           fill_value=None, indices_are_sorted=False, unique_indices=False)


def _dynamic_update_slice_batch(axis, vals, dims):
    from plax.lax import indexing as I
    from plax.transforms.vmap import move_batch_dim, not_mapped
    (x, upd, *idx), (bx, bu, *bis) = vals, dims
    if all(b is not_mapped for b in bis):
        bd = bx if bx is not not_mapped else bu
        x, upd = move_batch_dim(x, bx, bd, axis.size), move_batch_dim(upd, bu, bd, axis.size)
        zero = np.zeros((), _index_dtype(idx))
        return dynamic_update_slice_p.bind(x, upd, *idx[:bd], zero, *idx[bd:]), bd
    # Batched start indices: a scatter of one clamped window per example.
    if get_aval(x).weak_type:  # dynamic_update_slice's result is never weak; scatter's may be
        x = E.convert_element_type_p.bind(x, new_dtype=get_aval(x).dtype, weak_type=False,
                                          sharding=None)
    ndim = len(idx)
    dn = I.ScatterDimensionNumbers(update_window_dims=tuple(range(ndim)), inserted_window_dims=(),
                                   scatter_dims_to_operand_dims=tuple(range(ndim)))
    return I._scatter_batch(I.scatter_p)(
        axis, [x, _stacked_indices(idx, bis, axis.size), upd], [bx, 0, bu],
        dimension_numbers=dn, mode=I.CLIP, indices_are_sorted=True, unique_indices=True,
        update_jaxpr=None, update_consts=())


def _register_batching():
    from plax.transforms.vmap import batch_rules
    batch_rules.update({
        broadcast_in_dim_p: _broadcast_in_dim_batch, reshape_p: _reshape_batch,
        transpose_p: _transpose_batch, squeeze_p: _squeeze_batch, rev_p: _rev_batch,
        concatenate_p: _concatenate_batch, pad_p: _pad_batch, slice_p: _slice_batch,
        dynamic_slice_p: _dynamic_slice_batch,
        dynamic_update_slice_p: _dynamic_update_slice_batch})
    # iota has no operands, so it is never batched.


_register_batching()
