"""BCSR (batched compressed sparse row) arrays: the ``BCSR`` class, the ``bcsr_*``
functions, and the rules ``sparsify`` applies to BCSR values (``sparse_rules_bcsr``).

The primitives and the buffer layout are in ``bcsr_prims``. Operations that regroup stored
elements (``sum_duplicates``, ``eliminate_zeros``, concatenation along columns) go through
the BCOO form (``to_bcoo``/``from_bcoo``) and BCOO's primitives.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import partial

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.experimental.sparse._base import (BatchedSparse, JAXSparse, buffer_shape,
                                            check_sparse, mapped_dim)
from plax.experimental.sparse.api import todense_p
from plax.experimental.sparse.bcoo import (BCOO, bcoo_eliminate_zeros, bcoo_sort_indices,
                                           bcoo_sum_duplicates)
from plax.experimental.sparse.bcoo_rules import LINEAR_UNARY, NONLINEAR_UNARY, check_integer_pow
from plax.experimental.sparse.bcsr_prims import (
    BCSRProperties, bcoo_to_bcsr_indices, bcsr_dot_general_p, bcsr_extract_p, bcsr_fromdense_p,
    bcsr_to_bcoo_indices, bcsr_todense_p, dot_general_bufs_bcsr, extract_bufs_bcsr,
    fromdense_bufs_bcsr, todense_bufs_bcsr, validate_bcsr)
from plax.experimental.sparse.transform import (arrays_to_spvalues, eval_sparse,
                                                spvalues_to_arrays)
from plax.experimental.sparse.util import (CuSparseEfficiencyWarning, SparseEfficiencyWarning,
                                           SparseInfo, batch_fits, canonical_shape, nfold_vmap)
from plax.first_order.dot import DotDimensionNumbers
from plax.first_order.utility import stack_p
from plax.higher_order.custom_derivatives import custom_jvp_call_p
from plax.higher_order.pjit import pjit_p
from plax.runtime.array import Array
from plax.tree_util import register_pytree_node_class
from plax.typing import ArrayLike, DTypeLike

Shape = tuple[int, ...]

__all__ = ["BCSR", "BCSRProperties", "bcsr_todense", "bcsr_todense_p", "bcsr_fromdense",
           "bcsr_fromdense_p", "bcsr_extract", "bcsr_extract_p", "bcsr_dot_general",
           "bcsr_dot_general_p", "bcsr_sum_duplicates", "bcsr_eliminate_zeros",
           "bcsr_broadcast_in_dim", "bcsr_concatenate", "sparse_rules_bcsr", "nfold_vmap",
           "SparseInfo", "JAXSparse", "Array", "ArrayLike", "DTypeLike", "DotDimensionNumbers",
           "Shape", "SparseEfficiencyWarning", "CuSparseEfficiencyWarning"]

_VMAP_AXIS_ERROR = ("Cannot map in_axis={axis} for BCSR array with n_batch={n_batch}. in_axes "
                    "for batched BCSR operations must correspond to a batched dimension.")

# JAX's private name for the buffer-level fromdense (its tests call it).
_bcsr_fromdense = fromdense_bufs_bcsr


def _shape_for_buffers(shape, data, indices, indptr):
    """The array shape for buffers that may have lost or gained one batch dimension since
    ``shape`` was recorded (vmap unflattens a BCSR on per-example buffers, then its results
    on batched ones); ``shape`` itself when they did not, or are not arrays."""
    dshape, ishape, pshape = buffer_shape(data), buffer_shape(indices), buffer_shape(indptr)
    if dshape is None or ishape is None or pshape is None:
        return shape
    n_batch = len(ishape) - 1
    ndim = n_batch + 2 + len(dshape) - len(ishape)
    if ndim == len(shape):
        return shape
    if ndim == len(shape) - 1:  # per-example buffers inside vmap
        axis = mapped_dim(indices, indptr, data)
        if axis is not None:
            if axis > n_batch:
                raise ValueError(_VMAP_AXIS_ERROR.format(axis=axis, n_batch=n_batch + 1))
            return shape[:axis] + shape[axis + 1:]
    if ndim == len(shape) + 1 and n_batch >= 1:  # a batch dimension was added
        leaf = tuple(max(a, b, c) for a, b, c in zip(dshape, ishape, pshape[:n_batch]))
        for i in range(n_batch):
            if batch_fits(leaf[:i] + leaf[i + 1:], shape[:n_batch - 1]):
                return shape[:i] + (leaf[i],) + shape[i:]
    return shape


@register_pytree_node_class
class BCSR(BatchedSparse):
    """A sparse array in batched compressed sparse row (BCSR) format.

    ``BCSR((data, indices, indptr), shape=...)``: the array has ``n_batch`` leading batch
    dimensions, two sparse dimensions (rows, columns) and ``n_dense`` trailing dense ones.
    ``data`` (``batch + (nse,) + dense``) holds the stored elements, ``indices`` (``batch +
    (nse,)``) their columns, and ``indptr`` (``batch + (rows + 1,)``) where each row's
    elements start. A pytree whose leaves are the three buffers: it passes through jit,
    grad (with respect to ``data``) and vmap (over batch dimensions).
    """

    _buffer_names = ("data", "indices", "indptr")
    _index_dims = 1  # indices: batch + (nse,)
    _args_text = "three arrays"
    _validate = staticmethod(validate_bcsr)
    _shape_for_buffers = staticmethod(_shape_for_buffers)

    @property
    def n_sparse(self) -> int:
        return 2

    # --- constructors -------------------------------------------------------------------------
    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> BCSR:
        """The BCSR form of dense ``mat`` (see ``bcsr_fromdense``)."""
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_bcoo(cls, arr: BCOO) -> BCSR:
        """The BCSR form of a BCOO array with two sparse dimensions: each batch's stored
        elements regrouped by row (stably; duplicates are kept)."""
        if not isinstance(arr, BCOO):
            raise TypeError(f"BCSR.from_bcoo: arr must be a BCOO array, got {type(arr)}.")
        if arr.n_sparse != 2:
            raise NotImplementedError(f"BCSR.from_bcoo requires n_sparse=2; got "
                                      f"arr.n_sparse={arr.n_sparse}")
        bufs = _from_bcoo_bufs(arr.data, arr.indices, n_rows=arr.shape[arr.n_batch],
                               n_batch=arr.n_batch)
        return cls(bufs, shape=arr.shape)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense: int = 0,
                          n_batch: int = 0) -> BCSR:
        """The BCSR form of a ``scipy.sparse`` matrix or array (as its ``tocsr()``)."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCSR from_scipy_sparse with nonzero n_dense/n_batch.")
        csr = mat.tocsr()
        index_dtype = dtypes.canonicalize_user_dtype(
            np.int32 if index_dtype is None else index_dtype, "index_dtype")
        return cls((jnp.asarray(csr.data), jnp.asarray(csr.indices.astype(index_dtype)),
                    jnp.asarray(csr.indptr.astype(index_dtype))), shape=csr.shape)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> BCSR:
        """An all-zero array storing ``nse`` padding elements (``sparse.empty``)."""
        shape = canonical_shape(shape)
        if n_dense < 0 or n_batch < 0 or nse < 0 or len(shape) - n_batch - n_dense != 2:
            raise ValueError(f"Invalid inputs: shape={shape}, n_dense={n_dense}, "
                             f"n_batch={n_batch}, nse={nse}")
        batch, dense = shape[:n_batch], shape[n_batch + 2:]
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        data = jnp.zeros(batch + (nse,) + dense, dtype)
        indices = jnp.zeros(batch + (nse,), index_dtype)
        indptr = jnp.zeros(batch + (shape[n_batch] + 1,), index_dtype)
        return cls((data, indices, indptr), shape=shape)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32", n_batch: int = 0,
             n_dense: int = 0) -> BCSR:
        """Ones on the ``k``-th diagonal of an N x M array (``sparse.eye``)."""
        if n_batch or n_dense:
            raise ValueError(f"A 2-D BCSR array has no batch or dense dimensions: got "
                             f"n_batch={n_batch}, n_dense={n_dense}.")
        return cls.from_bcoo(BCOO._eye(N, M, k, dtype=dtype, index_dtype=index_dtype))

    # --- methods ------------------------------------------------------------------------------
    def todense(self):
        """The dense array."""
        return bcsr_todense(self)

    def to_bcoo(self) -> BCOO:
        """The BCOO form: the same data, with (row, column) indices."""
        return BCOO((self.data, bcsr_to_bcoo_indices(self.indices, self.indptr)),
                    shape=self.shape)

    def transpose(self, *args, **kwargs):
        """Not available for BCSR (as in JAX): transpose the BCOO form (``to_bcoo()``)."""
        raise NotImplementedError("Transpose is not implemented.")

    def sum_duplicates(self, nse=None, remove_zeros: bool = True) -> BCSR:
        """The array with repeated indices merged; with ``remove_zeros`` also stored zeros
        dropped. ``nse`` fixes the number of stored elements (needed under jit)."""
        if remove_zeros:
            return bcsr_eliminate_zeros(self, nse=nse)
        return bcsr_sum_duplicates(self, nse=nse)

    def __matmul__(self, other):
        other = jnp.asarray(other)
        return bcsr_dot_general(self, other, dimension_numbers=_matmul_dims(self.ndim,
                                                                            other.ndim))

    def __rmatmul__(self, other):
        raise NotImplementedError("bcsr_dot_general currently implemented for BCSR lhs and "
                                  "ndarray rhs.")


