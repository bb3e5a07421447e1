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
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             linear_primitives, register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import concrete_or_error, get_aval
from plax.core import dtypes
from plax.experimental.sparse.util import (SparseInfo, count_stored_elements, nfold_vmap,
                                           validate_bcoo, validate_bcoo_indices)
from plax.first_order.ad_util import defjvp
from plax.first_order.batch_util import moveaxis, move_batch_dim
from plax.lowering.inline import lower_fun

__all__ = ["bcoo_todense_p", "bcoo_fromdense_p", "bcoo_extract_p", "todense_bufs",
           "fromdense_bufs", "extract_bufs", "batch_to_front", "first_occurrence", "unbroadcast",
           "element_index"]


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


def batch_to_front(data, indices, dims, spinfo: SparseInfo, size: int):
    """Batched BCOO buffers with the vmapped dimension as a new leading batch dimension
    (size 1 for an unbatched buffer, which BCOO broadcasts), and the matching SparseInfo."""
    def front(x, d):
        return lax.expand_dims(x, (0,)) if d is None else moveaxis(x, d, 0)
    return (front(data, dims[0]), front(indices, dims[1]),
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
    if is_undefined(indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    data_ct = extract_bufs(indices, ct)
    return [unbroadcast(data_ct, data.aval.shape), None]


def _todense_batch(axis, vals, dims, *, spinfo):
    data, indices, spinfo = batch_to_front(*vals, dims, spinfo, axis.size)
    return todense_bufs(data, indices, spinfo=spinfo), 0


abstract_eval_rules[bcoo_todense_p] = _todense_abstract
register_lowering(bcoo_todense_p, lower_fun(_todense_impl))
defjvp(bcoo_todense_p, lambda t, ans, data, indices, *, spinfo:
       todense_bufs(t, indices, spinfo=spinfo), None)
linear_primitives.add(bcoo_todense_p)
transpose_rules[bcoo_todense_p] = _todense_transpose
batch_rules[bcoo_todense_p] = _todense_batch


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
    if is_undefined(indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    if not assume_unique:
        n_batch = get_aval(indices).ndim - 2
        first = nfold_vmap(first_occurrence, n_batch, broadcasted=False)(indices)
        ct = jnp.where(_mask_dense(first, get_aval(ct).ndim), ct, jnp.zeros((), get_aval(ct).dtype))
    return [None, todense_bufs(ct, indices, spinfo=SparseInfo(arr.aval.shape))]


def _extract_batch(axis, vals, dims, *, assume_unique):
    (indices, arr), (di, da) = vals, dims
    indices = lax.expand_dims(indices, (0,)) if di is None else moveaxis(indices, di, 0)
    arr = move_batch_dim(arr, da, 0, axis.size)
    return extract_bufs(indices, arr, assume_unique=assume_unique), 0


abstract_eval_rules[bcoo_extract_p] = _extract_abstract
register_lowering(bcoo_extract_p, lower_fun(_extract_impl))
defjvp(bcoo_extract_p, None, lambda t, ans, indices, arr, *, assume_unique:
       extract_bufs(indices, t, assume_unique=assume_unique))
linear_primitives.add(bcoo_extract_p)
transpose_rules[bcoo_extract_p] = _extract_transpose
batch_rules[bcoo_extract_p] = _extract_batch


# --- bcoo_fromdense ---------------------------------------------------------------------------
bcoo_fromdense_p = Primitive("bcoo_fromdense", multiple_results=True)

TRACED_NSE_ERROR = (
    "The error arose for the nse argument of bcoo_fromdense. In order for BCOO.fromdense() to "
    "be used in traced/compiled code, you must pass a concrete value to the nse (number of "
    "stored elements) argument.")


def fromdense_bufs(mat, *, nse=None, n_batch: int = 0, n_dense: int = 0, index_dtype=np.int32):
    """``(data, indices)`` of the BCOO form of dense ``mat``: its nonzero elements (blocks,
    with dense dimensions) in row-major order, padded to ``nse`` per batch."""
    mat = jnp.asarray(mat)
    n_batch, n_dense = int(n_batch), int(n_dense)
    ndim = get_aval(mat).ndim
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > ndim:
        raise ValueError(f"bcoo_fromdense: n_batch={n_batch} and n_dense={n_dense} must be "
                         f"non-negative and together at most mat.ndim={ndim}.")
    if nse is None:
        nse = count_stored_elements(mat, n_batch, n_dense)
    nse = concrete_or_error(int, nse, TRACED_NSE_ERROR)
    index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
    if not dtypes.is_integer(index_dtype):
        raise TypeError(f"bcoo_fromdense: index_dtype must be an integer dtype, got {index_dtype}.")
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


def _fromdense_jvp(primals, tangents, *, nse, n_batch, n_dense, index_dtype):
    (mat,), (mat_dot,) = primals, tangents
    data, indices = bcoo_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                          index_dtype=index_dtype)
    data_dot = (Zero(tangent_aval(get_aval(data))) if type(mat_dot) is Zero
                else extract_bufs(indices, mat_dot))
    return [data, indices], [data_dot, Zero(tangent_aval(get_aval(indices)))]


def _fromdense_batch(axis, vals, dims, *, nse, n_batch, n_dense, index_dtype):
    (mat,), (d,) = vals, dims
    out = bcoo_fromdense_p.bind(moveaxis(mat, d, 0), nse=nse, n_batch=n_batch + 1,
                                n_dense=n_dense, index_dtype=index_dtype)
    return out, [0, 0]


abstract_eval_rules[bcoo_fromdense_p] = _fromdense_abstract
register_lowering(bcoo_fromdense_p, lower_fun(_fromdense_impl, multiple_results=True))
jvp_rules[bcoo_fromdense_p] = _fromdense_jvp
batch_rules[bcoo_fromdense_p] = _fromdense_batch
