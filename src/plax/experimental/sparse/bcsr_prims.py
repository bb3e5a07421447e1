"""The BCSR primitives: ``bcsr_todense``, ``bcsr_fromdense``, ``bcsr_extract`` and
``bcsr_dot_general``, with their rules, and the index conversions between BCSR and BCOO.

A BCSR array of shape ``batch + (rows, cols) + dense`` is stored as ``data`` (``batch +
(nse,) + dense``), ``indices`` (``batch + (nse,)``: each stored element's column) and
``indptr`` (``batch + (rows + 1,)``: row ``r`` holds the elements ``indptr[r]`` to
``indptr[r + 1]``). Elements at or past ``indptr[-1]``, and columns at or past ``cols``,
are padding. A batch dimension of a buffer may have size 1 (shared by every batch).

Each primitive is carried out on the BCOO form of its buffers (``bcsr_to_bcoo_indices``),
so every BCOO rule that already exists does the arithmetic.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from plax import lax
from plax.api.jit import jit
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering, transpose_rules
from plax.core.trace import get_aval
from plax.experimental.sparse.bcoo_convert import (extract_bufs, fromdense_bufs, to_front,
                                                   todense_batch_rule, todense_bufs)
from plax.experimental.sparse.bcoo_dot import (bcoo_dot_general_p, canonical_dimension_numbers,
                                               dot_batch_rule, dot_general_bufs)
from plax.experimental.sparse.util import (SparseInfo, batch_fits, check_indices_known, fromdense_statics,
                                           fromdense_jvp, linear_in, nfold_vmap)
from plax.first_order.batch_util import moveaxis, move_batch_dim
from plax.lowering.inline import lower_fun

__all__ = ["BCSRProperties", "validate_bcsr", "validate_bcsr_indices", "csr_rows",
           "bcsr_to_bcoo_indices",
           "bcoo_to_bcsr_indices", "bcsr_todense_p", "bcsr_fromdense_p", "bcsr_extract_p",
           "bcsr_dot_general_p", "todense_bufs_bcsr", "fromdense_bufs_bcsr",
           "extract_bufs_bcsr", "dot_general_bufs_bcsr"]


class BCSRProperties(NamedTuple):
    """How a BCSR array's dimensions split, and how many elements it stores per batch."""
    n_batch: int
    n_dense: int
    nse: int


def validate_bcsr_indices(indices, indptr, shape) -> BCSRProperties:
    """The layout index buffers (arrays or avals) ``indices`` and ``indptr`` give an array
    of ``shape``; JAX's errors where they do not fit."""
    shape = tuple(shape)
    if not dtypes.is_integer(indices.dtype) or not dtypes.is_integer(indptr.dtype):
        raise TypeError(f"BCSR indices and indptr must have integer dtypes, got "
                        f"indices.dtype={indices.dtype}, indptr.dtype={indptr.dtype}.")
    if indices.dtype != indptr.dtype:
        raise TypeError(f"BCSR indices and indptr must have the same dtype, got "
                        f"indices.dtype={indices.dtype}, indptr.dtype={indptr.dtype}.")
    n_batch = indices.ndim - 1
    n_dense = len(shape) - n_batch - 2
    if n_batch < 0 or n_dense < 0:
        raise ValueError(f"BCSR arrays have exactly 2 sparse dimensions: indices.shape="
                         f"{tuple(indices.shape)} (batch dimensions + (nse,)) does not fit "
                         f"shape={shape}.")
    if indptr.ndim != n_batch + 1 or indptr.shape[-1] != shape[n_batch] + 1:
        raise ValueError("indptr shape must match the matrix shape plus 1: got "
                         f"indptr.shape={tuple(indptr.shape)} for shape={shape} with "
                         f"n_batch={n_batch}.")
    for name, buf in (("indices", indices), ("indptr", indptr)):
        if not batch_fits(tuple(buf.shape[:n_batch]), shape[:n_batch]):
            raise ValueError(f"{name} batch dimensions not compatible for {name}.shape="
                             f"{tuple(buf.shape)}, shape={shape}")
    return BCSRProperties(n_batch, n_dense, indices.shape[-1])