@partial(jit, static_argnames=("n_rows", "n_batch"))
def _from_bcoo_bufs(data, indices, *, n_rows: int, n_batch: int):
    """BCSR buffers of BCOO ones with two sparse dimensions (rows regrouped stably)."""
    def one(d, ind):
        perm, indptr = bcoo_to_bcsr_indices(ind[:, 0], n_rows)
        return jnp.take(d, perm, axis=0), jnp.take(ind[:, 1], perm), indptr
    return nfold_vmap(one, n_batch)(data, indices)


def _matmul_dims(lhs_ndim: int, rhs_ndim: int):
    """``jnp.matmul``'s dimension numbers for a sparse lhs (batch dimensions of equal rank
    are contracted as batch dimensions; a 1-D or 2-D rhs meets the lhs's last dimension)."""
    if rhs_ndim == 0:
        raise TypeError("matmul: the rhs must have at least one dimension, got a scalar.")
    if rhs_ndim <= 2:
        return (((lhs_ndim - 1,), (0,)), ((), ()))
    if rhs_ndim != lhs_ndim:
        raise NotImplementedError(f"matmul of a sparse array of rank {lhs_ndim} with a dense "
                                  f"array of rank {rhs_ndim}: give batch dimensions of equal "
                                  "rank, or call bcsr_dot_general.")
    batch = tuple(range(lhs_ndim - 2))
    return (((lhs_ndim - 1,), (rhs_ndim - 2,)), (batch, batch))


