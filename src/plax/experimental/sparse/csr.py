"""CSR and CSC (compressed sparse row/column) matrices and the ``csr_*`` primitives.

JAX's unbatched 2-D formats. A CSR matrix of shape ``(m, n)`` stores ``data`` and
``indices`` (columns), each ``(nse,)``, and ``indptr`` ``(m + 1,)``: row ``r`` holds the
elements ``indptr[r]`` to ``indptr[r + 1]``; elements past ``indptr[-1]`` are padding.
A CSC matrix stores the CSR buffers of its transpose, so ``CSR.T`` is a CSC matrix with
the same buffers and the other way round.
"""
from __future__ import annotations

import numpy as np

from plax import numpy as jnp
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             linear_primitives, register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.bcsr_prims import csr_rows
from plax.experimental.sparse.coo import (COOInfo, check_coords, check_operand, sampled_product,
                                          spmv, static_nse, vmapped_batch_rule)
from plax.experimental.sparse.util import CuSparseEfficiencyWarning, canonical_shape
from plax.first_order.ad_util import defjvp
from plax.lowering.inline import lower_fun
from plax.numpy.util import promote_dtypes
from plax.runtime.array import Array
from plax.tree_util import register_pytree_node_class
from plax.typing import DTypeLike

Shape = tuple[int, ...]

__all__ = ["CSR", "CSC", "csr_todense", "csr_todense_p", "csr_fromdense", "csr_fromdense_p",
           "csr_matvec", "csr_matvec_p", "csr_matmat", "csr_matmat_p", "COOInfo", "JAXSparse",
           "Array", "DTypeLike", "Shape", "CuSparseEfficiencyWarning", "promote_dtypes"]


def _check_csr_bufs(name, data, indices, indptr, shape):
    check_coords(name, data, (("indices", indices),), shape)
    if not dtypes.is_integer(indptr.dtype) or indptr.shape != (shape[0] + 1,):
        raise ValueError(f"{name}: indptr must be an integer array of shape (rows + 1,) = "
                         f"({shape[0] + 1},); got indptr.shape={tuple(indptr.shape)}, "
                         f"dtype {indptr.dtype}, for shape={tuple(shape)}.")


def _rows(indices, indptr):
    return csr_rows(indptr, get_aval(indices).shape[0])


# --- csr_todense ----------------------------------------------------------------------------------
csr_todense_p = Primitive("csr_todense")


def _todense_abstract(data, indices, indptr, *, shape):
    _check_csr_bufs("CSR", data, indices, indptr, shape)
    return ShapedArray(tuple(shape), data.dtype)


def _todense_impl(data, indices, indptr, *, shape):
    rows = _rows(indices, indptr)
    return jnp.zeros(shape, get_aval(data).dtype).at[rows, indices].add(data, mode="drop")


def _picked(mat, indices, indptr):
    return jnp.asarray(mat).at[_rows(indices, indptr), indices].get(mode="fill", fill_value=0)


def _todense_transpose(ct, data, indices, indptr, *, shape):
    if is_undefined(indices) or is_undefined(indptr):
        raise ValueError("Cannot transpose with respect to sparse indices")
    return [_picked(ct, indices, indptr), None, None]


abstract_eval_rules[csr_todense_p] = _todense_abstract
register_lowering(csr_todense_p, lower_fun(_todense_impl))
defjvp(csr_todense_p, lambda t, ans, data, indices, indptr, *, shape:
       csr_todense_p.bind(t, indices, indptr, shape=shape), None, None)
linear_primitives.add(csr_todense_p)
transpose_rules[csr_todense_p] = _todense_transpose
batch_rules[csr_todense_p] = vmapped_batch_rule(csr_todense_p, _todense_impl)


def csr_todense(mat: CSR):
    """The dense matrix ``mat`` represents."""
    _check_csr(mat, "csr_todense")
    return csr_todense_p.bind(*mat._bufs, shape=mat.shape)


# --- csr_fromdense --------------------------------------------------------------------------------
csr_fromdense_p = Primitive("csr_fromdense", multiple_results=True)


def _fromdense_abstract(mat, *, nse, index_dtype):
    if mat.ndim != 2:
        raise ValueError(f"csr_fromdense: mat must be 2-dimensional, got shape "
                         f"{tuple(mat.shape)}.")
    return [ShapedArray((nse,), mat.dtype), ShapedArray((nse,), index_dtype),
            ShapedArray((mat.shape[0] + 1,), index_dtype)]


def _fromdense_impl(mat, *, nse, index_dtype):
    row, col = jnp.nonzero(mat, size=nse, fill_value=0)
    counts = jnp.sum(mat != 0, axis=1, dtype=index_dtype)
    indptr = jnp.minimum(jnp.concatenate([jnp.zeros((1,), index_dtype),
                                          jnp.cumsum(counts, dtype=index_dtype)]),
                         jnp.asarray(nse, index_dtype))
    indices = col.astype(index_dtype)
    return [_picked(mat, indices, indptr), indices, indptr]