def validate_bcsr(data, indices, indptr, shape) -> BCSRProperties:
    """Check that the buffers (arrays or avals) describe a BCSR array of ``shape``."""
    props = validate_bcsr_indices(indices, indptr, shape)
    n_batch, n_dense, nse = props
    shape = tuple(shape)
    if not batch_fits(tuple(data.shape[:n_batch]), shape[:n_batch]):
        raise ValueError(f"data batch dimensions not compatible for data.shape="
                         f"{tuple(data.shape)}, shape={shape}")
    if tuple(data.shape[n_batch:]) != (nse,) + shape[n_batch + 2:]:
        raise ValueError(f"Invalid data.shape={tuple(data.shape)} for nse={nse}, "
                         f"n_batch={n_batch}, n_dense={n_dense}")
    return props


# --- index conversions --------------------------------------------------------------------------
def csr_rows(indptr, nse: int):
    """The row of each of ``nse`` stored elements (``rows`` for those at or past
    ``indptr[-1]``, which are padding): how many row ends lie at or before it."""
    ends = jnp.zeros((nse,), get_aval(indptr).dtype).at[indptr[1:]].add(1, mode="drop")
    return jnp.cumsum(ends, dtype=get_aval(indptr).dtype)


@jit  # one executable per layout for eager calls (to_bcoo, concatenation, ...)
def bcsr_to_bcoo_indices(indices, indptr):
    """BCOO indices (``batch + (nse, 2)``: row and column) of BCSR ``indices``/``indptr``."""
    n_batch = get_aval(indices).ndim - 1
    nse = get_aval(indices).shape[-1]

    def one(ind, ptr):
        return jnp.stack([csr_rows(ptr, nse), ind], axis=-1)
    return nfold_vmap(one, n_batch)(indices, indptr)


def bcoo_to_bcsr_indices(rows, n_rows: int):
    """``(perm, indptr)`` for unbatched row indices ``rows``: the stable order grouping
    elements by row (padding rows, at or past ``n_rows``, last) and each row's start."""
    nse = get_aval(rows).shape[0]
    dtype = get_aval(rows).dtype
    _, perm = lax.sort((rows, lax.broadcasted_iota(np.int32, (nse,), 0)), num_keys=1,
                       is_stable=True)
    counts = jnp.zeros((n_rows,), dtype).at[rows].add(1, mode="drop")
    indptr = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(counts, dtype=dtype)])
    return perm, indptr


def _bcoo_indices_aval(indices):
    return ShapedArray(tuple(indices.shape) + (2,), indices.dtype)


# --- bcsr_todense -----------------------------------------------------------------------------
bcsr_todense_p = Primitive("bcsr_todense")


def todense_bufs_bcsr(data, indices, indptr, *, spinfo: SparseInfo):
    """The dense array the BCSR buffers describe."""
    return bcsr_todense_p.bind(jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr),
                               spinfo=spinfo)


def _todense_abstract(data, indices, indptr, *, spinfo):
    validate_bcsr(data, indices, indptr, spinfo.shape)
    return ShapedArray(tuple(spinfo.shape), data.dtype)


def _todense_impl(data, indices, indptr, *, spinfo):
    return todense_bufs(data, bcsr_to_bcoo_indices(indices, indptr),
                        spinfo=SparseInfo(tuple(spinfo.shape)))


def _todense_transpose(ct, data, indices, indptr, *, spinfo):
    check_indices_known(indices, indptr)
    return [extract_bufs_bcsr(indices, indptr, ct).astype(data.aval.dtype), None, None]


abstract_eval_rules[bcsr_todense_p] = _todense_abstract
register_lowering(bcsr_todense_p, lower_fun(_todense_impl))
linear_in(bcsr_todense_p, 0)
transpose_rules[bcsr_todense_p] = _todense_transpose
batch_rules[bcsr_todense_p] = todense_batch_rule(bcsr_todense_p)


# --- bcsr_extract -----------------------------------------------------------------------------
bcsr_extract_p = Primitive("bcsr_extract")


