"""BCOO operations that reshape, cut or join arrays: slice, dynamic_slice, rev, squeeze,
reshape, broadcast_in_dim and concatenate (update_layout, which the BCOO class's method
needs, is in ``bcoo_array``).

Each is written on plax operations applied to the buffers (no primitive of its own), so it
runs under jit, vmap and grad (with respect to ``data``) through those operations. The
arguments are checked by the abstract evaluation of the dense ``lax`` operation, so bad
input gets ``lax``'s errors.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.core.trace import get_aval
from plax.experimental.sparse.bcoo_array import (  # noqa: F401 (bcoo_update_layout re-exported)
    BCOO, bcoo_sum_duplicates, bcoo_transpose, bcoo_update_layout, mask_data, sparse_limits)
from plax.experimental.sparse.util import canonical_shape, index_row

__all__ = ["bcoo_slice", "bcoo_dynamic_slice", "bcoo_rev", "bcoo_squeeze", "bcoo_reshape",
           "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_update_layout",
           "dense_shape_of"]


def dense_shape_of(fun, *operands, **params):
    """The shape ``fun`` (a dense ``lax`` operation) gives ``operands`` (arrays, BCOO arrays
    or shapes-with-dtypes): its abstract evaluation, which also checks the arguments."""
    from plax.api.jit import eval_shape
    structs = [ShapeDtypeStruct(tuple(x.shape), x.dtype) if hasattr(x, "shape") else x
               for x in operands]
    return eval_shape(lambda *a: fun(*a, **params), *structs)


def _check(mat, name: str):
    if not isinstance(mat, BCOO):
        raise TypeError(f"{name}: input should be a BCOO array, got type(mat)={type(mat)}")


def _valid(mat):
    """Whether each stored element is a real one (``batch + (nse,)``), not padding."""
    return jnp.all(mat.indices < sparse_limits(mat), axis=-1)


def _cap_nse(data, indices, shape, n_batch: int, n_sparse: int):
    """Buffers with at most as many stored elements as the sparse dimensions hold (merging
    repeats), as a slice that leaves many elements out of range does in JAX."""
    room = math.prod(shape[n_batch:n_batch + n_sparse])
    if get_aval(indices).shape[-2] > room:
        out = bcoo_sum_duplicates(BCOO((data, indices), shape=shape), nse=room)
        return out.data, out.indices
    return data, indices


def _stored_whole(buffer, mat, i):
    """Whether ``buffer``'s batch dimension ``i`` is stored whole (else broadcast, size 1)."""
    return get_aval(buffer).shape[i] == mat.shape[i]