# --- module functions ---------------------------------------------------------------------------
def bcsr_todense(mat: BCSR):
    """The dense array ``mat`` represents."""
    check_sparse(mat, BCSR, "bcsr_todense")
    return todense_bufs_bcsr(*mat._bufs, spinfo=mat._info)


def bcsr_fromdense(mat, *, nse=None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype=np.int32) -> BCSR:
    """The BCSR form of dense ``mat``: per batch of the first ``n_batch`` dimensions, the
    nonzero elements (or nonzero blocks over the last ``n_dense`` dimensions) of the two
    sparse dimensions row by row. ``nse`` (default: the largest count of a batch) must be
    given under jit."""
    mat = jnp.asarray(mat)
    bufs = fromdense_bufs_bcsr(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                               index_dtype=index_dtype)
    return BCSR(bufs, shape=get_aval(mat).shape)


def bcsr_extract(indices, indptr, mat):
    """The BCSR data for ``indices``/``indptr``: the elements of dense ``mat`` at each
    stored position (zero at padding)."""
    return extract_bufs_bcsr(indices, indptr, mat)


def bcsr_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """``lax.dot_general`` of a BCSR lhs with a dense rhs; the result is dense. Contracting
    and batch dimensions of the lhs must not be dense ones; batch dimensions must be batch
    dimensions of its layout."""
    del precision, out_sharding  # one algorithm; results are laid out by XLA
    if isinstance(lhs, BCSR) and not isinstance(rhs, JAXSparse):
        return dot_general_bufs_bcsr(*lhs._bufs, rhs, dimension_numbers=dimension_numbers,
                                     preferred_element_type=preferred_element_type,
                                     lhs_spinfo=lhs._info)
    raise NotImplementedError("bcsr_dot_general currently implemented for BCSR lhs and "
                              "ndarray rhs.")


def bcsr_sum_duplicates(mat: BCSR, nse=None) -> BCSR:
    """``mat`` with repeated indices merged (their data summed), each row's columns sorted.
    ``nse`` sets the stored elements per batch; by default the fewest that hold every
    distinct index, which needs concrete indices (give ``nse`` under jit)."""
    check_sparse(mat, BCSR, "bcsr_sum_duplicates")
    return BCSR.from_bcoo(bcoo_sum_duplicates(mat.to_bcoo(), nse=nse))