def _fromdense_jvp(primals, tangents, *, nse, index_dtype):
    (mat,), (mat_dot,) = primals, tangents
    data, indices, indptr = csr_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    data_dot = (Zero(tangent_aval(get_aval(data))) if type(mat_dot) is Zero
                else _picked(mat_dot, indices, indptr))
    zero = Zero(tangent_aval(get_aval(indices)))
    return [data, indices, indptr], [data_dot, zero, zero]


abstract_eval_rules[csr_fromdense_p] = _fromdense_abstract
register_lowering(csr_fromdense_p, lower_fun(_fromdense_impl, multiple_results=True))
jvp_rules[csr_fromdense_p] = _fromdense_jvp
batch_rules[csr_fromdense_p] = vmapped_batch_rule(csr_fromdense_p, _fromdense_impl, 3)


def csr_fromdense(mat, *, nse=None, index_dtype=np.int32) -> CSR:
    """The CSR form of dense 2-D ``mat``: its nonzeros row by row, padded to ``nse``
    elements (which must be given under jit)."""
    mat = jnp.asarray(mat)
    nse = static_nse(mat, nse, "csr_fromdense", "CSR")
    index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
    bufs = csr_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    return CSR(bufs, shape=get_aval(mat).shape)


# --- csr_matvec / csr_matmat ------------------------------------------------------------------------
csr_matvec_p = Primitive("csr_matvec")
csr_matmat_p = Primitive("csr_matmat")


def _product_rules(prim, name: str, ndim: int):
    def abstract(data, indices, indptr, v, *, shape, transpose):
        _check_csr_bufs("CSR", data, indices, indptr, shape)
        check_operand(name, data.dtype, shape, v, transpose=transpose, ndim=ndim)
        rows = shape[1] if transpose else shape[0]
        return ShapedArray((rows,) + tuple(v.shape[1:]), data.dtype)

    def impl(data, indices, indptr, v, *, shape, transpose):
        rows = _rows(indices, indptr)  # padding: row shape[0], out of range
        if transpose:
            return spmv(data, indices, rows, v, shape[1])
        return spmv(data, rows, indices, v, shape[0])

    def transpose_rule(ct, data, indices, indptr, v, *, shape, transpose):
        if is_undefined(indices) or is_undefined(indptr):
            raise ValueError("Cannot transpose with respect to sparse indices")
        if type(ct) is Zero:
            return [None, None, None, None]
        if is_undefined(v):
            return [None, None, None, prim.bind(data, indices, indptr, ct, shape=shape,
                                                transpose=not transpose)]
        row, col = _rows(indices, indptr), indices
        r, c = (col, row) if transpose else (row, col)
        return [sampled_product(ct, v, r, c), None, None, None]

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(impl))
    defjvp(prim, lambda t, ans, data, indices, indptr, v, **params:
           prim.bind(t, indices, indptr, v, **params), None, None,
           lambda t, ans, data, indices, indptr, v, **params:
           prim.bind(data, indices, indptr, t, **params))
    linear_primitives.add(prim)
    transpose_rules[prim] = transpose_rule
    batch_rules[prim] = vmapped_batch_rule(prim, impl)


_product_rules(csr_matvec_p, "csr_matvec", 1)
_product_rules(csr_matmat_p, "csr_matmat", 2)


def csr_matvec(mat: CSR, v, transpose: bool = False):
    """``mat @ v`` (``mat.T @ v`` with ``transpose``) for a 1-D ``v`` of ``mat``'s dtype."""
    _check_csr(mat, "csr_matvec")
    return csr_matvec_p.bind(*mat._bufs, jnp.asarray(v), shape=mat.shape,
                             transpose=bool(transpose))


def csr_matmat(mat: CSR, B, *, transpose: bool = False):
    """``mat @ B`` (``mat.T @ B`` with ``transpose``) for a 2-D ``B`` of ``mat``'s dtype."""
    _check_csr(mat, "csr_matmat")
    return csr_matmat_p.bind(*mat._bufs, jnp.asarray(B), shape=mat.shape,
                             transpose=bool(transpose))


def _check_csr(x, name: str):
    if not isinstance(x, CSR):
        raise TypeError(f"{name}: mat must be a CSR matrix, got {type(x).__name__}.")


