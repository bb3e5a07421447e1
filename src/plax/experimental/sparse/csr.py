"""CSR and CSC (compressed sparse row/column) matrices and the ``csr_*`` primitives.

JAX's unbatched 2-D formats. A CSR matrix of shape ``(m, n)`` stores ``data`` and
``indices`` (columns), each ``(nse,)``, and ``indptr`` ``(m + 1,)``: row ``r`` holds the
elements ``indptr[r]`` to ``indptr[r + 1]``; elements past ``indptr[-1]`` are padding.
A CSC matrix stores the CSR buffers of its transpose, so ``CSR.T`` is a CSC matrix with
the same buffers and the other way round. The primitives' rules are made in ``matrix.py``
from CSR's layout (each element's row read off ``indptr``).
"""
from __future__ import annotations

import numpy as np

from plax import numpy as jnp
from plax.core import dtypes
from plax.core.primitive import Primitive
from plax.core.trace import get_aval
from plax.experimental.sparse._base import JAXSparse, check_sparse
from plax.experimental.sparse.bcsr_prims import csr_rows
from plax.experimental.sparse.coo import COOInfo
from plax.experimental.sparse.matrix import (Matrix, MatrixLayout, bind_product, check_coords,
                                             fromdense_rules, product_rules, read_at,
                                             todense_rules)
from plax.experimental.sparse.util import (CuSparseEfficiencyWarning, fromdense_statics,
                                           diagonal_length)
from plax.numpy.util import promote_dtypes
from plax.runtime.array import Array
from plax.tree_util import register_pytree_node_class
from plax.typing import DTypeLike

Shape = tuple[int, ...]

__all__ = ["CSR", "CSC", "csr_todense", "csr_todense_p", "csr_fromdense", "csr_fromdense_p",
           "csr_matvec", "csr_matvec_p", "csr_matmat", "csr_matmat_p", "COOInfo", "JAXSparse",
           "Array", "DTypeLike", "Shape", "CuSparseEfficiencyWarning", "promote_dtypes"]


def _check_bufs(name: str, data, index_bufs, shape):
    indices, indptr = index_bufs
    check_coords(name, data, (("indices", indices),), shape)
    if not dtypes.is_integer(indptr.dtype) or indptr.shape != (shape[0] + 1,):
        raise ValueError(f"{name}: indptr must be an integer array of shape (rows + 1,) = "
                         f"({shape[0] + 1},); got indptr.shape={tuple(indptr.shape)}, "
                         f"dtype {indptr.dtype}, for shape={tuple(shape)}.")


def _coords(indices, indptr):
    """Each stored element's row and column; padding gets row ``shape[0]``, out of range."""
    return csr_rows(indptr, get_aval(indices).shape[0]), indices


def _shape(params):
    return params["shape"]


_LAYOUT = MatrixLayout("CSR", _check_bufs, _coords, _shape)


# --- csr_todense ----------------------------------------------------------------------------------
csr_todense_p = Primitive("csr_todense")
todense_rules(csr_todense_p, _LAYOUT)


def csr_todense(mat: CSR):
    """The dense matrix ``mat`` represents."""
    check_sparse(mat, CSR, "csr_todense")
    return csr_todense_p.bind(*mat._bufs, **mat._params)


# --- csr_fromdense --------------------------------------------------------------------------------
csr_fromdense_p = Primitive("csr_fromdense", multiple_results=True)


def _index_lengths(mat_shape, nse: int):
    return nse, mat_shape[0] + 1  # indices, indptr


def _extract(x, index_bufs, mat, **params):
    """``x`` at the positions the CSR buffers store (zero at padding)."""
    return read_at(x, *_coords(*index_bufs))


def _fromdense_impl(mat, *, nse, index_dtype):
    row, col = jnp.nonzero(mat, size=nse, fill_value=0)
    counts = jnp.sum(mat != 0, axis=1, dtype=index_dtype)
    indptr = jnp.minimum(jnp.concatenate([jnp.zeros((1,), index_dtype),
                                          jnp.cumsum(counts, dtype=index_dtype)]),
                         jnp.asarray(nse, index_dtype))
    indices = col.astype(index_dtype)
    return [_extract(mat, (indices, indptr), mat), indices, indptr]


fromdense_rules(csr_fromdense_p, _fromdense_impl, _extract, _index_lengths)


def csr_fromdense(mat, *, nse=None, index_dtype=np.int32) -> CSR:
    """The CSR form of dense 2-D ``mat``: its nonzeros row by row, padded to ``nse``
    elements (which must be given under jit)."""
    mat = jnp.asarray(mat)
    nse, index_dtype = fromdense_statics(mat, nse, index_dtype, "csr_fromdense", "CSR")
    bufs = csr_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    return CSR(bufs, shape=get_aval(mat).shape)


