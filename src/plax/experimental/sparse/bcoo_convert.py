"""BCOO conversions between dense and sparse: the primitives ``bcoo_todense``,
``bcoo_fromdense`` and ``bcoo_extract`` and their rules.

A BCOO array of shape ``batch + sparse + dense`` is stored as ``data`` (``batch + (nse,) +
dense``) and ``indices`` (``batch + (nse, n_sparse)``); a batch dimension of either buffer
may have size 1 (shared by every batch). An index at or beyond the shape (padding, as
``fromdense`` writes it) names no element: densifying drops it, extracting reads zero.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering, transpose_rules
from plax.core.trace import get_aval
from plax.experimental.sparse.util import (SparseInfo, check_indices_known, fromdense_statics,
                                           fromdense_jvp, linear_in, nfold_vmap, validate_bcoo,
                                           validate_bcoo_indices)
from plax.first_order.batch_util import moveaxis, move_batch_dim
from plax.lowering.inline import lower_fun

__all__ = ["bcoo_todense_p", "bcoo_fromdense_p", "bcoo_extract_p", "todense_bufs",
           "fromdense_bufs", "extract_bufs", "to_front", "batch_to_front", "todense_batch_rule",
           "first_occurrence", "unbroadcast", "element_index"]


# --- helpers shared by the BCOO primitives ----------------------------------------------------
def element_index(indices, batch_shape) -> tuple:
    """Index arrays (each ``batch_shape + (nse,)``) naming, for every stored element, its
    position in the batch and sparse dimensions of the array: NumPy-style indices of the
    dense array, whose dense dimensions are then taken whole."""
    batch_shape = tuple(batch_shape)
    nse, n_sparse = get_aval(indices).shape[-2:]
    full = batch_shape + (nse,)
    batch = [lax.broadcasted_iota(np.int32, full, k) for k in range(len(batch_shape))]
    sparse = [jnp.broadcast_to(indices[..., i], full) for i in range(n_sparse)]
    return tuple(batch + sparse)


def first_occurrence(indices):
    """A boolean mask over the stored elements of unbatched ``indices`` ``(nse, n_sparse)``:
    True where an index is met for the first time (in storage order)."""
    nse, n_sparse = get_aval(indices).shape
    if nse == 0 or n_sparse == 0:
        return lax.broadcasted_iota(np.int32, (nse,), 0) == 0
    columns = [indices[:, i] for i in range(n_sparse)]
    order = lax.broadcasted_iota(np.int32, (nse,), 0)
    *sorted_cols, perm = lax.sort((*columns, order), num_keys=n_sparse, is_stable=True)
    changed = jnp.zeros((nse - 1,), bool)
    for col in sorted_cols:
        changed = changed | (col[1:] != col[:-1])
    starts = jnp.concatenate([jnp.ones((1,), bool), changed])
    return jnp.zeros((nse,), bool).at[perm].set(starts)


def to_front(x, d):
    """A sparse buffer with its vmapped dimension ``d`` first (a new leading dimension of
    size 1 when unbatched: the batched formats broadcast it)."""
    return lax.expand_dims(x, (0,)) if d is None else moveaxis(x, d, 0)


def batch_to_front(vals, dims, spinfo: SparseInfo, size: int):
    """Batched buffers of a BCOO or BCSR array with the vmapped dimension as a new leading
    batch dimension, and the matching SparseInfo."""
    return ([to_front(x, d) for x, d in zip(vals, dims)],
            spinfo._replace(shape=(size,) + tuple(spinfo.shape)))


def _mask_dense(mask, data_ndim: int):
    """``mask`` (``batch + (nse,)``) with trailing unit dimensions for data's dense ones."""
    return lax.expand_dims(mask, tuple(range(mask.ndim, data_ndim))) if data_ndim > mask.ndim \
        else mask


# --- bcoo_todense -----------------------------------------------------------------------------
bcoo_todense_p = Primitive("bcoo_todense")


def todense_bufs(data, indices, *, spinfo: SparseInfo):
    """The dense array the BCOO buffers ``data`` and ``indices`` describe."""
    return bcoo_todense_p.bind(jnp.asarray(data), jnp.asarray(indices), spinfo=spinfo)


def _todense_abstract(data, indices, *, spinfo):
    validate_bcoo(data, indices, spinfo.shape)
    return ShapedArray(tuple(spinfo.shape), data.dtype)


