"""The BCOO (batched coordinate) sparse array: the ``BCOO`` class and the functions its
methods use.

Those are the wrappers of the format's primitives (``bcoo_convert``: todense, fromdense,
extract; ``bcoo_layout``: transpose, sort_indices, sum_duplicates), ``bcoo_eliminate_zeros``
and ``bcoo_update_layout`` (moving dimensions between batch, sparse and dense). The other
operations, built on this module, are in ``bcoo_shape``, ``bcoo_spdot``, ``bcoo_index`` and
``bcoo``, the module holding them all as JAX's ``bcoo`` does. The arithmetic operators,
indexing and ``sum``/``astype``/``reshape`` are made with ``sparsify`` (``bcoo_rules.py``).
"""
from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.experimental.sparse._base import (BatchedSparse, buffer_shape, check_sparse,
                                            mapped_dim)
from plax.experimental.sparse.bcoo_convert import extract_bufs, fromdense_bufs, todense_bufs
from plax.experimental.sparse.bcoo_layout import (sort_indices_bufs, sum_duplicates_bufs,
                                                  transpose_bufs)
from plax.experimental.sparse.util import (SparseEfficiencyError, SparseEfficiencyWarning,
                                           batch_fits, canonical_shape, index_row,
                                           validate_bcoo)
from plax.tree_util import register_pytree_node_class

__all__ = ["BCOO", "bcoo_todense", "bcoo_fromdense", "bcoo_extract", "bcoo_transpose",
           "bcoo_sort_indices", "bcoo_sum_duplicates", "bcoo_eliminate_zeros",
           "bcoo_update_layout"]

_VMAP_AXIS_ERROR = ("Cannot map in_axis={axis} for BCOO array with n_batch={n_batch}. in_axes "
                    "for batched BCOO operations must correspond to a batch dimension.")


def _shape_for_buffers(shape, data, indices):
    """The array shape for buffers that may have lost or gained one batch dimension since
    ``shape`` was recorded (vmap unflattens a BCOO on per-example buffers, then its results
    on batched ones); ``shape`` itself when they did not, or are not arrays."""
    dshape, ishape = buffer_shape(data), buffer_shape(indices)
    if dshape is None or ishape is None:
        return shape
    rank = (len(ishape) - 2 + ishape[-1] + len(dshape) - len(ishape) + 1
            if len(ishape) >= 2 else None)
    if rank == len(shape):
        return shape  # the buffers fit the shape as recorded
    # Buffers one dimension short are per-example values inside vmap (one longer, batched
    # results: the buffers may then be tracers of an enclosing vmap).
    axis = mapped_dim(indices, data) if rank in (None, len(shape) - 1) else None
    if axis is not None:  # per-example buffers inside vmap: the mapped axis must be a batch one
        n_batch = len(ishape) - 1
        if axis >= n_batch:
            raise ValueError(_VMAP_AXIS_ERROR.format(axis=axis, n_batch=n_batch))
        return shape[:axis] + shape[axis + 1:]
    if len(ishape) < 2:
        return shape
    n_batch, n_sparse = len(ishape) - 2, ishape[-1]
    rest = dshape[n_batch + 1:]
    leaf_batch = tuple(max(a, b) for a, b in zip(dshape[:n_batch], ishape[:n_batch]))
    if n_batch + n_sparse + len(rest) == len(shape) + 1:  # a batch dimension was added
        for i in range(n_batch):
            if batch_fits(leaf_batch[:i] + leaf_batch[i + 1:], shape[:n_batch - 1]) and \
                    shape[n_batch - 1 + n_sparse:] == rest:
                return shape[:i] + (leaf_batch[i],) + shape[i:]
    return shape


