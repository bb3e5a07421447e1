"""COO (coordinate) sparse matrices: the ``COO`` class and the ``coo_*`` primitives.

JAX's unbatched 2-D format: ``data``, ``row`` and ``col`` each have shape ``(nse,)``;
repeated coordinates add up. ``fromdense`` pads with zeros at coordinate (0, 0). The
primitives' rules are made in ``matrix.py`` from COO's layout (each element's row and
column stored); fromdense's lowering is COO's own.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.primitive import Primitive
from plax.core.trace import get_aval
from plax.experimental.sparse._base import JAXSparse, check_sparse
from plax.experimental.sparse.matrix import (Matrix, MatrixLayout, bind_product, check_coords,
                                             fromdense_rules, product_rules, read_at,
                                             todense_rules)
from plax.experimental.sparse.util import (CuSparseEfficiencyWarning, fromdense_statics,
                                           diagonal_length)
from plax.numpy.util import promote_dtypes
from plax.runtime.array import Array
from plax.tree_util import register_pytree_node_class
from plax.typing import ArrayLike, DTypeLike

Shape = tuple[int, ...]
Dtype = Any

__all__ = ["COO", "COOInfo", "coo_todense", "coo_todense_p", "coo_fromdense", "coo_fromdense_p",
           "coo_matvec", "coo_matvec_p", "coo_matmat", "coo_matmat_p", "JAXSparse", "Array",
           "ArrayLike", "DTypeLike", "Dtype", "Shape", "CuSparseEfficiencyWarning",
           "promote_dtypes"]


class COOInfo(NamedTuple):
    """The static part of a COO matrix: its shape and whether rows/columns are sorted."""
    shape: Shape
    rows_sorted: bool = False
    cols_sorted: bool = False


def _check_bufs(name: str, data, index_bufs, shape):
    check_coords(name, data, tuple(zip(("row", "col"), index_bufs)), shape)


def _coords(row, col):
    return row, col


def _shape(params):
    return params["spinfo"].shape


_LAYOUT = MatrixLayout("COO", _check_bufs, _coords, _shape)


# --- coo_todense -----------------------------------------------------------------------------------
coo_todense_p = Primitive("coo_todense")
todense_rules(coo_todense_p, _LAYOUT)


def coo_todense(mat: COO):
    """The dense matrix ``mat`` represents (repeated coordinates add up)."""
    check_sparse(mat, COO, "coo_todense")
    return coo_todense_p.bind(*mat._bufs, **mat._params)


# --- coo_fromdense ----------------------------------------------------------------------------------
coo_fromdense_p = Primitive("coo_fromdense", multiple_results=True)


def _index_lengths(mat_shape, nse: int):
    return nse, nse  # row, col


def _padding_mask(mat, nse: int):
    """True for the stored elements of ``fromdense(mat, nse)`` that are nonzeros (the rest
    are padding, whose data stays zero: their tangent is zero)."""
    return lax.broadcasted_iota(np.int32, (nse,), 0) < jnp.sum(mat != 0, dtype=np.int32)


def _extract(x, index_bufs, mat, *, nse, **params):
    """``x`` at the coordinates ``fromdense(mat)`` stores; zero at padding (which sits at
    (0, 0), where ``mat`` may hold a nonzero)."""
    picked = read_at(x, *index_bufs)
    return jnp.where(_padding_mask(mat, nse), picked, jnp.zeros((), get_aval(picked).dtype))


def _fromdense_impl(mat, *, nse, index_dtype):
    row, col = jnp.nonzero(mat, size=nse, fill_value=0)
    return [_extract(mat, (row, col), mat, nse=nse), row.astype(index_dtype),
            col.astype(index_dtype)]


fromdense_rules(coo_fromdense_p, _fromdense_impl, _extract, _index_lengths)


def coo_fromdense(mat, *, nse=None, index_dtype=np.int32) -> COO:
    """The COO form of dense 2-D ``mat``: its nonzeros in row-major order, padded with
    zeros at (0, 0) to ``nse`` elements (which must be given under jit)."""
    mat = jnp.asarray(mat)
    nse, index_dtype = fromdense_statics(mat, nse, index_dtype, "coo_fromdense", "COO")
    data, row, col = coo_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    return COO((data, row, col), shape=get_aval(mat).shape, rows_sorted=True)


# --- coo_matvec / coo_matmat ------------------------------------------------------------------------
coo_matvec_p = Primitive("coo_matvec")
coo_matmat_p = Primitive("coo_matmat")
product_rules(coo_matvec_p, "coo_matvec", 1, _LAYOUT)
product_rules(coo_matmat_p, "coo_matmat", 2, _LAYOUT)


def coo_matvec(mat: COO, v, transpose: bool = False):
    """``mat @ v`` (``mat.T @ v`` with ``transpose``) for a 1-D ``v`` of ``mat``'s dtype."""
    check_sparse(mat, COO, "coo_matvec")
    return bind_product(coo_matvec_p, mat, v, transpose)


