"""BCOO (batched coordinate) sparse arrays: the ``BCOO`` class and the functions on it.

The primitives live in ``bcoo_convert`` (todense, fromdense, extract), ``bcoo_layout``
(transpose, sort_indices, sum_duplicates) and ``bcoo_dot`` (dot_general); this module
wraps them for BCOO values and adds the operations built from them (reduce_sum,
multiply_dense, multiply_sparse). Reshaping, slicing and joining are in ``bcoo_shape``,
gather and convolution in ``bcoo_index``, sparse-sparse products in ``bcoo_spdot`` (all
brought into this namespace at the end, as JAX's module has them). Arithmetic operators,
indexing and ``sum``/``astype``/``reshape`` come from ``sparsify`` (``bcoo_rules.py``).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Protocol

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.bcoo_convert import (bcoo_extract_p, bcoo_fromdense_p,
                                                   bcoo_todense_p, extract_bufs, fromdense_bufs,
                                                   todense_bufs)
from plax.experimental.sparse.bcoo_dot import (bcoo_dot_general_p, dot_general_bufs,
                                               rdot_general_bufs)
from plax.experimental.sparse.bcoo_layout import (bcoo_sort_indices_p, bcoo_sum_duplicates_p,
                                                  bcoo_transpose_p, sort_indices_bufs,
                                                  sum_duplicates_bufs, transpose_bufs)
from plax.experimental.sparse.util import (  # noqa: F401 (JAX's module exposes these names)
    BCOOProperties, CuSparseEfficiencyWarning, Shape, SparseEfficiencyError,
    SparseEfficiencyWarning, SparseInfo, canonical_shape, nfold_vmap, validate_bcoo)
from plax.api.vmap import vmap  # noqa: F401
from plax.first_order.dot import DotDimensionNumbers  # noqa: F401
from plax.lax import GatherDimensionNumbers, GatherScatterMode  # noqa: F401
from plax.numpy.util import canonicalize_axis  # noqa: F401
from plax.runtime.array import Array  # noqa: F401
from plax.transforms.vmap import BatchTracer
from plax.typing import ArrayLike, DTypeLike  # noqa: F401
from plax.tree_util import register_pytree_node_class

__all__ = ["BCOO", "bcoo_todense", "bcoo_fromdense", "bcoo_extract", "bcoo_transpose",
           "bcoo_dot_general", "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum",
           "bcoo_sum_duplicates", "bcoo_sort_indices", "bcoo_eliminate_zeros",
           "bcoo_todense_p", "bcoo_fromdense_p", "bcoo_extract_p", "bcoo_transpose_p",
           "bcoo_dot_general_p", "bcoo_sort_indices_p", "bcoo_sum_duplicates_p"]

_VMAP_AXIS_ERROR = ("Cannot map in_axis={axis} for BCOO array with n_batch={n_batch}. in_axes "
                    "for batched BCOO operations must correspond to a batch dimension.")


def _buffer_shape(x):
    shape = getattr(x, "shape", None)
    return tuple(shape) if isinstance(shape, tuple) else None


def _mapped_dim(data, indices):
    """The dimension vmap maps the buffers over, when they are its per-example values."""
    for x in (indices, data):
        if isinstance(x, BatchTracer) and x.batch_dim is not None:
            return x.batch_dim
    return None


def _fits(batch, leaf_batch) -> bool:
    """Whether buffer batch sizes ``leaf_batch`` (1 = broadcast) fit array batch sizes."""
    return len(batch) == len(leaf_batch) and all(b in (1, a) for a, b in zip(batch, leaf_batch))


def _shape_for_buffers(shape, data, indices):
    """The array shape for buffers that may have lost or gained one batch dimension since
    ``shape`` was recorded (vmap unflattens a BCOO on per-example buffers, then its results
    on batched ones); ``shape`` itself when they did not, or are not arrays."""
    dshape, ishape = _buffer_shape(data), _buffer_shape(indices)
    if dshape is None or ishape is None:
        return shape
    rank = (len(ishape) - 2 + ishape[-1] + len(dshape) - len(ishape) + 1
            if len(ishape) >= 2 else None)
    if rank == len(shape):
        return shape  # the buffers fit the shape as recorded
    # Buffers one dimension short are per-example values inside vmap (one longer, batched
    # results: the buffers may then be tracers of an enclosing vmap).
    axis = _mapped_dim(data, indices) if rank in (None, len(shape) - 1) else None
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
            if _fits(shape[:n_batch - 1], leaf_batch[:i] + leaf_batch[i + 1:]) and \
                    shape[n_batch - 1 + n_sparse:] == rest:
                return shape[:i] + (leaf_batch[i],) + shape[i:]
    return shape


@register_pytree_node_class
class BCOO(JAXSparse):
    """A sparse array in batched coordinate (BCOO) format.

    ``BCOO((data, indices), shape=...)``: ``data`` has shape ``batch + (nse,) + dense`` and
    holds the stored elements (blocks, when there are dense dimensions); ``indices`` has
    shape ``batch + (nse, n_sparse)`` and holds their positions in the sparse dimensions.
    Repeated indices add up; an index at or past the shape marks padding. A pytree whose
    leaves are ``data`` and ``indices``: it passes through jit, grad and vmap (over batch
    dimensions).
    """

    def __init__(self, args, *, shape, indices_sorted: bool = False,
                 unique_indices: bool = False):
        try:
            data, indices = args
        except (TypeError, ValueError):
            raise TypeError("BCOO expects args=(data, indices), a pair of arrays, got "
                            f"{type(args).__name__}.") from None
        self.data, self.indices = jnp.asarray(data), jnp.asarray(indices)
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices
        super().__init__(args, shape=shape)
        validate_bcoo(get_aval(self.data), get_aval(self.indices), self.shape)

    # --- layout ---------------------------------------------------------------------------
    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def _bufs(self) -> tuple:
        return (self.data, self.indices)

    @property
    def nse(self) -> int:
        return self.indices.shape[-2]

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 2

    @property
    def n_sparse(self) -> int:
        return self.indices.shape[-1]

    @property
    def n_dense(self) -> int:
        return self.data.ndim - 1 - self.n_batch

    def _repr_details(self) -> str:
        out = f", nse={self.nse}"
        if self.n_batch:
            out += f", n_batch={self.n_batch}"
        if self.n_dense:
            out += f", n_dense={self.n_dense}"
        return out

    # --- pytree -----------------------------------------------------------------------------
    def tree_flatten(self):
        return (self.data, self.indices), self._info

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        if not isinstance(aux_data, SparseInfo):
            raise ValueError(f"BCOO.tree_unflatten: invalid aux_data={aux_data!r}")
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        obj.shape = _shape_for_buffers(tuple(aux_data.shape), obj.data, obj.indices)
        obj.indices_sorted = aux_data.indices_sorted
        obj.unique_indices = aux_data.unique_indices
        return obj

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
        from plax.experimental.sparse.bcoo_shape import bcoo_update_layout
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
    if not isinstance(x, BCOO):
        raise TypeError(f"{name}: {arg} must be a BCOO array, got {type(x).__name__}.")


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


def bcoo_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """``lax.dot_general`` where one operand is a BCOO array (the result is dense) or both
    are (the result is BCOO).
    ``precision`` and ``out_sharding`` are accepted and unused, as in JAX."""
    del precision, out_sharding
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        from plax.experimental.sparse.bcoo_spdot import spdot_general
        return spdot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                             preferred_element_type=preferred_element_type)
    if isinstance(lhs, BCOO):
        return dot_general_bufs(lhs.data, lhs.indices, rhs, dimension_numbers=dimension_numbers,
                                preferred_element_type=preferred_element_type,
                                lhs_spinfo=lhs._info)
    if isinstance(rhs, BCOO):
        return rdot_general_bufs(lhs, rhs.data, rhs.indices, dimension_numbers=dimension_numbers,
                                 preferred_element_type=preferred_element_type,
                                 rhs_spinfo=rhs._info)
    return lax.dot_general(lhs, rhs, dimension_numbers,
                           preferred_element_type=preferred_element_type)


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
    fill = jnp.asarray(np.array(mat.shape[n_batch:n_batch + n_sparse], mat.indices.dtype))
    indices = jnp.where(zero[..., None], fill, mat.indices)
    return bcoo_sum_duplicates(BCOO((mat.data, indices), shape=mat.shape), nse=nse)


def bcoo_reduce_sum(mat: BCOO, *, axes) -> BCOO:
    """The sum of ``mat`` over ``axes``, as a BCOO array (summed sparse dimensions leave
    repeated indices; summed batch dimensions join the stored elements)."""
    _check_bcoo(mat, "bcoo_reduce_sum")
    shape = mat.shape
    ndim = len(shape)
    axes = sorted({operator.index(a) % ndim if -ndim <= operator.index(a) < ndim else
                   _bad_axis(a, ndim) for a in axes})
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    data, indices = mat.data, mat.indices
    dense_axes = tuple(a - n_sparse + 1 for a in axes if a >= n_batch + n_sparse)
    if dense_axes:
        data = jnp.sum(data, axis=dense_axes, dtype=data.dtype)
    if n_sparse:  # padding must not leak into summed sparse dimensions
        limit = jnp.asarray(np.array(shape[n_batch:n_batch + n_sparse], indices.dtype))
        valid = jnp.all(indices < limit, axis=-1)
        valid = lax.expand_dims(valid, tuple(range(valid.ndim, data.ndim)))
        data = jnp.where(valid, data, jnp.zeros((), data.dtype))
    kept = [i for i in range(n_sparse) if i + n_batch not in axes]
    indices = (jnp.take(indices, np.array(kept, np.int32), axis=-1) if kept else
               jnp.zeros(indices.shape[:-1] + (0,), indices.dtype))
    batch_axes = [a for a in axes if a < n_batch]
    for ax in batch_axes:  # bring data and indices to the same size along ax
        d, i = data.shape[ax], indices.shape[ax]
        if d == 1 and i == 1:
            data = data * jnp.asarray(shape[ax], data.dtype)
        elif d == 1:
            data = jnp.broadcast_to(data, data.shape[:ax] + (i,) + data.shape[ax + 1:])
        elif i == 1:
            data = jnp.sum(data, axis=ax, keepdims=True, dtype=data.dtype)
    kept_batch = [b for b in range(n_batch) if b not in batch_axes]
    data = _fold_into_nse(data, kept_batch, batch_axes, n_batch)
    indices = _fold_into_nse(indices, kept_batch, batch_axes, n_batch)
    out_shape = tuple(s for i, s in enumerate(shape) if i not in axes)
    return BCOO((data, indices), shape=out_shape)


def _bad_axis(a, ndim):
    raise ValueError(f"bcoo_reduce_sum: axis {a} is out of bounds for an array of dimension "
                     f"{ndim}.")


def _fold_into_nse(x, kept_batch, summed_batch, n_batch):
    """``x`` with the ``summed_batch`` dimensions merged into its nse dimension."""
    if not summed_batch:
        return x
    perm = (*kept_batch, *summed_batch, *range(n_batch, x.ndim))
    x = lax.transpose(x, perm)
    k = len(kept_batch)
    merged = math.prod(x.shape[k:k + len(summed_batch) + 1])
    return x.reshape(x.shape[:k] + (merged,) + x.shape[k + len(summed_batch) + 1:])


def bcoo_multiply_dense(sp_mat: BCOO, v):
    """The data of ``sp_mat * v`` (``v`` dense, broadcasting to ``sp_mat``'s shape): the
    stored elements times the elements of ``v`` at their positions. The result is data for
    ``sp_mat``'s indices, not a BCOO array."""
    _check_bcoo(sp_mat, "bcoo_multiply_dense", "sp_mat")
    return multiply_dense_bufs(sp_mat.data, sp_mat.indices, v, spinfo=sp_mat._info)


def multiply_dense_bufs(data, indices, v, *, spinfo: SparseInfo):
    """``bcoo_multiply_dense`` on BCOO buffers."""
    shape = tuple(spinfo.shape)
    v = jnp.asarray(v)
    vshape = get_aval(v).shape
    if not vshape:
        return data * v
    if vshape == shape:  # no deduplication needed: multiplication distributes over sums
        return data * extract_bufs(indices, v)
    if jnp.broadcast_shapes(vshape, shape) != shape:
        raise NotImplementedError(
            "multiplication between sparse and dense is only implemented for cases where the "
            f"output shape matches the sparse matrix shape. Got shape={shape}, v.shape={vshape}")
    v = lax.expand_dims(v, tuple(range(len(shape) - len(vshape))))
    n_batch, n_sparse, _, _ = validate_bcoo(get_aval(data), get_aval(indices), shape)
    vsparse = get_aval(v).shape[n_batch:n_batch + n_sparse]

    def one(d, i, w):
        # Padding elements read some element of v (indexing clamps): their data stays padding.
        where = tuple(i[:, k] if vsparse[k] != 1 else 0 for k in range(n_sparse))
        return d * w[where] if where else d * w[None]
    return nfold_vmap(one, n_batch)(data, indices, v)


def bcoo_multiply_sparse(lhs: BCOO, rhs: BCOO) -> BCOO:
    """The elementwise product of two BCOO arrays of the same rank (broadcasting sizes 1),
    with ``lhs.nse * rhs.nse`` stored elements per batch."""
    _check_bcoo(lhs, "bcoo_multiply_sparse", "lhs")
    _check_bcoo(rhs, "bcoo_multiply_sparse", "rhs")
    if lhs.ndim != rhs.ndim:
        raise TypeError("bcoo_multiply_sparse: arrays must have same number of dimensions, "
                        f"got {lhs.shape}, {rhs.shape}")
    if lhs.n_dense != rhs.n_dense:
        raise NotImplementedError("bcoo_multiply_sparse: arrays with differing numbers of "
                                  f"dense dimensions: {lhs}, {rhs}")
    if lhs.n_batch != rhs.n_batch:
        raise NotImplementedError("bcoo_multiply_sparse: arrays with differing numbers of "
                                  f"batch dimensions are not supported by plax: {lhs}, {rhs}")
    shape = jnp.broadcast_shapes(lhs.shape, rhs.shape)
    n_batch = lhs.n_batch
    lshape, rshape = lhs.shape[n_batch:], rhs.shape[n_batch:]
    n_sparse = lhs.n_sparse
    # Dimensions where both have more than one element must match; elsewhere an index of a
    # size-1 dimension is broadcast, and the other operand's index is the result's.
    compared = np.array([k for k in range(n_sparse) if lshape[k] != 1 and rshape[k] != 1],
                        np.int32)
    nse = lhs.nse * rhs.nse
    lfill = np.array(lshape[:n_sparse], np.int64)
    rfill = np.array(rshape[:n_sparse], np.int64)

    def one(ld, li, rd, ri):
        lvalid = jnp.all(li < lfill.astype(li.dtype), axis=-1)
        rvalid = jnp.all(ri < rfill.astype(ri.dtype), axis=-1)
        match = lvalid[:, None] & rvalid[None, :]
        if compared.size:
            match = match & jnp.all(jnp.take(li, compared, axis=-1)[:, None, :]
                                    == jnp.take(ri, compared, axis=-1)[None, :, :], axis=-1)
        il, ir = jnp.nonzero(match, size=nse, fill_value=(li.shape[0], ri.shape[0]))
        data = (ld.at[il].get(mode="fill", fill_value=0) *
                rd.at[ir].get(mode="fill", fill_value=0))
        big = max(shape[n_batch:], default=0)
        idx = jnp.maximum(li.at[il].get(mode="fill", fill_value=big),
                          ri.at[ir].get(mode="fill", fill_value=big))
        return data, idx
    data, indices = nfold_vmap(one, n_batch)(lhs.data, lhs.indices, rhs.data, rhs.indices)
    return BCOO((data, indices), shape=shape)


# --- the rest of JAX's bcoo module namespace ----------------------------------------------------
class Buffer(Protocol):
    """What a BCOO buffer (or its abstract value) provides: a shape and a dtype."""

    @property
    def shape(self) -> Shape: ...

    @property
    def dtype(self) -> Any: ...


# The data and index dtypes cuSPARSE kernels take (JAX's GPU lowering checks them).
CUSPARSE_DATA_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
CUSPARSE_INDEX_DTYPES = [np.int32]


def ranges_like(*xs):
    """Consecutive ranges as long as each of ``xs`` (one after the other)."""
    start = 0
    for x in xs:
        yield range(start, start + len(x))
        start += len(x)


def remaining(original, *removed_lists):
    """The items of ``original`` in none of ``removed_lists``, in order."""
    removed = set().union(*map(set, removed_lists))
    return [i for i in original if i not in removed]


# The operations built on BCOO live in their own modules (they import this one); JAX's bcoo
# module holds them all.
from plax.experimental.sparse.bcoo_shape import (  # noqa: E402
    bcoo_broadcast_in_dim, bcoo_concatenate, bcoo_dynamic_slice, bcoo_reshape, bcoo_rev,
    bcoo_slice, bcoo_squeeze, bcoo_update_layout)
from plax.experimental.sparse.bcoo_spdot import (  # noqa: E402
    bcoo_dot_general_sampled, bcoo_dot_general_sampled_p, bcoo_spdot_general_p, coo_spmm_p,
    coo_spmv_p)
from plax.experimental.sparse.bcoo_index import (  # noqa: E402
    bcoo_conv_general_dilated, bcoo_gather)

__all__ += ["bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_dynamic_slice", "bcoo_reshape",
            "bcoo_rev", "bcoo_slice", "bcoo_squeeze", "bcoo_update_layout",
            "bcoo_dot_general_sampled", "bcoo_dot_general_sampled_p", "bcoo_spdot_general_p",
            "bcoo_conv_general_dilated", "bcoo_gather", "BCOOProperties", "Buffer"]