@register_pytree_node_class
class BCOO(BatchedSparse):
    """A sparse array in batched coordinate (BCOO) format.

    ``BCOO((data, indices), shape=...)``: ``data`` has shape ``batch + (nse,) + dense`` and
    holds the stored elements (blocks, when there are dense dimensions); ``indices`` has
    shape ``batch + (nse, n_sparse)`` and holds their positions in the sparse dimensions.
    Repeated indices add up; an index at or past the shape marks padding. A pytree whose
    leaves are ``data`` and ``indices``: it passes through jit, grad and vmap (over batch
    dimensions).
    """
    __module__ = "plax.experimental.sparse.bcoo"  # the public home, as JAX's is its bcoo module
    _buffer_names = ("data", "indices")
    _index_dims = 2  # indices: batch + (nse, n_sparse)
    _args_text = "a pair of arrays"
    _validate = staticmethod(validate_bcoo)
    _shape_for_buffers = staticmethod(_shape_for_buffers)

    @property
    def n_sparse(self) -> int:
        return self.indices.shape[-1]

    # --- constructors -------------------------------------------------------------------------
    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> BCOO:
        """The BCOO form of dense ``mat`` (see ``bcoo_fromdense``)."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense: int = 0,
                          n_batch: int = 0) -> BCOO:
        """The BCOO form of a ``scipy.sparse`` matrix or array (its COO entries, as stored)."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCOO.fromscipy with nonzero n_dense/n_batch")
        coo = mat.tocoo()
        index_dtype = np.int32 if index_dtype is None else index_dtype
        indices = np.column_stack((coo.row, coo.col)).astype(
            dtypes.canonicalize_user_dtype(index_dtype, "index_dtype"))
        return cls((jnp.asarray(coo.data), jnp.asarray(indices)), shape=coo.shape,
                   indices_sorted=False, unique_indices=False)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> BCOO:
        """An all-zero array storing ``nse`` padding elements (``sparse.empty``)."""
        shape = canonical_shape(shape)
        n_sparse = len(shape) - n_dense - n_batch
        if n_sparse < 0 or n_dense < 0 or n_batch < 0 or nse < 0:
            raise ValueError(f"Invalid inputs: shape={shape}, n_dense={n_dense}, "
                             f"n_batch={n_batch}, nse={nse}")
        batch, sparse, dense = (shape[:n_batch], shape[n_batch:n_batch + n_sparse],
                                shape[n_batch + n_sparse:])
        data = jnp.zeros(batch + (nse,) + dense, dtype)
        indices = jnp.broadcast_to(jnp.asarray(np.array(sparse, np.dtype(index_dtype))),
                                   batch + (nse, n_sparse))
        return cls((data, indices), shape=shape, indices_sorted=True, unique_indices=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32",
             n_batch: int = 0, n_dense: int = 0) -> BCOO:
        """Ones on the ``k``-th diagonal of an N x M array (``sparse.eye``)."""
        n_sparse = 2 - n_batch - n_dense
        if n_sparse < 0 or n_dense < 0 or n_batch < 0:
            raise ValueError(f"Invalid inputs: shape={(N, M)}, n_dense={n_dense}, "
                             f"n_batch={n_batch}")
        diag = min(N, M - k) if k > 0 else min(N + k, M)
        if diag <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype, n_batch=n_batch,
                              n_dense=n_dense)
        if n_dense > 0 or n_batch > 1:
            return cls.fromdense(jnp.eye(N, M, k, dtype=dtype), n_batch=n_batch,
                                 n_dense=n_dense, index_dtype=index_dtype)
        index_dtype = np.dtype(index_dtype)
        if n_batch == 0:
            rows = np.arange(diag) + max(-k, 0)
            indices = np.stack([rows, rows + k], axis=-1).astype(index_dtype)
            data = jnp.ones(diag, dtype)
        else:  # one element per row: its column, or padding where the diagonal misses it
            cols = np.arange(N) + k
            valid = (cols >= 0) & (cols < M)
            data = jnp.asarray(valid[:, None]).astype(jnp.ones((), dtype).dtype)
            indices = np.where(valid, cols, M).astype(index_dtype)[:, None, None]
        return cls((data, jnp.asarray(indices)), shape=(N, M), indices_sorted=True,
                   unique_indices=True)

    # --- methods ------------------------------------------------------------------------------
    def todense(self):
        """The dense array."""
        return bcoo_todense(self)

    def transpose(self, axes=None) -> BCOO:
        """The array with dimensions permuted by ``axes`` (reversed by default). Batch
        dimensions permute among themselves, as do dense ones."""
        perm = tuple(range(self.ndim))[::-1] if axes is None else tuple(axes)
        out = bcoo_transpose(self, permutation=perm)
        sparse_perm = [p - self.n_batch for p in perm[self.n_batch:self.n_batch + self.n_sparse]]
        if tuple(sparse_perm) == tuple(range(self.n_sparse)):
            out.indices_sorted = self.indices_sorted
        return out

    def sort_indices(self) -> BCOO:
        """The array with each batch's indices sorted."""
        return bcoo_sort_indices(self)

    def update_layout(self, *, n_batch=None, n_dense=None, on_inefficient="error") -> BCOO:
        """The same array with ``n_batch`` batch and ``n_dense`` dense dimensions (see
        ``bcoo_update_layout``)."""
        return bcoo_update_layout(self, n_batch=n_batch, n_dense=n_dense,
                                  on_inefficient=on_inefficient)

    def sum_duplicates(self, nse=None, remove_zeros: bool = True) -> BCOO:
        """The array with repeated indices merged and indices sorted; with ``remove_zeros``
        also stored zeros dropped (not differentiable). ``nse`` fixes the number of stored
        elements (needed under jit)."""
        if remove_zeros:
            return bcoo_eliminate_zeros(self, nse=nse)
        return bcoo_sum_duplicates(self, nse=nse)