def extract_bufs_bcsr(indices, indptr, mat):
    """BCSR data for ``indices``/``indptr``: the elements of dense ``mat`` at each stored
    position (zero at padding)."""
    return bcsr_extract_p.bind(jnp.asarray(indices), jnp.asarray(indptr), jnp.asarray(mat))


def _extract_abstract(indices, indptr, mat):
    n_batch, n_dense, nse = validate_bcsr_indices(indices, indptr, mat.shape)
    return ShapedArray(tuple(mat.shape[:n_batch]) + (nse,) + tuple(mat.shape[n_batch + 2:]),
                       mat.dtype)


def _extract_impl(indices, indptr, mat):
    out = extract_bufs(bcsr_to_bcoo_indices(indices, indptr), mat)
    return jnp.broadcast_to(out, _extract_abstract(get_aval(indices), get_aval(indptr),
                                                   get_aval(mat)).shape)


def _extract_transpose(ct, indices, indptr, mat):
    check_indices_known(indices, indptr)
    dense = todense_bufs_bcsr(ct, indices, indptr, spinfo=SparseInfo(tuple(mat.aval.shape)))
    return [None, None, dense]


def _extract_batch(axis, vals, dims):
    (indices, indptr, mat), (di, dp, dm) = vals, dims
    mat = move_batch_dim(mat, dm, 0, axis.size)
    return extract_bufs_bcsr(to_front(indices, di), to_front(indptr, dp), mat), 0


abstract_eval_rules[bcsr_extract_p] = _extract_abstract
register_lowering(bcsr_extract_p, lower_fun(_extract_impl))
linear_in(bcsr_extract_p, 2)
transpose_rules[bcsr_extract_p] = _extract_transpose
batch_rules[bcsr_extract_p] = _extract_batch


# --- bcsr_fromdense ---------------------------------------------------------------------------
bcsr_fromdense_p = Primitive("bcsr_fromdense", multiple_results=True)


def fromdense_bufs_bcsr(mat, *, nse=None, n_batch: int = 0, n_dense: int = 0,
                        index_dtype=np.int32):
    """``(data, indices, indptr)`` of the BCSR form of dense ``mat``: its nonzero elements
    (blocks, with dense dimensions) row by row, padded to ``nse`` per batch."""
    mat = jnp.asarray(mat)
    n_batch, n_dense = int(n_batch), int(n_dense)
    ndim = get_aval(mat).ndim
    if n_batch < 0 or n_dense < 0 or ndim - n_batch - n_dense != 2:
        raise ValueError("bcsr_fromdense: must have 2 sparse dimensions: got "
                         f"mat.ndim={ndim}, n_batch={n_batch}, n_dense={n_dense}.")
    nse, index_dtype = fromdense_statics(mat, nse, index_dtype, "bcsr_fromdense", "BCSR",
                                         n_batch, n_dense)
    return tuple(bcsr_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                       index_dtype=index_dtype))


def _fromdense_abstract(mat, *, nse, n_batch, n_dense, index_dtype):
    batch = tuple(mat.shape[:n_batch])
    return [ShapedArray(batch + (nse,) + tuple(mat.shape[n_batch + 2:]), mat.dtype),
            ShapedArray(batch + (nse,), index_dtype),
            ShapedArray(batch + (mat.shape[n_batch] + 1,), index_dtype)]


def _fromdense_impl(mat, *, nse, n_batch, n_dense, index_dtype):
    data, coo = fromdense_bufs(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                               index_dtype=index_dtype)
    n_rows = get_aval(mat).shape[n_batch]

    def ptr(rows):  # elements come in row-major order, padding (row n_rows) last
        counts = jnp.zeros((n_rows,), index_dtype).at[rows].add(1, mode="drop")
        return jnp.concatenate([jnp.zeros((1,), index_dtype), jnp.cumsum(counts)])
    indptr = nfold_vmap(ptr, n_batch, broadcasted=False)(coo[..., 0])
    return [data, coo[..., 1], indptr]


def _fromdense_extract(x, index_bufs, mat, **params):
    return extract_bufs_bcsr(*index_bufs, x)