def coo_matmat(mat: COO, B, *, transpose: bool = False):
    """``mat @ B`` (``mat.T @ B`` with ``transpose``) for a 2-D ``B`` of ``mat``'s dtype."""
    check_sparse(mat, COO, "coo_matmat")
    return bind_product(coo_matmat_p, mat, B, transpose)


# --- the COO class -------------------------------------------------------------------------------------
@register_pytree_node_class
class COO(Matrix):
    """A 2-D sparse matrix in coordinate format: ``COO((data, row, col), shape=(m, n))``,
    each buffer of shape ``(nse,)``; repeated coordinates add up. A pytree whose leaves
    are the three buffers (differentiable with respect to ``data``)."""
    _buffer_names = ("data", "row", "col")

    def __init__(self, args, *, shape, rows_sorted: bool = False, cols_sorted: bool = False):
        self.data, self.row, self.col = map(jnp.asarray, args)
        self._rows_sorted = rows_sorted
        self._cols_sorted = cols_sorted
        super().__init__(args, shape=shape)
        _check_bufs("COO", get_aval(self.data), (get_aval(self.row), get_aval(self.col)),
                    self.shape)

    @property
    def _info(self) -> COOInfo:
        return COOInfo(self.shape, self._rows_sorted, self._cols_sorted)

    @property
    def _params(self) -> dict:
        return {"spinfo": self._info}

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32) -> COO:
        """The COO form of dense 2-D ``mat`` (see ``coo_fromdense``)."""
        return coo_fromdense(mat, nse=nse, index_dtype=index_dtype)

    def _sort_indices(self) -> COO:
        """The same matrix with elements in row-major (row, then column) order."""
        if self._rows_sorted:
            return self
        row, col, data = lax.sort((self.row, self.col, self.data), num_keys=2)
        return COO((data, row, col), shape=self.shape, rows_sorted=True)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> COO:
        """An all-zero matrix storing nothing (``sparse.empty``)."""
        shape = cls._matrix_shape(shape)
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        empty = jnp.zeros((0,), index_dtype)
        return cls((jnp.zeros((0,), dtype), empty, empty), shape=shape, rows_sorted=True,
                   cols_sorted=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> COO:
        """Ones on the ``k``-th diagonal of an N x M matrix (``sparse.eye``)."""
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        length = diagonal_length(N, M, k)
        if length <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        start = np.arange(length)
        row = jnp.asarray((start + max(-k, 0)).astype(index_dtype))
        col = jnp.asarray((start + max(k, 0)).astype(index_dtype))
        return cls((jnp.ones(length, dtype), row, col), shape=(N, M), rows_sorted=True,
                   cols_sorted=True)

    def todense(self):
        """The dense matrix."""
        return coo_todense(self)

    def _transposed(self) -> COO:
        """Row and column buffers swapped."""
        return COO((self.data, self.col, self.row), shape=self.shape[::-1],
                   rows_sorted=self._cols_sorted, cols_sorted=self._rows_sorted)

    def tree_flatten(self):
        return self._bufs, self._info

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj._set_bufs(children)
        info = COOInfo(*aux_data)
        obj.shape = tuple(info.shape)
        obj._rows_sorted, obj._cols_sorted = info.rows_sorted, info.cols_sorted
        return obj

    def _product_matrix(self, data) -> COO:
        return COO((data, self.row, self.col), **self._info._asdict())

    def __matmul__(self, other):
        mat, other = self._product_operands(other)
        return coo_matvec(mat, other) if other.ndim == 1 else coo_matmat(mat, other)


# --- JAX's private buffer-level names (its sparse tests call them) --------------------------
def _coo_fromdense(mat, *, nse, index_dtype=np.int32):
    """``(data, row, col)`` of ``coo_fromdense(mat, nse=nse)``."""
    m = coo_fromdense(mat, nse=nse, index_dtype=index_dtype)
    return m.data, m.row, m.col


def _coo_todense(data, row, col, *, spinfo: COOInfo):
    """The dense matrix of the COO buffers."""
    return coo_todense_p.bind(jnp.asarray(data), jnp.asarray(row), jnp.asarray(col),
                              spinfo=spinfo)


def _coo_matvec(data, row, col, v, *, spinfo: COOInfo, transpose: bool = False):
    """``A @ v`` (``A.T @ v``) of the COO buffers and a vector."""
    return coo_matvec_p.bind(jnp.asarray(data), jnp.asarray(row), jnp.asarray(col),
                             jnp.asarray(v), spinfo=spinfo, transpose=bool(transpose))


def _coo_matmat(data, row, col, B, *, spinfo: COOInfo, transpose: bool = False):
    """``A @ B`` (``A.T @ B``) of the COO buffers and a matrix."""
    return coo_matmat_p.bind(jnp.asarray(data), jnp.asarray(row), jnp.asarray(col),
                             jnp.asarray(B), spinfo=spinfo, transpose=bool(transpose))