# --- module functions ---------------------------------------------------------------------------
def _check_bcoo(x, name: str, arg: str = "mat"):
    check_sparse(x, BCOO, name, arg)


def bcoo_todense(mat: BCOO):
    """The dense array ``mat`` represents."""
    _check_bcoo(mat, "bcoo_todense")
    return todense_bufs(mat.data, mat.indices, spinfo=mat._info)


def bcoo_fromdense(mat, *, nse=None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype=np.int32) -> BCOO:
    """The BCOO form of dense ``mat``: its nonzero elements (or nonzero blocks over the last
    ``n_dense`` dimensions) per batch of the first ``n_batch`` dimensions, in row-major
    order. ``nse`` (default: the largest count of a batch) must be given under jit."""
    mat = jnp.asarray(mat)
    data, indices = fromdense_bufs(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                   index_dtype=index_dtype)
    return BCOO((data, indices), shape=get_aval(mat).shape, indices_sorted=True,
                unique_indices=True)


def bcoo_extract(sparr: BCOO, arr, *, assume_unique=None) -> BCOO:
    """A BCOO array with ``sparr``'s indices holding the elements of dense ``arr`` there.
    Unless ``assume_unique`` (default: ``sparr.unique_indices``), a repeated index holds
    the element at its first occurrence only, and zero at the others."""
    if not isinstance(sparr, BCOO):
        raise TypeError("First argument to bcoo_extract should be a BCOO array. "
                        f"Got type(sparr)={type(sparr)}")
    a = jnp.asarray(arr)
    if get_aval(a).shape != sparr.shape:
        raise ValueError(f"shape mismatch: sparr.shape={sparr.shape} a.shape={get_aval(a).shape}")
    if assume_unique is None:
        assume_unique = sparr.unique_indices
    data = extract_bufs(sparr.indices, a, assume_unique=assume_unique)
    return BCOO((data, sparr.indices), shape=sparr.shape, indices_sorted=sparr.indices_sorted,
                unique_indices=sparr.unique_indices)


def bcoo_transpose(mat: BCOO, *, permutation) -> BCOO:
    """``mat`` with its dimensions permuted (batch dimensions among themselves, dense ones
    among themselves)."""
    _check_bcoo(mat, "bcoo_transpose")
    data, indices = transpose_bufs(mat.data, mat.indices, permutation=permutation,
                                   spinfo=mat._info)
    shape = tuple(mat.shape[int(p)] for p in permutation)
    return BCOO((data, indices), shape=shape, unique_indices=mat.unique_indices)


def bcoo_sort_indices(mat: BCOO) -> BCOO:
    """``mat`` with each batch's indices in lexicographic order (repeats kept)."""
    _check_bcoo(mat, "bcoo_sort_indices")
    data, indices = sort_indices_bufs(mat.data, mat.indices, spinfo=mat._info)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True,
                unique_indices=mat.unique_indices)


def bcoo_sum_duplicates(mat: BCOO, nse=None) -> BCOO:
    """``mat`` with repeated indices merged (their data summed) and indices sorted. ``nse``
    sets the stored elements per batch (padding or cutting); by default the fewest that
    hold every distinct index, which needs concrete indices (give ``nse`` under jit)."""
    _check_bcoo(mat, "bcoo_sum_duplicates")
    data, indices = sum_duplicates_bufs(mat.data, mat.indices, spinfo=mat._info, nse=nse)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def bcoo_eliminate_zeros(mat: BCOO, nse=None) -> BCOO:
    """``mat`` without stored zeros (their indices become padding), duplicates merged."""
    _check_bcoo(mat, "bcoo_eliminate_zeros")
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    zero = jnp.all(mat.data == 0, axis=tuple(range(n_batch + 1, mat.data.ndim)))
    fill = jnp.asarray(tuple(mat.shape[n_batch:n_batch + n_sparse]), mat.indices.dtype)
    indices = jnp.where(zero[..., None], fill, mat.indices)
    return bcoo_sum_duplicates(BCOO((mat.data, indices), shape=mat.shape), nse=nse)