def bcsr_eliminate_zeros(mat: BCSR, nse=None) -> BCSR:
    """``mat`` without stored zeros, duplicates merged (see ``bcsr_sum_duplicates``)."""
    check_sparse(mat, BCSR, "bcsr_eliminate_zeros")
    return BCSR.from_bcoo(bcoo_eliminate_zeros(mat.to_bcoo(), nse=nse))


def bcsr_broadcast_in_dim(mat: BCSR, *, shape, broadcast_dimensions, sharding=None) -> BCSR:
    """``lax.broadcast_in_dim`` of a BCSR array: new dimensions before the sparse ones are
    batch dimensions, new ones after the dense ones' start are dense; the two sparse
    dimensions stay as they are."""
    del sharding
    check_sparse(mat, BCSR, "bcsr_broadcast_in_dim")
    shape = canonical_shape(shape)
    dims = tuple(operator.index(d) for d in broadcast_dimensions)
    if len(dims) != mat.ndim or any(not 0 <= d < len(shape) for d in dims) or \
            list(dims) != sorted(set(dims)):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be strictly increasing, "
                        f"one per operand dimension and within the result's rank; got "
                        f"broadcast_dimensions={dims} for operand shape {mat.shape} and "
                        f"shape={shape}.")
    if any(mat.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
        raise TypeError(f"broadcast_in_dim operand dimension sizes must be 1 or equal to the "
                        f"result's; got operand shape {mat.shape}, shape={shape} and "
                        f"broadcast_dimensions={dims}.")
    n_batch, n_dense = mat.n_batch, mat.n_dense
    new_batch = dims[n_batch]
    new_dense = len(shape) - dims[n_batch + 2] if n_dense else 0
    if len(shape) - new_batch - new_dense != 2 or \
            any(mat.shape[n_batch + k] != shape[dims[n_batch + k]] for k in range(2)):
        raise NotImplementedError("Adding sparse dimensions with lengths != 1: BCSR keeps "
                                  f"exactly its two sparse dimensions; got shape={shape}, "
                                  f"broadcast_dimensions={dims} for {mat}.")
    old_batch = {dims[i]: i for i in range(n_batch)}

    def batch_shape(buf):  # new batch dimensions at full size; broadcast ones stay size 1
        return tuple(buf.shape[old_batch[d]] if d in old_batch else shape[d]
                     for d in range(new_batch))
    batch_dims = tuple(dims[:n_batch])
    dense_dims = tuple(d - new_batch - 1 for d in dims[n_batch + 2:])
    data = lax.broadcast_in_dim(mat.data, batch_shape(mat.data) + (mat.nse,) +
                                shape[new_batch + 2:], batch_dims + (new_batch,) + dense_dims)
    indices = lax.broadcast_in_dim(mat.indices, batch_shape(mat.indices) + (mat.nse,),
                                   batch_dims + (new_batch,))
    indptr = lax.broadcast_in_dim(mat.indptr, batch_shape(mat.indptr) +
                                  (mat.indptr.shape[-1],), batch_dims + (new_batch,))
    return BCSR((data, indices, indptr), shape=shape)


def _padding_to_column(mat: BCSR, column: int):
    """``mat``'s column indices with every padding element (at or past ``indptr[-1]``, or
    past the last column) pointing at ``column``."""
    n_cols = mat.shape[mat.n_batch + 1]
    pos = lax.broadcasted_iota(mat.indices.dtype, mat.indices.shape, mat.indices.ndim - 1)
    padding = (pos >= mat.indptr[..., -1:]) | (mat.indices >= n_cols)
    return jnp.where(padding, jnp.asarray(column, mat.indices.dtype), mat.indices)


def bcsr_concatenate(operands: Sequence[BCSR], *, dimension: int) -> BCSR:
    """``lax.concatenate`` of BCSR arrays with equal layouts, along a batch or sparse
    dimension."""
    operands = list(operands)
    if not operands:
        raise ValueError("bcsr_concatenate: operands must be a non-empty sequence.")
    for op in operands:
        if not isinstance(op, BCSR):
            raise TypeError(f"bcsr_concatenate: every operand must be a BCSR array, got "
                            f"{type(op).__name__}.")
    shapes = [op.shape for op in operands]
    if len({len(s) for s in shapes}) != 1:
        raise TypeError("Cannot concatenate arrays with different numbers of dimensions: got "
                        f"{', '.join(map(str, shapes))}.")
    ndim = len(shapes[0])
    dimension = operator.index(dimension)
    if not 0 <= dimension < ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for "
                        f"shapes {', '.join(map(str, shapes))}.")
    if any(s[:dimension] + s[dimension + 1:] != shapes[0][:dimension] + shapes[0][dimension + 1:]
           for s in shapes):
        raise TypeError("Cannot concatenate arrays with shapes that differ in dimensions other "
                        f"than the one being concatenated: concatenating along dimension "
                        f"{dimension} for shapes {', '.join(map(str, shapes))}.")
    n_batch, n_dense = operands[0].n_batch, operands[0].n_dense
    if any(op.n_batch != n_batch or op.n_dense != n_dense for op in operands):
        raise ValueError("bcsr_concatenate: operands must have the same n_batch and n_dense; "
                         f"got {', '.join(map(repr, operands))}.")
    out_shape = list(shapes[0])
    out_shape[dimension] = sum(s[dimension] for s in shapes)
    out_shape = tuple(out_shape)
    if dimension >= n_batch + 2:
        raise NotImplementedError("Concatenation along dense dimensions.")
    if dimension < n_batch:
        return _concat_batch(operands, dimension, out_shape)
    return _concat_sparse(operands, dimension, out_shape)