# --- the classes -----------------------------------------------------------------------------------------
class _Compressed(JAXSparse):
    """What CSR and CSC share: three buffers ``(data, indices, indptr)`` and a 2-D shape."""

    def __init__(self, args, *, shape):
        self.data, self.indices, self.indptr = map(jnp.asarray, args)
        super().__init__(args, shape=canonical_shape(shape))
        _check_csr_bufs(type(self).__name__, get_aval(self.data), get_aval(self.indices),
                        get_aval(self.indptr), self._csr_shape)

    @property
    def _csr_shape(self) -> tuple:
        """The shape of the CSR matrix the buffers describe."""
        return tuple(self.shape)

    @property
    def _bufs(self) -> tuple:
        return (self.data, self.indices, self.indptr)

    @property
    def nse(self) -> int:
        return self.data.shape[0]

    @property
    def dtype(self):
        return self.data.dtype

    def tree_flatten(self):
        return self._bufs, tuple(self.shape)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        obj.shape = tuple(aux_data)
        return obj

    def _operand(self, other):
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        data, other = promote_dtypes(self.data, jnp.asarray(other))
        if other.ndim not in (1, 2):
            raise NotImplementedError(f"matmul with object of shape {other.shape}")
        return CSR((data, self.indices, self.indptr), shape=self._csr_shape), other

    def __rmatmul__(self, other):
        raise NotImplementedError(f"{type(self)}.__rmatmul__")


@register_pytree_node_class
class CSR(_Compressed):
    """A 2-D sparse matrix in compressed sparse row format:
    ``CSR((data, indices, indptr), shape=(m, n))``. A pytree whose leaves are the three
    buffers (differentiable with respect to ``data``)."""

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32) -> CSR:
        """The CSR form of dense 2-D ``mat`` (see ``csr_fromdense``)."""
        return csr_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> CSR:
        """An all-zero matrix storing nothing (``sparse.empty``)."""
        shape = canonical_shape(shape)
        if len(shape) != 2:
            raise ValueError(f"CSR must have ndim=2; got shape={shape}")
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        return cls((jnp.zeros((0,), dtype), jnp.zeros((0,), index_dtype),
                    jnp.zeros((shape[0] + 1,), index_dtype)), shape=shape)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSR:
        """Ones on the ``k``-th diagonal of an N x M matrix (``sparse.eye``)."""
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        length = min(N, M - k) if k > 0 else min(N + k, M)
        if length <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        first = max(-k, 0)  # the first row holding a diagonal element
        indices = np.arange(length) + max(k, 0)
        indptr = np.clip(np.arange(N + 1) - first, 0, length)
        return cls((jnp.ones(length, dtype), jnp.asarray(indices.astype(index_dtype)),
                    jnp.asarray(indptr.astype(index_dtype))), shape=(N, M))

    def todense(self):
        """The dense matrix."""
        return csr_todense(self)

    def transpose(self, axes=None) -> CSC:
        """The transposed matrix: a CSC matrix with the same buffers."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSC(self._bufs, shape=self.shape[::-1])

    def __matmul__(self, other):
        mat, other = self._operand(other)
        return csr_matvec(mat, other) if other.ndim == 1 else csr_matmat(mat, other)


@register_pytree_node_class
class CSC(_Compressed):
    """A 2-D sparse matrix in compressed sparse column format:
    ``CSC((data, indices, indptr), shape=(m, n))`` with ``indices`` the rows and ``indptr``
    (``(n + 1,)``) where each column's elements start."""

    @property
    def _csr_shape(self) -> tuple:
        return tuple(self.shape[::-1])

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32) -> CSC:
        """The CSC form of dense 2-D ``mat``: its nonzeros column by column."""
        mat = jnp.asarray(mat)
        if mat.ndim != 2:
            raise ValueError(f"CSC.fromdense: mat must be 2-dimensional, got shape "
                             f"{mat.shape}.")
        return csr_fromdense(mat.T, nse=nse, index_dtype=index_dtype).T

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> CSC:
        """An all-zero matrix storing nothing (``sparse.empty``)."""
        shape = canonical_shape(shape)
        if len(shape) != 2:
            raise ValueError(f"CSC must have ndim=2; got shape={shape}")
        return CSR._empty(shape[::-1], dtype=dtype, index_dtype=index_dtype).T

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSC:
        """Ones on the ``k``-th diagonal of an N x M matrix (``sparse.eye``)."""
        return CSR._eye(M, N, -k, dtype=dtype, index_dtype=index_dtype).T

    def todense(self):
        """The dense matrix."""
        return csr_todense_p.bind(*self._bufs, shape=self._csr_shape).T

    def transpose(self, axes=None) -> CSR:
        """The transposed matrix: a CSR matrix with the same buffers."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSR(self._bufs, shape=self.shape[::-1])

    def __matmul__(self, other):
        mat, other = self._operand(other)
        if other.ndim == 1:
            return csr_matvec(mat, other, transpose=True)
        return csr_matmat(mat, other, transpose=True)