# --- csr_matvec / csr_matmat ------------------------------------------------------------------------
csr_matvec_p = Primitive("csr_matvec")
csr_matmat_p = Primitive("csr_matmat")
product_rules(csr_matvec_p, "csr_matvec", 1, _LAYOUT)
product_rules(csr_matmat_p, "csr_matmat", 2, _LAYOUT)


def csr_matvec(mat: CSR, v, transpose: bool = False):
    """``mat @ v`` (``mat.T @ v`` with ``transpose``) for a 1-D ``v`` of ``mat``'s dtype."""
    check_sparse(mat, CSR, "csr_matvec")
    return bind_product(csr_matvec_p, mat, v, transpose)


def csr_matmat(mat: CSR, B, *, transpose: bool = False):
    """``mat @ B`` (``mat.T @ B`` with ``transpose``) for a 2-D ``B`` of ``mat``'s dtype."""
    check_sparse(mat, CSR, "csr_matmat")
    return bind_product(csr_matmat_p, mat, B, transpose)


# --- the classes -----------------------------------------------------------------------------------------
class _Compressed(Matrix):
    """What CSR and CSC share: three buffers ``(data, indices, indptr)`` and a 2-D shape."""
    _buffer_names = ("data", "indices", "indptr")

    def __init__(self, args, *, shape):
        self.data, self.indices, self.indptr = map(jnp.asarray, args)
        super().__init__(args, shape=shape)
        _check_bufs(type(self).__name__, get_aval(self.data),
                    (get_aval(self.indices), get_aval(self.indptr)), self._csr_shape)

    @property
    def _csr_shape(self) -> tuple:
        """The shape of the CSR matrix the buffers describe."""
        return tuple(self.shape)

    @property
    def _params(self) -> dict:
        return {"shape": self._csr_shape}

    def tree_flatten(self):
        return self._bufs, tuple(self.shape)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj._set_bufs(children)
        obj.shape = tuple(aux_data)
        return obj

    def _product_matrix(self, data) -> CSR:
        return CSR((data, self.indices, self.indptr), shape=self._csr_shape)


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
        shape = cls._matrix_shape(shape)
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        return cls((jnp.zeros((0,), dtype), jnp.zeros((0,), index_dtype),
                    jnp.zeros((shape[0] + 1,), index_dtype)), shape=shape)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSR:
        """Ones on the ``k``-th diagonal of an N x M matrix (``sparse.eye``)."""
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        length = diagonal_length(N, M, k)
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

    def _transposed(self) -> CSC:
        """A CSC matrix with the same buffers."""
        return CSC(self._bufs, shape=self.shape[::-1])

    def __matmul__(self, other):
        mat, other = self._product_operands(other)
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
        shape = cls._matrix_shape(shape)
        return CSR._empty(shape[::-1], dtype=dtype, index_dtype=index_dtype).T

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSC:
        """Ones on the ``k``-th diagonal of an N x M matrix (``sparse.eye``)."""
        return CSR._eye(M, N, -k, dtype=dtype, index_dtype=index_dtype).T

    def todense(self):
        """The dense matrix."""
        return csr_todense_p.bind(*self._bufs, **self._params).T

    def _transposed(self) -> CSR:
        """A CSR matrix with the same buffers."""
        return CSR(self._bufs, shape=self.shape[::-1])

    def __matmul__(self, other):
        mat, other = self._product_operands(other)
        if other.ndim == 1:
            return csr_matvec(mat, other, transpose=True)
        return csr_matmat(mat, other, transpose=True)


# --- JAX's private buffer-level names (its sparse tests call them) --------------------------
def _csr_fromdense(mat, *, nse, index_dtype=np.int32):
    """``(data, indices, indptr)`` of ``csr_fromdense(mat, nse=nse)``."""
    m = csr_fromdense(mat, nse=nse, index_dtype=index_dtype)
    return m.data, m.indices, m.indptr


def _csr_todense(data, indices, indptr, *, shape):
    """The dense matrix of the CSR buffers."""
    return csr_todense_p.bind(jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr),
                              shape=tuple(shape))


def _csr_matvec(data, indices, indptr, v, *, shape, transpose: bool = False):
    """``A @ v`` (``A.T @ v``) of the CSR buffers and a vector."""
    return csr_matvec_p.bind(jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr),
                             jnp.asarray(v), shape=tuple(shape), transpose=bool(transpose))


def _csr_matmat(data, indices, indptr, B, *, shape, transpose: bool = False):
    """``A @ B`` (``A.T @ B``) of the CSR buffers and a matrix."""
    return csr_matmat_p.bind(jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr),
                             jnp.asarray(B), shape=tuple(shape), transpose=bool(transpose))