# --- buffer helpers -------------------------------------------------------------------------
def sparse_limits(mat, dtype=None, like=None):
    """The sparse dimensions' sizes, as an array of the rank of ``like`` (``mat.indices``)."""
    sizes = tuple(mat.shape[mat.n_batch:mat.n_batch + mat.n_sparse])  # (symbolic sizes too)
    return index_row(sizes, mat.indices if like is None else like, dtype)


def mask_data(data, keep, n_batch: int):
    """``data`` with the stored elements where ``keep`` is False set to zero."""
    keep = lax.expand_dims(keep, tuple(range(keep.ndim, data.ndim)))
    return jnp.where(keep, data, jnp.zeros((), data.dtype))


# --- update_layout ----------------------------------------------------------------------------
def bcoo_update_layout(mat: BCOO, *, n_batch=None, n_dense=None,
                       on_inefficient="error") -> BCOO:
    """The same array stored with ``n_batch`` batch and ``n_dense`` dense dimensions.
    Turning sparse dimensions into batch or dense ones stores many zeros: that raises
    ``SparseEfficiencyError`` (``on_inefficient='error'``), warns (``'warn'``) or is
    allowed (None)."""
    if not isinstance(mat, BCOO):
        raise TypeError("bcoo_update_layout: input should be a BCOO array, "
                        f"got type(mat)={type(mat)}")
    n_batch = mat.n_batch if n_batch is None else operator.index(n_batch)
    n_dense = mat.n_dense if n_dense is None else operator.index(n_dense)
    if (n_batch, n_dense) == (mat.n_batch, mat.n_dense):
        return mat
    if on_inefficient not in ("error", "warn", None):
        raise ValueError(f"on_inefficient={on_inefficient!r}; expected one of "
                         "['error', 'warn', None].")
    if n_batch < 0:
        raise ValueError(f"n_batch must be non-negative; got {n_batch}")
    if n_dense < 0:
        raise ValueError(f"n_dense must be non-negative; got {n_dense}")
    if n_batch + n_dense > mat.ndim:
        raise ValueError(f"sum of n_batch={n_batch} and n_dense={n_dense} cannot be larger "
                         f"than mat.ndim={mat.ndim}.")

    def inefficient(msg):
        if on_inefficient == "error":
            raise SparseEfficiencyError(msg + " To disable this error, set the on_inefficient "
                                        "argument of bcoo_update_layout to 'warn' or None.")
        if on_inefficient == "warn":
            warnings.warn(msg + " To disable this warning, set the on_inefficient argument of "
                          "bcoo_update_layout to None.", SparseEfficiencyWarning, stacklevel=3)

    shape = mat.shape
    if n_dense > mat.n_dense and any(d > 1 for d in shape[mat.ndim - n_dense:
                                                          mat.ndim - mat.n_dense]):
        inefficient(f"For matrix of shape {shape}, increasing n_dense from {mat.n_dense} to "
                    f"{n_dense} results in inefficient storage.")
    if n_batch > mat.n_batch and any(d > 1 for d in shape[mat.n_batch:n_batch]):
        inefficient(f"For matrix of shape {shape}, increasing n_batch from {mat.n_batch} to "
                    f"{n_batch} results in inefficient storage.")
    if n_dense < mat.n_dense:
        mat = _dense_to_sparse(mat, mat.n_dense - n_dense)
    if n_batch < mat.n_batch:
        mat = _batch_to_sparse(mat, mat.n_batch - n_batch)
    if n_dense > mat.n_dense:
        mat = _sparse_to_dense(mat, n_dense - mat.n_dense)
    if n_batch > mat.n_batch:
        mat = _sparse_to_batch(mat, n_batch - mat.n_batch)
    return mat


def _dense_to_sparse(mat: BCOO, n: int) -> BCOO:
    """The first ``n`` dense dimensions made sparse: each block splits into its elements."""
    nb, ns = mat.n_batch, mat.n_sparse
    moved = mat.shape[nb + ns:nb + ns + n]
    count = math.prod(moved)
    data = mat.data
    rest = data.shape[nb + 1 + n:]
    data = data.reshape(data.shape[:nb] + (mat.nse * count,) + rest)
    grid = np.stack(np.unravel_index(np.arange(count), moved), axis=-1) if moved else \
        np.zeros((1, 0))
    idx = mat.indices
    old = jnp.repeat(idx, count, axis=nb, total_repeat_length=mat.nse * count)
    new = jnp.broadcast_to(jnp.asarray(np.tile(grid, (mat.nse, 1)).astype(idx.dtype)),
                           idx.shape[:nb] + (mat.nse * count, n))
    valid = jnp.all(old < sparse_limits(mat), axis=-1, keepdims=True)
    new = jnp.where(valid, new, index_row(np.array(moved, idx.dtype), new))
    return BCOO((data, jnp.concatenate([old, new], axis=-1)), shape=mat.shape)


