"""BCOO (batched coordinate) sparse arrays: JAX's ``bcoo`` module, every BCOO operation.

The ``BCOO`` class and the wrappers of the format's primitives are in ``bcoo_array``
(the primitives themselves in ``bcoo_convert``, ``bcoo_layout`` and ``bcoo_dot``);
reshaping, slicing and joining are in ``bcoo_shape``, gather and convolution in
``bcoo_index``, sparse-sparse products in ``bcoo_spdot``. This module gathers them and adds
the operations built from them: ``bcoo_dot_general`` (one or both operands sparse),
``bcoo_reduce_sum``, ``bcoo_multiply_dense`` and ``bcoo_multiply_sparse``. Arithmetic
operators, indexing and ``sum``/``astype``/``reshape`` come from ``sparsify``
(``bcoo_rules.py``).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Protocol

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core.trace import get_aval
from plax.experimental.sparse._base import JAXSparse  # noqa: F401 (JAX's module has it)
from plax.experimental.sparse.bcoo_array import (
    BCOO, _check_bcoo, bcoo_eliminate_zeros, bcoo_extract, bcoo_fromdense, bcoo_sort_indices,
    bcoo_sum_duplicates, bcoo_todense, bcoo_transpose, bcoo_update_layout)
from plax.experimental.sparse.bcoo_convert import (bcoo_extract_p, bcoo_fromdense_p,
                                                   bcoo_todense_p, extract_bufs, fromdense_bufs,
                                                   todense_bufs)
from plax.experimental.sparse.bcoo_dot import (bcoo_dot_general_p, dot_general_bufs,
                                               rdot_general_bufs)
from plax.experimental.sparse.bcoo_index import bcoo_conv_general_dilated, bcoo_gather
from plax.experimental.sparse.bcoo_layout import (bcoo_sort_indices_p, bcoo_sum_duplicates_p,
                                                  bcoo_transpose_p)
from plax.experimental.sparse.bcoo_shape import (
    bcoo_broadcast_in_dim, bcoo_concatenate, bcoo_dynamic_slice, bcoo_reshape, bcoo_rev,
    bcoo_slice, bcoo_squeeze)
from plax.experimental.sparse.bcoo_spdot import (  # noqa: F401 (JAX's module holds these)
    bcoo_dot_general_sampled, bcoo_dot_general_sampled_p, bcoo_spdot_general_p, coo_spmm_p,
    coo_spmv_p, spdot_general)
from plax.experimental.sparse.util import (  # noqa: F401 (JAX's module exposes these names)
    BCOOProperties, CuSparseEfficiencyWarning, Shape, SparseEfficiencyError,
    SparseEfficiencyWarning, SparseInfo, canonical_shape, nfold_vmap, validate_bcoo)
from plax.experimental.sparse.util import index_row
from plax.api.vmap import vmap  # noqa: F401
from plax.first_order.dot import DotDimensionNumbers  # noqa: F401
from plax.lax import GatherDimensionNumbers, GatherScatterMode  # noqa: F401
from plax.numpy.util import canonicalize_axis  # noqa: F401
from plax.runtime.array import Array  # noqa: F401
from plax.typing import ArrayLike, DTypeLike  # noqa: F401

# JAX's private names for the buffer-level primitives' wrappers (its tests call them).
_bcoo_extract = extract_bufs
_bcoo_todense = todense_bufs
_bcoo_fromdense = fromdense_bufs
_bcoo_dot_general = dot_general_bufs

__all__ = ["BCOO", "bcoo_todense", "bcoo_fromdense", "bcoo_extract", "bcoo_transpose",
           "bcoo_dot_general", "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum",
           "bcoo_sum_duplicates", "bcoo_sort_indices", "bcoo_eliminate_zeros",
           "bcoo_todense_p", "bcoo_fromdense_p", "bcoo_extract_p", "bcoo_transpose_p",
           "bcoo_dot_general_p", "bcoo_sort_indices_p", "bcoo_sum_duplicates_p",
           "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_dynamic_slice", "bcoo_reshape",
           "bcoo_rev", "bcoo_slice", "bcoo_squeeze", "bcoo_update_layout",
           "bcoo_dot_general_sampled", "bcoo_dot_general_sampled_p", "bcoo_spdot_general_p",
           "bcoo_conv_general_dilated", "bcoo_gather", "BCOOProperties", "Buffer"]


# --- products and sums ----------------------------------------------------------------------------
def bcoo_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """``lax.dot_general`` where one operand is a BCOO array (the result is dense) or both
    are (the result is BCOO).
    ``precision`` and ``out_sharding`` are accepted and unused, as in JAX."""
    del precision, out_sharding
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
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
        limit = index_row(tuple(shape[n_batch:n_batch + n_sparse]), indices)
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
        lvalid = jnp.all(li < index_row(lfill, li), axis=-1)
        rvalid = jnp.all(ri < index_row(rfill, ri), axis=-1)
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