def _concat_batch(operands, dimension, out_shape):
    n_batch = operands[0].n_batch
    nse = max(op.nse for op in operands)
    n_cols = out_shape[n_batch + 1]
    datas, indices, indptrs = [], [], []
    for op in operands:
        full = tuple(op.shape[:n_batch])
        pad = nse - op.nse
        data = jnp.broadcast_to(op.data, full + op.data.shape[n_batch:])
        ind = jnp.broadcast_to(_padding_to_column(op, n_cols), full + (op.nse,))
        if pad:
            data = jnp.concatenate([data, jnp.zeros(full + (pad,) + data.shape[n_batch + 1:],
                                                    data.dtype)], axis=n_batch)
            ind = jnp.concatenate([ind, jnp.full(full + (pad,), n_cols, ind.dtype)],
                                  axis=n_batch)
        datas.append(data)
        indices.append(ind)
        indptrs.append(jnp.broadcast_to(op.indptr, full + op.indptr.shape[n_batch:]))
    return BCSR((jnp.concatenate(datas, axis=dimension),
                 jnp.concatenate(indices, axis=dimension),
                 jnp.concatenate(indptrs, axis=dimension)), shape=out_shape)


def _concat_sparse(operands, dimension, out_shape):
    """Concatenation along rows or columns, through the BCOO form: each operand's indices
    shifted along ``dimension``, the elements sorted by (row, column), regrouped by row
    (JAX's layout). Padding keeps pointing past the last column, so that it never becomes
    an element of the next operand."""
    n_batch = operands[0].n_batch
    batch = tuple(out_shape[:n_batch])
    n_cols = out_shape[n_batch + 1]
    axis = dimension - n_batch  # 0: rows, 1: columns
    datas, coos, offset = [], [], 0
    for op in operands:
        coo = bcsr_to_bcoo_indices(op.indices, op.indptr)
        rows, cols = coo[..., 0], coo[..., 1]
        own_rows, own_cols = op.shape[n_batch], op.shape[n_batch + 1]
        shift = jnp.asarray(offset, cols.dtype)
        if axis == 0:
            bad = (rows >= own_rows) | (cols >= own_cols)
            rows, cols = rows + shift, jnp.where(bad, jnp.asarray(n_cols, cols.dtype), cols)
        else:
            bad = (rows < own_rows) & (cols >= own_cols)
            cols = jnp.where(bad, jnp.asarray(n_cols, cols.dtype), cols + shift)
        coos.append(jnp.broadcast_to(jnp.stack([rows, cols], axis=-1),
                                     batch + coo.shape[n_batch:]))
        datas.append(jnp.broadcast_to(op.data, batch + op.data.shape[n_batch:]))
        offset += op.shape[dimension]
    arr = BCOO((jnp.concatenate(datas, axis=n_batch), jnp.concatenate(coos, axis=n_batch)),
               shape=out_shape)
    return BCSR.from_bcoo(bcoo_sort_indices(arr))


# --- sparsify rules for BCSR values ---------------------------------------------------------------
# Each rule takes the interpreter's environment and values (``transform.SparsifyEnv``,
# ``SparsifyValue``) and the equation's parameters, and returns a list of values, as the
# BCOO rules do; transform.py looks here when an operand is BCSR.
sparse_rules_bcsr: dict = {}