def _fromdense_batch(axis, vals, dims, *, nse, n_batch, n_dense, index_dtype):
    (mat,), (d,) = vals, dims
    out = bcsr_fromdense_p.bind(moveaxis(mat, d, 0), nse=nse, n_batch=n_batch + 1,
                                n_dense=n_dense, index_dtype=index_dtype)
    return out, [0, 0, 0]


abstract_eval_rules[bcsr_fromdense_p] = _fromdense_abstract
register_lowering(bcsr_fromdense_p, lower_fun(_fromdense_impl, multiple_results=True))
fromdense_jvp(bcsr_fromdense_p, _fromdense_extract)
batch_rules[bcsr_fromdense_p] = _fromdense_batch


# --- bcsr_dot_general -------------------------------------------------------------------------
bcsr_dot_general_p = Primitive("bcsr_dot_general")


def dot_general_bufs_bcsr(lhs_data, lhs_indices, lhs_indptr, rhs, *, dimension_numbers,
                          preferred_element_type=None, lhs_spinfo: SparseInfo):
    """``dot_general`` of the BCSR array (``lhs_data``, ``lhs_indices``, ``lhs_indptr``)
    with dense ``rhs``; the result is dense."""
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize_user_dtype(preferred_element_type,
                                                                "preferred_element_type")
    return bcsr_dot_general_p.bind(
        jnp.asarray(lhs_data), jnp.asarray(lhs_indices), jnp.asarray(lhs_indptr),
        jnp.asarray(rhs), dimension_numbers=canonical_dimension_numbers(dimension_numbers),
        preferred_element_type=preferred_element_type, lhs_spinfo=lhs_spinfo)


def _dot_abstract(lhs_data, lhs_indices, lhs_indptr, rhs, *, dimension_numbers,
                  preferred_element_type, lhs_spinfo):
    n_batch, n_dense, _ = validate_bcsr(lhs_data, lhs_indices, lhs_indptr, lhs_spinfo.shape)
    (lc, _), (lb, _) = dimension_numbers
    if any(d >= n_batch + 2 for d in lc):
        raise NotImplementedError("bcsr_dot_general: contracting over dense dimensions.")
    if lb and max(lb) >= n_batch:
        raise NotImplementedError(
            "bcsr_dot_general batch dimensions must be among the batch dimensions in the sparse "
            f"representation.\ngot lhs_batch={lb}, n_batch={n_batch}")
    return abstract_eval_rules[bcoo_dot_general_p](
        lhs_data, _bcoo_indices_aval(lhs_indices), rhs, dimension_numbers=dimension_numbers,
        preferred_element_type=preferred_element_type, lhs_spinfo=lhs_spinfo)


def _dot_impl(lhs_data, lhs_indices, lhs_indptr, rhs, *, dimension_numbers,
              preferred_element_type, lhs_spinfo):
    return dot_general_bufs(lhs_data, bcsr_to_bcoo_indices(lhs_indices, lhs_indptr), rhs,
                            dimension_numbers=dimension_numbers,
                            preferred_element_type=preferred_element_type,
                            lhs_spinfo=SparseInfo(tuple(lhs_spinfo.shape)))


def _dot_transpose(ct, lhs_data, lhs_indices, lhs_indptr, rhs, *, dimension_numbers,
                   preferred_element_type, lhs_spinfo):
    check_indices_known(lhs_indices, lhs_indptr)
    # BCOO's rule on the BCOO form of the indices does the work.
    coo = bcsr_to_bcoo_indices(lhs_indices, lhs_indptr)
    data_ct, _, rhs_ct = transpose_rules[bcoo_dot_general_p](
        ct, lhs_data, coo, rhs, dimension_numbers=dimension_numbers,
        preferred_element_type=preferred_element_type,
        lhs_spinfo=SparseInfo(tuple(lhs_spinfo.shape)))
    return [data_ct, None, None, rhs_ct]


abstract_eval_rules[bcsr_dot_general_p] = _dot_abstract
register_lowering(bcsr_dot_general_p, lower_fun(_dot_impl))
linear_in(bcsr_dot_general_p, 0, 3)
transpose_rules[bcsr_dot_general_p] = _dot_transpose
batch_rules[bcsr_dot_general_p] = dot_batch_rule(bcsr_dot_general_p, 3)
