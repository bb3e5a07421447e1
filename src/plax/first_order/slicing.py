"""Slicing primitives: static slices (slice) and slices at traced start indices
(dynamic_slice, dynamic_update_slice), with their one-axis and one-index forms.

All are linear in the sliced (or updated) operand. Dynamic start indices are
clamped into bounds, as XLA does; under vmap, batched start indices turn the
dynamic slice into a gather (the update into a scatter) of one window per example.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.sharding_types import ShardingTypeError, sharding_rules, spec_of
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             not_mapped, register_lowering, transpose_rules)
from plax.core.trace import get_aval
from plax.core.symbolic_shapes import DimExpr, dimension_as_value
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.first_order import conversion as _conv
from plax.first_order import indexing as _indexing
from plax.first_order import shapes as _shapes
from plax.first_order.ad_util import deflinear, instantiate
from plax.first_order.batch_util import move_batch_dim
from plax.first_order.common import (as_int_tuple, canonical_axis, check_dtype, check_nonnegative,
                             check_same_dtypes, shape_tuple)
from plax.lowering.stablehlo import i64_array

__all__ = ["slice", "slice_in_dim", "index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
           "dynamic_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
           "dynamic_update_index_in_dim"]


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
    check_nonnegative("slice", "start_indices", start_indices)
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


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    config = []
    for size, start, n, s in zip(x.aval.shape, start_indices, get_aval(ct).shape, strides):
        used = start + (n - 1) * s + 1 if n else start
        config.append((start, size - used, s - 1 if n else 0))
    return [_shapes.pad(ct, np.zeros((), x.aval.dtype), tuple(config))]


def _slice_batch(axis, vals, dims, *, start_indices, limit_indices, strides):
    (x,), (bd,) = vals, dims
    start = start_indices[:bd] + (0,) + start_indices[bd:]
    limit = limit_indices[:bd] + (axis.size,) + limit_indices[bd:]
    strides = None if strides is None else strides[:bd] + (1,) + strides[bd:]
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides), bd


abstract_eval_rules[slice_p] = _slice_abstract
register_lowering(slice_p, _slice_lowering)
deflinear(slice_p)
transpose_rules[slice_p] = _slice_transpose
batch_rules[slice_p] = _slice_batch


def slice(operand, start_indices, limit_indices, strides=None):
    """The static slice ``operand[start:limit:stride]`` along every axis."""
    start = as_int_tuple(start_indices, "slice start_indices")
    limit = as_int_tuple(limit_indices, "slice limit_indices")
    strides = None if strides is None else as_int_tuple(strides, "slice strides")
    return slice_p.bind(operand, start_indices=start, limit_indices=limit, strides=strides)


def _int_or_dim(v):
    """``int(v)``, or ``v`` itself when it is a symbolic dimension (plax.export)."""
    return v if type(v) is DimExpr else int(v)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """A static slice along one ``axis``; None bounds mean the whole axis, negatives wrap once."""
    shape = get_aval(operand).shape
    axis = canonical_axis(int(axis), len(shape))
    size = shape[axis]
    start = 0 if start_index is None else _int_or_dim(start_index)
    limit = size if limit_index is None else _int_or_dim(limit_index)
    start = start + size if start < 0 else start
    limit = limit + size if limit < 0 else limit
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis] = start, limit
    strides[axis] = _int_or_dim(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """Element ``index`` (static, may be negative) along ``axis``; ``keepdims`` keeps the axis."""
    shape = get_aval(operand).shape
    axis = canonical_axis(int(axis), len(shape))
    index, size = _int_or_dim(index), shape[axis]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}.")
    index = index + size if index < 0 else index
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else _shapes.squeeze(out, (axis,))


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
    check_nonnegative("dynamic_slice", "slice_sizes", slice_sizes)
    if any(s > d for s, d in zip(slice_sizes, x.shape)):
        raise TypeError("dynamic_slice slice_sizes must be less than or equal to operand shape, "
                        f"got slice_sizes {slice_sizes} for operand shape {x.shape}.")
    return x.update(shape=slice_sizes)


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    x, *idx = primals
    ans = dynamic_slice_p.bind(x, *idx, slice_sizes=slice_sizes)
    t = tangents[0]
    if type(t) is Zero:
        return ans, Zero(get_aval(ans))
    return ans, dynamic_slice_p.bind(t, *idx, slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, x, *idx, slice_sizes):
    zeros = _shapes.broadcast_in_dim(np.zeros((), x.aval.dtype), x.aval.shape, ())
    return [dynamic_update_slice_p.bind(zeros, ct, *idx)] + [None] * len(idx)


def _stacked_indices(idx, dims, size: int):
    """Scalar start indices (batched along 0, or not) as one (size, len(idx)) array."""
    cols = [_shapes.broadcast_in_dim(i, (size, 1), () if d is not_mapped else (0,))
            for i, d in zip(idx, dims)]
    return _shapes.concatenate(cols, 1)


def _index_dtype(idx) -> np.dtype:
    return get_aval(idx[0]).dtype if idx else dtypes.default_int_dtype()


def _dynamic_slice_batch(axis, vals, dims, *, slice_sizes):
    (x, *idx), (bx, *bis) = vals, dims
    if all(b is not_mapped for b in bis):
        zero = np.zeros((), _index_dtype(idx))
        sizes = slice_sizes[:bx] + (axis.size,) + slice_sizes[bx:]
        return dynamic_slice_p.bind(x, *idx[:bx], zero, *idx[bx:], slice_sizes=sizes), bx
    # Batched start indices: a gather of one clamped window per example.
    ndim = len(slice_sizes)
    dn = _indexing.GatherDimensionNumbers(offset_dims=tuple(range(ndim)),
                                          collapsed_slice_dims=(),
                                          start_index_map=tuple(range(ndim)))
    return _indexing.gather_batch_rule(
        axis, [x, _stacked_indices(idx, bis, axis.size)], [bx, 0], dimension_numbers=dn,
        slice_sizes=slice_sizes, mode=_indexing.CLIP, fill_value=None, indices_are_sorted=False,
        unique_indices=False)


abstract_eval_rules[dynamic_slice_p] = _dynamic_slice_abstract
register_lowering(dynamic_slice_p, lambda ctx, x, *idx, slice_sizes: ctx.op1(
    "stablehlo.dynamic_slice", [x, *idx], props=f"slice_sizes = {i64_array(slice_sizes)}"))
jvp_rules[dynamic_slice_p] = _dynamic_slice_jvp
transpose_rules[dynamic_slice_p] = _dynamic_slice_transpose
batch_rules[dynamic_slice_p] = _dynamic_slice_batch


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


def _dynamic_update_slice_jvp(primals, tangents):
    x, upd, *idx = primals
    ans = dynamic_update_slice_p.bind(x, upd, *idx)
    tx, tu = tangents[0], tangents[1]
    if type(tx) is Zero and type(tu) is Zero:
        return ans, Zero(get_aval(ans))
    return ans, dynamic_update_slice_p.bind(instantiate(tx), instantiate(tu), *idx)


def _dynamic_update_slice_transpose(ct, x, upd, *idx):
    upd_aval = upd.aval if is_undefined(upd) else get_aval(upd)
    zeros = _shapes.broadcast_in_dim(np.zeros((), upd_aval.dtype), upd_aval.shape, ())
    ct_x = dynamic_update_slice_p.bind(ct, zeros, *idx) if is_undefined(x) else None
    ct_u = dynamic_slice_p.bind(ct, *idx, slice_sizes=upd_aval.shape) if is_undefined(upd) else None
    return [ct_x, ct_u] + [None] * len(idx)


def _dynamic_update_slice_batch(axis, vals, dims):
    (x, upd, *idx), (bx, bu, *bis) = vals, dims
    if all(b is not_mapped for b in bis):
        bd = bx if bx is not not_mapped else bu
        x, upd = move_batch_dim(x, bx, bd, axis.size), move_batch_dim(upd, bu, bd, axis.size)
        zero = np.zeros((), _index_dtype(idx))
        return dynamic_update_slice_p.bind(x, upd, *idx[:bd], zero, *idx[bd:]), bd
    # Batched start indices: a scatter of one clamped window per example.
    if get_aval(x).weak_type:  # dynamic_update_slice's result is never weak; scatter's may be
        x = _conv.convert_element_type_p.bind(x, new_dtype=get_aval(x).dtype, weak_type=False,
                                              sharding=None)
    ndim = len(idx)
    dn = _indexing.ScatterDimensionNumbers(update_window_dims=tuple(range(ndim)),
                                           inserted_window_dims=(),
                                           scatter_dims_to_operand_dims=tuple(range(ndim)))
    return _indexing.scatter_batch_rule(_indexing.scatter_p)(
        axis, [x, _stacked_indices(idx, bis, axis.size), upd], [bx, 0, bu],
        dimension_numbers=dn, mode=_indexing.CLIP, indices_are_sorted=True, unique_indices=True,
        update_jaxpr=None, update_consts=())


abstract_eval_rules[dynamic_update_slice_p] = _dynamic_update_slice_abstract


def _dynamic_update_slice_sharding(avals_in, avals_out):
    x, update = avals_in[:2]
    if spec_of(x) != spec_of(update):
        raise ShardingTypeError(
            "dynamic_update_slice operand sharding must be equal to update sharding, got "
            f"operand sharding {x.str_short(short_dtypes=False)} and update sharding "
            f"{update.str_short(short_dtypes=False)}: reshard the update first.")
    return [x._sharding]


sharding_rules[dynamic_update_slice_p] = _dynamic_update_slice_sharding
register_lowering(dynamic_update_slice_p, lambda ctx, x, update, *idx: ctx.op1(
    "stablehlo.dynamic_update_slice", [x, update, *idx]))
jvp_rules[dynamic_update_slice_p] = _dynamic_update_slice_jvp
transpose_rules[dynamic_update_slice_p] = _dynamic_update_slice_transpose
batch_rules[dynamic_update_slice_p] = _dynamic_update_slice_batch


# --- start indices of the public functions ----------------------------------------------
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
    return [_shapes.squeeze(slice(start_indices, (k,), (k + 1,)), (0,))
            for k in range(aval.shape[0])]


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
        if type(size) is DimExpr and neg and (not _is_static_index(i) or int(i) < 0):
            # an axis of symbolic size (plax.export): its size is a value
            n = _as_index_dtype(dimension_as_value(size), dt)
            if _is_static_index(i):
                out.append(_arith.add(n, np.asarray(int(i), dt)[()]))
                continue
            i = _as_index_dtype(i, dt)
            out.append(_cmp.select_n(_cmp.lt(i, np.asarray(0, dt)[()]), i, _arith.add(i, n)))
            continue
        if _is_static_index(i):
            v = int(i) + size if neg and int(i) < 0 else int(i)
            out.append(np.asarray(min(max(v, int(info.min)), int(info.max)), dt)[()])
            continue
        i = _as_index_dtype(i, dt)
        if neg and not dtypes.is_unsigned(dt):
            zero, n = np.asarray(0, dt)[()], np.asarray(size, dt)[()]
            i = _cmp.select_n(_cmp.lt(i, zero), i, _arith.add(i, n))
        out.append(i)
    return out


def _as_index_dtype(i, dt: np.dtype):
    aval = get_aval(i)
    if aval.dtype == dt and not aval.weak_type:
        return i
    return _conv.convert_element_type_p.bind(i, new_dtype=dt, weak_type=False, sharding=None)


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """The slice of size ``slice_sizes`` at traced ``start_indices`` (clamped into bounds)."""
    shape = get_aval(operand).shape
    sizes = shape_tuple(slice_sizes, "dynamic_slice slice_sizes")
    idx = _start_index_operands("dynamic_slice", shape, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *idx, slice_sizes=sizes)


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *, allow_negative_indices=True):
    """A dynamic slice of length ``slice_size`` along one ``axis``."""
    shape = get_aval(operand).shape
    axis = canonical_axis(int(axis), len(shape))
    starts, sizes = [0] * len(shape), list(shape)
    starts[axis], sizes[axis] = start_index, _int_or_dim(slice_size)
    allow = [True] * len(shape)
    allow[axis] = bool(allow_negative_indices)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *, allow_negative_indices=True):
    """Element at traced ``index`` along ``axis``; the axis is kept if ``keepdims``."""
    axis = canonical_axis(int(axis), get_aval(operand).ndim)
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    return out if keepdims else _shapes.squeeze(out, (axis,))


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
        update = _shapes.expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)