def _arrays(spenv, *spvalues):
    return spvalues_to_arrays(spenv, list(spvalues))


def _values(spenv, *arrays):
    return arrays_to_spvalues(spenv, list(arrays))


def _with_data(mat: BCSR, data) -> BCSR:
    return BCSR((data, mat.indices, mat.indptr), shape=mat.shape,
                indices_sorted=mat.indices_sorted, unique_indices=mat.unique_indices)


def _unique(mat: BCSR) -> BCSR:
    """``mat`` with repeated indices merged, so that an elementwise map of its data is right."""
    if mat.unique_indices:
        return mat
    out = bcsr_sum_duplicates(mat, nse=mat.nse)
    return BCSR(out._bufs, shape=out.shape, indices_sorted=True, unique_indices=True)


def _zero_preserving_unary(prim, linear: bool):
    def rule(spenv, x, **params):
        mat, = _arrays(spenv, x)
        mat = mat if linear else _unique(mat)
        return _values(spenv, _with_data(mat, prim.bind(mat.data, **params)))
    sparse_rules_bcsr[prim] = rule


for _p in LINEAR_UNARY:
    _zero_preserving_unary(_p, linear=True)
for _p in NONLINEAR_UNARY:
    _zero_preserving_unary(_p, linear=False)


def _integer_pow(spenv, x, *, y):
    check_integer_pow(y)
    mat = _unique(_arrays(spenv, x)[0])
    return _values(spenv, _with_data(mat, lax.integer_pow_p.bind(mat.data, y=y)))


def _dot_general(spenv, lhs, rhs, *, dimension_numbers, precision=None,
                 preferred_element_type=None, **params):
    lhs, rhs = _arrays(spenv, lhs, rhs)
    return _values(spenv, bcsr_dot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                                           preferred_element_type=preferred_element_type))


def _broadcast_in_dim(spenv, x, *, shape, broadcast_dimensions, **params):
    mat, = _arrays(spenv, x)
    return _values(spenv, bcsr_broadcast_in_dim(mat, shape=shape,
                                                broadcast_dimensions=broadcast_dimensions))


def _all_bcsr(spenv, spvalues, what: str):
    arrays = _arrays(spenv, *spvalues)
    if not all(isinstance(a, BCSR) for a in arrays):
        raise NotImplementedError(f"sparse rule for {what} with operands other than BCSR "
                                  "arrays (dense or BCOO) is not implemented.")
    return arrays


def _concatenate(spenv, *spvalues, dimension):
    operands = _all_bcsr(spenv, spvalues, "concatenate")
    return _values(spenv, bcsr_concatenate(operands, dimension=dimension))


def _stack(spenv, *spvalues, axis):
    expanded = []
    for mat in _all_bcsr(spenv, spvalues, "stack"):
        if axis > mat.n_batch:
            raise NotImplementedError("sparse rule for stack: BCSR arrays can only be stacked "
                                      f"along a batch dimension; got axis={axis} for {mat}.")
        shape = mat.shape[:axis] + (1,) + mat.shape[axis:]
        dims = tuple(d if d < axis else d + 1 for d in range(mat.ndim))
        expanded.append(bcsr_broadcast_in_dim(mat, shape=shape, broadcast_dimensions=dims))
    return _values(spenv, bcsr_concatenate(expanded, dimension=axis))


def _todense(spenv, *spvalues, tree):
    arr = _arrays(spenv, spvalues[0])[0]
    return _values(spenv, arr.todense() if isinstance(arr, JAXSparse) else arr)


def _inline(spenv, *spvalues, jaxpr, **params):
    """A nested jit's body evaluated in place (sparse values flow through it)."""
    return eval_sparse(jaxpr.jaxpr, jaxpr.consts, list(spvalues), spenv)


def _inline_custom_jvp(spenv, *spvalues, call_jaxpr, **params):
    """A custom_jvp function's primal body evaluated in place (its rule is not kept)."""
    return eval_sparse(call_jaxpr.jaxpr, call_jaxpr.consts, list(spvalues), spenv)


sparse_rules_bcsr.update({
    lax.integer_pow_p: _integer_pow, lax.dot_general_p: _dot_general,
    lax.broadcast_in_dim_p: _broadcast_in_dim, lax.concatenate_p: _concatenate,
    stack_p: _stack, todense_p: _todense, pjit_p: _inline,
    custom_jvp_call_p: _inline_custom_jvp,
})
