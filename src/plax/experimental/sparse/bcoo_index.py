"""BCOO gather and convolution: ``bcoo_gather`` (``lax.gather`` of a BCOO operand with dense
start indices, as NumPy-style indexing produces) and ``bcoo_conv_general_dilated`` (the
one-dimensional, single-channel convolutions JAX supports on sparse operands).

Both are written on the other BCOO operations (dynamic slices under vmap, squeeze, reshape,
transpose) and plax operations on the buffers, so they run under jit, vmap and grad (with
respect to ``data``).
"""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core.trace import get_aval
from plax.experimental.sparse.bcoo_array import BCOO, bcoo_transpose, bcoo_update_layout
from plax.experimental.sparse.bcoo_shape import (bcoo_dynamic_slice, bcoo_reshape, bcoo_squeeze,
                                                 dense_shape_of)
from plax.lax import GatherDimensionNumbers, GatherScatterMode

__all__ = ["bcoo_gather", "bcoo_conv_general_dilated"]


def bcoo_gather(operand: BCOO, start_indices, dimension_numbers, slice_sizes, *,
                unique_indices: bool = False, indices_are_sorted: bool = False, mode=None,
                fill_value=None) -> BCOO:
    """``lax.gather`` of a BCOO operand: each start index's slice taken with
    ``bcoo_dynamic_slice`` (its leading index dimensions become batch dimensions), then
    arranged as ``lax.gather`` arranges them. Only ``mode='promise_in_bounds'`` (indices
    are clamped) is supported, as in JAX."""
    if not isinstance(operand, BCOO):
        raise TypeError(f"bcoo_gather: operand should be a BCOO array, got {type(operand)}")
    mode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode
    parsed = GatherScatterMode.from_any(mode)
    if parsed != GatherScatterMode.PROMISE_IN_BOUNDS:
        raise NotImplementedError(f"bcoo_gather: mode={mode} not yet supported.")
    dnums = dimension_numbers
    if not isinstance(dnums, GatherDimensionNumbers):
        raise TypeError("bcoo_gather: dimension_numbers must be a lax.GatherDimensionNumbers, "
                        f"got {type(dnums)}.")
    if dnums.operand_batching_dims or dnums.start_indices_batching_dims:
        raise NotImplementedError("bcoo_gather: operand_batching_dims are not supported.")
    start_indices = jnp.asarray(start_indices)
    slice_sizes = tuple(operator.index(s) for s in slice_sizes)
    out_shape = dense_shape_of(
        lambda x, i: lax.gather(x, i, dnums, slice_sizes, unique_indices=unique_indices,
                                indices_are_sorted=indices_are_sorted, mode=parsed,
                                fill_value=fill_value), operand, start_indices).shape
    ishape = get_aval(start_indices).shape
    index_batch = ishape[:-1]
    flat_starts = start_indices.reshape((-1, ishape[-1]))
    # Full-rank starts: zero on the dimensions the start indices do not address.
    zero = jnp.zeros((flat_starts.shape[0],), flat_starts.dtype)
    columns = [zero] * operand.ndim
    sizes = list(operand.shape)
    for k, d in enumerate(dnums.start_index_map):
        columns[d] = flat_starts[:, k]
        sizes[d] = slice_sizes[d]
    collapsed = tuple(dnums.collapsed_slice_dims)

    piece_shape = []

    def one(starts):  # buffers only: the array is rebuilt with its shape below
        piece = bcoo_dynamic_slice(operand, list(starts), sizes)
        piece = bcoo_squeeze(piece, dimensions=collapsed) if collapsed else piece
        piece_shape.append(piece.shape)
        return piece.data, piece.indices

    from plax.api.vmap import vmap
    data, indices = vmap(one)(jnp.stack(columns, axis=-1))
    result = BCOO((data, indices), shape=(get_aval(flat_starts).shape[0],) + piece_shape[0])
    result = bcoo_reshape(result, new_sizes=index_batch + result.shape[1:])
    # lax.gather puts the slice (offset) dimensions at offset_dims, index dimensions around.
    offset_dims = tuple(dnums.offset_dims)
    if result.ndim:
        batch_dims = tuple(d for d in range(len(out_shape)) if d not in offset_dims)
        perm = np.zeros(result.ndim, int)
        perm[np.array(batch_dims + offset_dims, int)] = np.arange(result.ndim)
        perm = tuple(int(p) for p in perm)
        if perm != tuple(range(result.ndim)):
            moved = [p for p in perm[:result.n_batch]]
            if sorted(moved) != list(range(result.n_batch)):
                result = bcoo_update_layout(result, n_batch=0)
            result = bcoo_transpose(result, permutation=perm)
    return result