def _todense_impl(data, indices, *, spinfo):
    shape = tuple(spinfo.shape)
    n_batch, n_sparse, _, _ = validate_bcoo(get_aval(data), get_aval(indices), shape)
    batch_shape = shape[:n_batch]
    dtype = get_aval(data).dtype
    if n_batch == 0 and n_sparse == 0:  # every stored element is the whole array
        return jnp.sum(data, axis=0, dtype=dtype)
    where = element_index(indices, batch_shape)
    updates = jnp.broadcast_to(data, batch_shape + get_aval(data).shape[n_batch:])
    return jnp.zeros(shape, dtype).at[where].add(updates, mode="drop")


def _todense_transpose(ct, data, indices, *, spinfo):
    check_indices_known(indices)
    data_ct = extract_bufs(indices, ct)
    return [unbroadcast(data_ct, data.aval.shape), None]


def todense_batch_rule(prim):
    """The batching rule of a todense primitive ``prim(*bufs, spinfo)`` (BCOO's, BCSR's): the
    vmapped dimension becomes a leading batch dimension of the array."""
    def rule(axis, vals, dims, *, spinfo):
        bufs, spinfo = batch_to_front(vals, dims, spinfo, axis.size)
        return prim.bind(*bufs, spinfo=spinfo), 0
    return rule


abstract_eval_rules[bcoo_todense_p] = _todense_abstract
register_lowering(bcoo_todense_p, lower_fun(_todense_impl))
linear_in(bcoo_todense_p, 0)
transpose_rules[bcoo_todense_p] = _todense_transpose
batch_rules[bcoo_todense_p] = todense_batch_rule(bcoo_todense_p)


def unbroadcast(x, shape):
    """``x`` summed over the dimensions where ``shape`` has size 1 and ``x`` does not (a
    cotangent of a buffer whose batch dimensions were broadcast)."""
    xs = get_aval(x).shape
    axes = tuple(i for i, (a, b) in enumerate(zip(xs, shape)) if b == 1 and a != 1)
    return jnp.sum(x, axis=axes, keepdims=True, dtype=get_aval(x).dtype) if axes else x


# --- bcoo_extract -----------------------------------------------------------------------------
bcoo_extract_p = Primitive("bcoo_extract")


def extract_bufs(indices, arr, *, assume_unique: bool = True):
    """BCOO data for ``indices``: the elements of dense ``arr`` at each stored index (zero at
    padding). Without ``assume_unique``, an index met again reads zero (its value goes to
    the first occurrence only, so that densifying gives ``arr`` back on those positions)."""
    return bcoo_extract_p.bind(jnp.asarray(indices), jnp.asarray(arr),
                               assume_unique=bool(assume_unique))


def _extract_abstract(indices, arr, *, assume_unique):
    n_batch, _, n_dense, nse = validate_bcoo_indices(indices, arr.shape)
    shape = arr.shape[:n_batch] + (nse,) + arr.shape[arr.ndim - n_dense:]
    return ShapedArray(shape, arr.dtype)


def _extract_impl(indices, arr, *, assume_unique):
    a = get_aval(arr)
    n_batch, n_sparse, n_dense, nse = validate_bcoo_indices(get_aval(indices), a.shape)
    batch_shape = a.shape[:n_batch]
    out_shape = batch_shape + (nse,) + a.shape[a.ndim - n_dense:]
    if n_sparse == 0:  # each stored element is the whole dense block of its batch
        out = jnp.broadcast_to(lax.expand_dims(arr, (n_batch,)), out_shape)
    else:
        out = arr.at[element_index(indices, batch_shape)].get(mode="fill", fill_value=0)
    if not assume_unique:
        first = nfold_vmap(first_occurrence, n_batch, broadcasted=False)(indices)
        out = jnp.where(_mask_dense(first, len(out_shape)), out, jnp.zeros((), a.dtype))
    return out


def _extract_transpose(ct, indices, arr, *, assume_unique):
    check_indices_known(indices)
    if not assume_unique:
        n_batch = get_aval(indices).ndim - 2
        first = nfold_vmap(first_occurrence, n_batch, broadcasted=False)(indices)
        ct = jnp.where(_mask_dense(first, get_aval(ct).ndim), ct, jnp.zeros((), get_aval(ct).dtype))
    return [None, todense_bufs(ct, indices, spinfo=SparseInfo(arr.aval.shape))]