# --- slicing --------------------------------------------------------------------------------
def bcoo_slice(mat: BCOO, *, start_indices, limit_indices, strides=None) -> BCOO:
    """``lax.slice`` of a BCOO array: stored elements outside the window become padding."""
    _check(mat, "bcoo_slice")
    start = tuple(operator.index(i) for i in start_indices)
    limit = tuple(operator.index(i) for i in limit_indices)
    strides = (1,) * mat.ndim if strides is None else tuple(operator.index(s) for s in strides)
    out_shape = dense_shape_of(lax.slice, mat, start_indices=start, limit_indices=limit,
                               strides=strides).shape
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    data, indices = mat.data, mat.indices
    for i in range(n_batch):  # batch dimensions: slice the buffers that store them whole
        if _stored_whole(data, mat, i):
            data = lax.slice_in_dim(data, start[i], limit[i], strides[i], axis=i)
        if _stored_whole(indices, mat, i):
            indices = lax.slice_in_dim(indices, start[i], limit[i], strides[i], axis=i)
    for d in range(n_batch + n_sparse, mat.ndim):  # dense dimensions: slice the data
        axis = d - n_sparse + 1
        data = lax.slice_in_dim(data, start[d], limit[d], strides[d], axis=axis)
    if n_sparse:
        sl = slice(n_batch, n_batch + n_sparse)
        lo, hi, step, new_size = (index_row(np.array(v[sl], indices.dtype), indices)
                                  for v in (start, limit, strides, out_shape))
        keep = jnp.all((indices >= lo) & (indices < hi) & ((indices - lo) % step == 0), axis=-1)
        indices = jnp.where(keep[..., None], (indices - lo) // step, new_size)
        data = mask_data(data, keep, n_batch)
        data, indices = _cap_nse(data, indices, out_shape, n_batch, n_sparse)
    return BCOO((data, indices), shape=out_shape)


def bcoo_dynamic_slice(mat: BCOO, start_indices, slice_sizes) -> BCOO:
    """``lax.dynamic_slice`` of a BCOO array (starts may be traced; they are clamped so the
    slice fits, as ``lax.dynamic_slice``'s are)."""
    _check(mat, "bcoo_dynamic_slice")
    sizes = tuple(operator.index(s) for s in slice_sizes)
    starts = [jnp.asarray(s) for s in start_indices]
    if len(starts) != mat.ndim or len(sizes) != mat.ndim:
        raise ValueError(f"bcoo_dynamic_slice: indices must have size mat.ndim={mat.ndim}, got "
                         f"{len(starts)} start indices and {len(sizes)} slice sizes.")
    dense_shape_of(lambda x: lax.dynamic_slice(x, [0] * mat.ndim, sizes), mat)
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    zero = jnp.zeros((), np.int32)

    def buffer_slice(buf, tail_starts, tail_sizes):
        b_starts, b_sizes = [], []
        for i in range(n_batch):
            whole = _stored_whole(buf, mat, i)
            b_starts.append(starts[i] if whole else zero)
            b_sizes.append(sizes[i] if whole else 1)
        return lax.dynamic_slice(buf, b_starts + tail_starts, b_sizes + tail_sizes)

    data = buffer_slice(mat.data, [zero] + starts[n_batch + n_sparse:],
                        [mat.nse] + list(sizes[n_batch + n_sparse:]))
    indices = buffer_slice(mat.indices, [zero, zero], [mat.nse, n_sparse])
    if n_sparse:
        dtype = indices.dtype
        full = sparse_limits(mat, dtype)
        want = index_row(np.array(sizes[n_batch:n_batch + n_sparse], dtype), indices)
        lo = index_row(jnp.stack([s.astype(dtype) for s in starts[n_batch:n_batch + n_sparse]]),
                       indices)
        lo = jnp.clip(jnp.where(lo < 0, lo + full, lo), 0, full - want)
        keep = jnp.all((indices >= lo) & (indices < lo + want), axis=-1)
        indices = jnp.where(keep[..., None], indices - lo, want)
        data = mask_data(data, keep, n_batch)
        data, indices = _cap_nse(data, indices, sizes, n_batch, n_sparse)
    return BCOO((data, indices), shape=sizes)


def bcoo_rev(operand: BCOO, dimensions) -> BCOO:
    """``lax.rev`` of a BCOO array: the given dimensions reversed."""
    _check(operand, "bcoo_rev")
    mat = operand
    dims = tuple(operator.index(d) for d in dimensions)
    dense_shape_of(lax.rev, mat, dimensions=dims)
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    data, indices = mat.data, mat.indices
    data_dims = [d for d in dims if d < n_batch and _stored_whole(data, mat, d)]
    data_dims += [d - n_sparse + 1 for d in dims if d >= n_batch + n_sparse]
    index_dims = [d for d in dims if d < n_batch and _stored_whole(indices, mat, d)]
    if data_dims:
        data = lax.rev(data, tuple(data_dims))
    if index_dims:
        indices = lax.rev(indices, tuple(index_dims))
    flip = np.zeros(n_sparse, bool)
    flip[[d - n_batch for d in dims if n_batch <= d < n_batch + n_sparse]] = True
    if flip.any():
        size = sparse_limits(mat, indices.dtype, like=indices)
        # Padding (an index at or past the size) stays padding.
        flip = index_row(flip, indices, bool)
        indices = jnp.where(flip & (indices < size), size - 1 - indices, indices)
    return BCOO((data, indices), shape=mat.shape)


def bcoo_squeeze(arr: BCOO, *, dimensions) -> BCOO:
    """``lax.squeeze`` of a BCOO array: the given dimensions (of size 1) removed."""
    _check(arr, "bcoo_squeeze")
    mat = arr
    dims = tuple(operator.index(d) for d in dimensions)
    out_shape = dense_shape_of(lax.squeeze, mat, dimensions=dims).shape  # checks the dims
    dims = sorted({d % mat.ndim for d in dims})
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    batch = tuple(d for d in dims if d < n_batch)
    sparse = [d - n_batch for d in dims if n_batch <= d < n_batch + n_sparse]
    dense = tuple(d - n_sparse + 1 for d in dims if d >= n_batch + n_sparse)
    data = lax.squeeze(mat.data, batch + dense)
    indices = lax.squeeze(mat.indices, batch)
    if sparse:
        kept = [k for k in range(n_sparse) if k not in sparse]
        valid = jnp.all(indices < sparse_limits(mat, like=indices), axis=-1)
        indices = indices[..., np.array(kept, np.int32)] if kept else indices[..., :0]
        if kept:  # an element that was padding only in a removed dimension stays padding
            sizes = jnp.asarray(tuple(mat.shape[n_batch + k] for k in kept), indices.dtype)
            indices = jnp.where(valid[..., None], indices, sizes)
        else:
            data = mask_data(data, valid, n_batch - len(batch))
    return BCOO((data, indices), shape=out_shape, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


# --- reshape ----------------------------------------------------------------------------------
def _split_point(sizes, target: int, start: int = 0):
    """The shortest prefix of ``sizes[start:]`` whose product is ``target`` (None if none)."""
    prod = 1
    if target == 1:
        return start
    for k in range(start, len(sizes)):
        prod *= sizes[k]
        if prod == target:
            return k + 1
        if prod > target or prod == 0:
            break
    return None


def bcoo_reshape(mat: BCOO, *, new_sizes, dimensions=None, sharding=None) -> BCOO:
    """``lax.reshape`` of a BCOO array. Batch dimensions reshape among themselves and sparse
    ones among themselves (their indices ravelled and unravelled); dense dimensions must be
    unchanged. ``dimensions`` first transposes; ``sharding`` is accepted, as in JAX."""
    _check(mat, "bcoo_reshape")
    del sharding
    new_sizes = tuple(operator.index(s) for s in new_sizes)
    dense_shape_of(lax.reshape, mat, new_sizes=new_sizes,
                   dimensions=None if dimensions is None else tuple(dimensions))
    if dimensions is not None and tuple(dimensions) != tuple(range(mat.ndim)):
        mat = bcoo_transpose(mat, permutation=tuple(dimensions))
    if new_sizes == mat.shape:
        return mat
    n_batch, n_sparse, n_dense = mat.n_batch, mat.n_sparse, mat.n_dense
    shape = mat.shape
    batch_size = math.prod(shape[:n_batch])
    cut = _split_point(new_sizes, batch_size) if n_batch else 0
    if cut is None:
        raise ValueError(f"bcoo_reshape: new shape cannot mix batch and sparse dimensions; got "
                         f"shape={shape} new_shape={new_sizes} with n_batch={n_batch}")
    dense_shape = shape[n_batch + n_sparse:]
    if n_dense and new_sizes[len(new_sizes) - n_dense:] != dense_shape:
        raise ValueError(f"bcoo_reshape: new shape cannot mix sparse and dense dimensions; got "
                         f"shape={shape} new_shape={new_sizes} with n_dense={n_dense}")
    new_batch = new_sizes[:cut]
    new_sparse = new_sizes[cut:len(new_sizes) - n_dense]
    data, indices = mat.data, mat.indices
    if n_batch:
        batch = shape[:n_batch]
        data = jnp.broadcast_to(data, batch + data.shape[n_batch:]).reshape(
            new_batch + data.shape[n_batch:])
        indices = jnp.broadcast_to(indices, batch + indices.shape[n_batch:]).reshape(
            new_batch + indices.shape[n_batch:])
    else:
        data = data.reshape(new_batch + data.shape)
        indices = indices.reshape(new_batch + indices.shape)
    old_sparse = shape[n_batch:n_batch + n_sparse]
    if tuple(new_sparse) != tuple(old_sparse):
        indices = _reindex(indices, old_sparse, new_sparse)
    return BCOO((data, indices), shape=new_sizes)


def _reindex(indices, old_sparse, new_sparse):
    """Indices into ``old_sparse`` made indices into ``new_sparse`` (same number of
    elements, row-major order); padding stays padding."""
    dtype = indices.dtype
    size = math.prod(old_sparse)
    valid = jnp.all(indices < index_row(np.array(old_sparse, dtype), indices), axis=-1) if \
        old_sparse else jnp.ones(indices.shape[:-1], bool)
    flat = jnp.zeros(indices.shape[:-1], dtype)
    for k, n in enumerate(old_sparse):
        flat = flat * n + indices[..., k]
    if not new_sparse:
        return jnp.zeros(indices.shape[:-1] + (0,), dtype)
    flat = jnp.where(valid, flat, size)
    cols, rest = [], flat
    for n in reversed(new_sparse):
        cols.append(rest % n)
        rest = rest // n
    out = jnp.stack(cols[::-1], axis=-1)
    return jnp.where(valid[..., None], out, jnp.asarray(np.array(new_sparse, dtype)))


# --- broadcast_in_dim -------------------------------------------------------------------------
def bcoo_broadcast_in_dim(mat: BCOO, *, shape, broadcast_dimensions, sharding=None) -> BCOO:
    """``lax.broadcast_in_dim`` of a BCOO array. New dimensions before the sparse ones become
    batch dimensions, new ones after them dense ones; a new sparse dimension (or a sparse
    one grown from size 1) is not supported, as in JAX."""
    _check(mat, "bcoo_broadcast_in_dim")
    del sharding
    shape = canonical_shape(shape)
    bdims = tuple(operator.index(d) for d in broadcast_dimensions)
    dense_shape_of(lax.broadcast_in_dim, mat, shape=shape, broadcast_dimensions=bdims)
    n_batch, n_sparse, n_dense = mat.n_batch, mat.n_sparse, mat.n_dense
    # The new layout: batch dimensions end where the first sparse one lands, dense ones
    # start where the first dense one lands.
    if n_sparse or n_dense:
        new_n_batch = bdims[n_batch]
        first_dense = bdims[n_batch + n_sparse] if n_dense else len(shape)
    else:
        new_n_batch = first_dense = len(shape)
    new_n_sparse = first_dense - new_n_batch
    old_of = {b: i for i, b in enumerate(bdims)}
    for k in range(new_n_batch, first_dense):
        if (k in old_of and mat.shape[old_of[k]] != shape[k]) or (k not in old_of
                                                                 and shape[k] != 1):
            raise NotImplementedError("Adding sparse dimensions with lengths != 1")
    new_batch = shape[:new_n_batch]
    data_bdims = (*bdims[:n_batch], new_n_batch,
                  *(new_n_batch + 1 + b - first_dense for b in bdims[n_batch + n_sparse:]))
    data = lax.broadcast_in_dim(mat.data, new_batch + (mat.nse,) + shape[first_dense:],
                                data_bdims)
    # One index column per new sparse dimension (0 for an added one of size 1).
    idx = mat.indices
    valid = _valid(mat)
    cols = [idx[..., old_of[k] - n_batch] if k in old_of else
            jnp.where(valid, 0, 1).astype(idx.dtype) for k in range(new_n_batch, first_dense)]
    indices = (jnp.stack(cols, axis=-1) if cols else
               jnp.zeros(idx.shape[:-1] + (0,), idx.dtype))
    indices = lax.broadcast_in_dim(indices, new_batch + (mat.nse, new_n_sparse),
                                   (*bdims[:n_batch], new_n_batch, new_n_batch + 1))
    return BCOO((data, indices), shape=shape)


# --- concatenate -----------------------------------------------------------------------------
def _pad_nse(data, indices, nse: int, sparse_shape, n_batch: int):
    """Buffers padded with padding elements up to ``nse`` stored elements."""
    have = get_aval(indices).shape[n_batch]
    if have == nse:
        return data, indices
    pad = nse - have
    dpad = [(0, 0, 0)] * get_aval(data).ndim
    dpad[n_batch] = (0, pad, 0)
    data = lax.pad(data, jnp.zeros((), data.dtype), dpad)
    fill = jnp.broadcast_to(jnp.asarray(tuple(sparse_shape), indices.dtype),
                            indices.shape[:n_batch] + (pad, len(sparse_shape)))
    return data, jnp.concatenate([indices, fill], axis=n_batch)


def bcoo_concatenate(operands, *, dimension: int) -> BCOO:
    """``lax.concatenate`` of BCOO arrays with the same batch and dense layout, along a
    batch or sparse dimension."""
    operands = tuple(operands)
    if not operands:
        raise ValueError("bcoo_concatenate: operands must be a non-empty sequence of BCOO "
                         "arrays.")
    for op in operands:
        _check(op, "bcoo_concatenate")
    dimension = operator.index(dimension)
    out_shape = dense_shape_of(lambda *a: lax.concatenate(a, dimension), *operands).shape
    n_batch, n_dense = operands[0].n_batch, operands[0].n_dense
    if any(op.n_batch != n_batch for op in operands):
        raise ValueError("bcoo_concatenate requires inputs to have matching batch dimensions.")
    if any(op.n_dense != n_dense for op in operands):
        raise ValueError("bcoo_concatenate requires inputs to have matching dense dimensions.")
    n_sparse = operands[0].n_sparse
    if dimension >= n_batch + n_sparse:
        raise NotImplementedError("Concatenation along dense dimensions.")
    if len(operands) == 1:
        return operands[0]
    if dimension < n_batch:  # join the buffers along the batch dimension
        nse = max(op.nse for op in operands)
        datas, idxs = [], []
        for op in operands:
            batch = op.shape[:n_batch]
            d = jnp.broadcast_to(op.data, batch + op.data.shape[n_batch:])
            i = jnp.broadcast_to(op.indices, batch + op.indices.shape[n_batch:])
            d, i = _pad_nse(d, i, nse, op.shape[n_batch:n_batch + n_sparse], n_batch)
            datas.append(d)
            idxs.append(i)
        return BCOO((lax.concatenate(datas, dimension), lax.concatenate(idxs, dimension)),
                    shape=out_shape)
    # Along a sparse dimension: shift each operand's indices, join the stored elements.
    k = dimension - n_batch
    batch = out_shape[:n_batch]
    new_size = np.array(out_shape[n_batch:n_batch + n_sparse], operands[0].indices.dtype)
    datas, idxs, offset = [], [], 0
    for op in operands:
        shift = np.zeros(n_sparse, np.int64)
        shift[k] = offset
        ind = op.indices
        ind = jnp.where(_valid(op)[..., None], ind + index_row(shift, ind),
                        index_row(new_size, ind))
        datas.append(jnp.broadcast_to(op.data, batch + op.data.shape[n_batch:]))
        idxs.append(jnp.broadcast_to(ind, batch + ind.shape[n_batch:]))
        offset += op.shape[dimension]
    index_dtype = idxs[0].dtype
    idxs = [i.astype(index_dtype) for i in idxs]
    return BCOO((lax.concatenate(datas, n_batch), lax.concatenate(idxs, n_batch)),
                shape=out_shape)