def _conv_operand(x, index_dtype):
    """A 1-D BCOO array (no batch or dense dimensions) of a ``(1, 1, n)`` operand."""
    if isinstance(x, BCOO):
        x = bcoo_update_layout(x, n_batch=2, n_dense=0)
        data, indices = x.data[0, 0], x.indices[0, 0]
        data = jnp.where(indices[:, 0] < x.shape[-1], data, jnp.zeros((), data.dtype))
        return BCOO((data, indices), shape=x.shape[2:])
    x = jnp.asarray(x)
    data = x[0, 0]
    indices = lax.broadcasted_iota(index_dtype, (data.shape[0], 1), 0)
    return BCOO((data, indices), shape=x.shape[2:])


def bcoo_conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation=None,
                              rhs_dilation=None, dimension_numbers=None,
                              feature_group_count=1, batch_group_count=1, precision=None,
                              preferred_element_type=None, out_sharding=None) -> BCOO:
    """``lax.conv_general_dilated`` where an operand is BCOO, as a BCOO array. As in JAX,
    only one spatial dimension, one batch element and one feature (shapes ``(1, 1, n)``),
    unit strides and no dilation are supported."""
    from plax.api.jit import make_jaxpr
    jaxpr = make_jaxpr(lambda a, b: lax.conv_general_dilated(
        a, b, window_strides, padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
        dimension_numbers=dimension_numbers, feature_group_count=feature_group_count,
        batch_group_count=batch_group_count, precision=precision,
        preferred_element_type=preferred_element_type))(
        *(jnp.zeros(x.shape, x.dtype) if isinstance(x, BCOO) else jnp.asarray(x)
          for x in (lhs, rhs)))
    convs = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "conv_general_dilated"]
    params = convs[0].params
    spatial = len(lhs.shape) - 2
    if tuple(params["lhs_dilation"]) != (1,) * spatial:
        raise NotImplementedError("bcoo convolution with lhs_dilation.")
    if tuple(params["rhs_dilation"]) != (1,) * spatial:
        raise NotImplementedError("bcoo convolution with rhs_dilation.")
    if tuple(params["window_strides"]) != (1,) * spatial:
        raise NotImplementedError("bcoo convolution with non-unit window_strides.")
    if params["batch_group_count"] != 1 or params["feature_group_count"] != 1:
        raise NotImplementedError("bcoo convolution with non-unit group counts.")
    if tuple(lhs.shape[:2]) != (1, 1) or tuple(rhs.shape[:2]) != (1, 1) or spatial != 1:
        raise NotImplementedError("bcoo convolution with leading dimensions other than (1, 1)")
    index_dtype = (lhs.indices.dtype if isinstance(lhs, BCOO) else
                   rhs.indices.dtype if isinstance(rhs, BCOO) else np.int32)
    lo, hi = (int(p) for p in params["padding"][0])
    a, b = _conv_operand(lhs, index_dtype), _conv_operand(rhs, index_dtype)
    dtype = jnp.result_type(a.dtype, b.dtype)
    # out[i] = sum_k lhs[i + k - lo] * rhs[k]: a stored pair (j, k) lands at i = j - k + lo.
    data = (a.data[:, None].astype(dtype) * b.data[None, :].astype(dtype)).reshape(-1)
    where = (a.indices[:, 0][:, None] - b.indices[:, 0][None, :] + lo).reshape(-1)
    size = max(0, lhs.shape[-1] + lo + hi - rhs.shape[-1] + 1)
    outside = where < 0
    data = jnp.where(outside, jnp.zeros((), dtype), data)
    where = jnp.where(outside | (where >= size), size, where).astype(index_dtype)
    return BCOO((data[None, None], where[None, None, :, None]), shape=(1, 1, size))