def _extract_batch(axis, vals, dims, *, assume_unique):
    (indices, arr), (di, da) = vals, dims
    arr = move_batch_dim(arr, da, 0, axis.size)
    return extract_bufs(to_front(indices, di), arr, assume_unique=assume_unique), 0


abstract_eval_rules[bcoo_extract_p] = _extract_abstract
register_lowering(bcoo_extract_p, lower_fun(_extract_impl))
linear_in(bcoo_extract_p, 1)
transpose_rules[bcoo_extract_p] = _extract_transpose
batch_rules[bcoo_extract_p] = _extract_batch


# --- bcoo_fromdense ---------------------------------------------------------------------------
bcoo_fromdense_p = Primitive("bcoo_fromdense", multiple_results=True)


def fromdense_bufs(mat, *, nse=None, n_batch: int = 0, n_dense: int = 0, index_dtype=np.int32):
    """``(data, indices)`` of the BCOO form of dense ``mat``: its nonzero elements (blocks,
    with dense dimensions) in row-major order, padded to ``nse`` per batch."""
    mat = jnp.asarray(mat)
    n_batch, n_dense = int(n_batch), int(n_dense)
    ndim = get_aval(mat).ndim
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > ndim:
        raise ValueError(f"bcoo_fromdense: n_batch={n_batch} and n_dense={n_dense} must be "
                         f"non-negative and together at most mat.ndim={ndim}.")
    nse, index_dtype = fromdense_statics(mat, nse, index_dtype, "bcoo_fromdense", "BCOO",
                                         n_batch, n_dense)
    return bcoo_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                 index_dtype=index_dtype)


def _fromdense_abstract(mat, *, nse, n_batch, n_dense, index_dtype):
    n_sparse = mat.ndim - n_batch - n_dense
    data = mat.shape[:n_batch] + (nse,) + mat.shape[n_batch + n_sparse:]
    return [ShapedArray(data, mat.dtype), ShapedArray(mat.shape[:n_batch] + (nse, n_sparse),
                                                      index_dtype)]


def _fromdense_impl(mat, *, nse, n_batch, n_dense, index_dtype):
    a = get_aval(mat)
    n_sparse = a.ndim - n_batch - n_dense
    sparse_shape = a.shape[n_batch:n_batch + n_sparse]
    mask = mat != 0
    if n_dense:
        mask = jnp.any(mask, axis=tuple(range(a.ndim - n_dense, a.ndim)))
    if n_sparse == 0:
        indices = jnp.zeros(a.shape[:n_batch] + (nse, 0), index_dtype)
    else:
        def nonzero(m):
            where = jnp.nonzero(m, size=nse, fill_value=sparse_shape)
            return jnp.stack(where, axis=-1).astype(index_dtype)
        indices = nfold_vmap(nonzero, n_batch, broadcasted=False)(mask)
    data = _extract_impl(indices, mat, assume_unique=True)
    # Slots past the number of nonzeros are padding: their data is zero.
    count = jnp.sum(mask, axis=tuple(range(n_batch, mask.ndim)))
    kept = lax.broadcasted_iota(np.int32, a.shape[:n_batch] + (nse,), n_batch) < count[..., None]
    data = jnp.where(_mask_dense(kept, get_aval(data).ndim), data, jnp.zeros((), a.dtype))
    return [data, indices]


def _fromdense_extract(x, index_bufs, mat, **params):
    return extract_bufs(index_bufs[0], x)


def _fromdense_batch(axis, vals, dims, *, nse, n_batch, n_dense, index_dtype):
    (mat,), (d,) = vals, dims
    out = bcoo_fromdense_p.bind(moveaxis(mat, d, 0), nse=nse, n_batch=n_batch + 1,
                                n_dense=n_dense, index_dtype=index_dtype)
    return out, [0, 0]


abstract_eval_rules[bcoo_fromdense_p] = _fromdense_abstract
register_lowering(bcoo_fromdense_p, lower_fun(_fromdense_impl, multiple_results=True))
fromdense_jvp(bcoo_fromdense_p, _fromdense_extract)
batch_rules[bcoo_fromdense_p] = _fromdense_batch