def _batch_to_sparse(mat: BCOO, n: int) -> BCOO:
    """The last ``n`` batch dimensions made sparse: their batches join the stored elements."""
    nb = mat.n_batch
    keep = nb - n
    batch = mat.shape[:nb]
    moved = batch[keep:]
    data = jnp.broadcast_to(mat.data, batch + mat.data.shape[nb:])
    idx = jnp.broadcast_to(mat.indices, batch + mat.indices.shape[nb:])
    nse = mat.nse * math.prod(moved)
    grid = [lax.broadcasted_iota(idx.dtype, batch + (mat.nse,), keep + k) for k in range(n)]
    valid = jnp.all(idx < sparse_limits(mat), axis=-1)
    fill = [jnp.where(valid, g, size) for g, size in zip(grid, moved)]
    idx = jnp.concatenate([jnp.stack(fill, axis=-1).astype(idx.dtype), idx], axis=-1) if n \
        else idx
    data = data.reshape(batch[:keep] + (nse,) + data.shape[nb + 1:])
    idx = idx.reshape(batch[:keep] + (nse, idx.shape[-1]))
    return BCOO((data, idx), shape=mat.shape)


def _sparse_to_dense(mat: BCOO, n: int) -> BCOO:
    """The last ``n`` sparse dimensions made dense: each element becomes a block holding it
    at its position (zeros elsewhere)."""
    nb, ns = mat.n_batch, mat.n_sparse
    moved = mat.shape[nb + ns - n:nb + ns]
    idx = mat.indices
    kept, pos = idx[..., :ns - n], idx[..., ns - n:]
    valid = jnp.all(idx < sparse_limits(mat), axis=-1)
    dense = mat.data.shape[nb + 1:]
    one_hot = jnp.ones(idx.shape[:-1], bool)
    for k, size in enumerate(moved):
        hot = pos[..., k, None] == index_row(np.arange(size, dtype=idx.dtype), pos)
        one_hot = one_hot[..., None] & hot.reshape(hot.shape[:nb + 1] + (1,) * k + (size,))
    one_hot = one_hot & lax.expand_dims(valid, tuple(range(nb + 1, nb + 1 + n)))
    data = lax.expand_dims(mat.data, tuple(range(nb + 1, nb + 1 + n)))
    one_hot = lax.expand_dims(one_hot, tuple(range(one_hot.ndim, one_hot.ndim + len(dense))))
    data = jnp.where(one_hot, data, jnp.zeros((), data.dtype))
    sizes = jnp.asarray(tuple(mat.shape[nb:nb + ns - n]), idx.dtype)
    kept = jnp.where(valid[..., None], kept, sizes)
    return BCOO((data, kept), shape=mat.shape)


def _sparse_to_batch(mat: BCOO, n: int) -> BCOO:
    """The first ``n`` sparse dimensions made batch dimensions: each batch keeps the
    elements lying in it (the others become padding)."""
    nb, ns = mat.n_batch, mat.n_sparse
    moved = mat.shape[nb:nb + n]
    batch = mat.shape[:nb]
    idx = jnp.broadcast_to(mat.indices, batch + mat.indices.shape[nb:])
    data = jnp.broadcast_to(mat.data, batch + mat.data.shape[nb:])
    new_batch = batch + moved
    here = jnp.ones(new_batch + (mat.nse,), bool)
    for k, size in enumerate(moved):
        pos = lax.broadcasted_iota(idx.dtype, new_batch + (mat.nse,), nb + k)
        col = lax.expand_dims(idx[..., k], tuple(range(nb, nb + n)))
        here = here & (col == pos)
    idx_rest = lax.expand_dims(idx[..., n:], tuple(range(nb, nb + n)))
    sizes = jnp.asarray(tuple(mat.shape[nb + n:nb + ns]), idx.dtype)
    new_idx = jnp.where(here[..., None], idx_rest, sizes)
    new_idx = jnp.broadcast_to(new_idx, new_batch + (mat.nse, ns - n))
    data = lax.expand_dims(data, tuple(range(nb, nb + n)))
    data = mask_data(jnp.broadcast_to(data, new_batch + data.shape[nb + n:]), here,
                      nb + n)
    return BCOO((data, new_idx), shape=mat.shape)

