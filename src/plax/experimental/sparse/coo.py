"""COO (coordinate) sparse matrices: the ``COO`` class and the ``coo_*`` primitives.

JAX's unbatched 2-D format: ``data``, ``row`` and ``col`` each have shape ``(nse,)``;
repeated coordinates add up. ``fromdense`` pads with zeros at coordinate (0, 0). Each
primitive has its abstract evaluation, a lowering written in plax's own lax/jnp
operations, jvp and transpose rules for the linear ones, and a batching rule (JAX has
none for these formats; plax maps the lowering).
"""
from __future__ import annotations

import operator
from typing import Any, NamedTuple

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.vmap import vmap
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             linear_primitives, register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import concrete_or_error, get_aval
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.util import CuSparseEfficiencyWarning, canonical_shape
from plax.first_order.ad_util import defjvp
from plax.first_order.batch_util import moveaxis
from plax.lowering.inline import lower_fun
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


# --- shared rule pieces ---------------------------------------------------------------------------
def vmapped_batch_rule(prim, impl, n_out: int = 1):
    """A batching rule for ``prim`` that maps its lowering (``impl``, plain lax/jnp) over
    the vmapped axis: the batched result is computed, not re-bound as ``prim``."""
    def rule(axis, vals, dims, **params):
        vals = [x if d is None else moveaxis(x, d, 0) for x, d in zip(vals, dims)]
        in_axes = tuple(None if d is None else 0 for d in dims)
        out = vmap(lambda *a: impl(*a, **params), in_axes=in_axes)(*vals)
        return out, ([0] * n_out if prim.multiple_results else 0)
    return rule


def check_operand(name: str, mat_dtype, mat_shape, v, *, transpose: bool, ndim: int):
    """JAX's contract for a matvec/matmat operand: same dtype as the matrix, ``ndim``
    dimensions, and a leading size matching the matrix's columns (rows if transposed)."""
    if v.dtype != mat_dtype:
        raise TypeError(f"{name}: the dense operand must have the matrix's dtype; got "
                        f"{v.dtype} for a {mat_dtype} matrix (cast it with .astype).")
    if v.ndim != ndim:
        raise TypeError(f"{name}: the dense operand must be {ndim}-dimensional, got shape "
                        f"{tuple(v.shape)}.")
    need = mat_shape[0] if transpose else mat_shape[1]
    if v.shape[0] != need:
        raise TypeError(f"{name}: the dense operand's first dimension must be {need} for a "
                        f"matrix of shape {tuple(mat_shape)} (transpose={transpose}); got "
                        f"shape {tuple(v.shape)}.")


def check_coords(name: str, data, coords, shape):
    """Checks that each buffer is 1-D of one length, coordinates integer, shape 2-D."""
    if len(shape) != 2:
        raise ValueError(f"{name} matrices must be 2-dimensional, got shape={tuple(shape)}.")
    nse = data.shape[0] if data.ndim == 1 else None
    for label, buf in coords:
        if not dtypes.is_integer(buf.dtype):
            raise TypeError(f"{name}: {label} must have an integer dtype, got {buf.dtype}.")
        if buf.ndim != 1 or (nse is not None and buf.shape[0] != nse):
            raise ValueError(f"{name}: {label} must have shape (nse,) = ({nse},) like data; "
                             f"got {label}.shape={tuple(buf.shape)}, "
                             f"data.shape={tuple(data.shape)}.")
    if data.ndim != 1:
        raise ValueError(f"{name}: data must have shape (nse,), got {tuple(data.shape)}.")


def spmv(data, row, col, v, out_rows: int):
    """``sum_k data[k] * v[col[k]]`` into ``out[row[k]]``; coordinates out of range add
    nothing. ``v`` may have trailing (matmat) columns."""
    vals = jnp.asarray(v).at[col].get(mode="fill", fill_value=0)
    prod = lax.expand_dims(data, tuple(range(1, vals.ndim))) * vals if vals.ndim > 1 \
        else data * vals
    out_shape = (out_rows,) + tuple(get_aval(v).shape[1:])
    return jnp.zeros(out_shape, get_aval(prod).dtype).at[row].add(prod, mode="drop")


def sampled_product(ct, v, row, col):
    """The cotangent of the data of ``A @ v``: ``ct[row[k]] . v[col[k]]`` per element."""
    a = jnp.asarray(ct).at[row].get(mode="fill", fill_value=0)
    b = jnp.asarray(v).at[col].get(mode="fill", fill_value=0)
    return a * b if get_aval(a).ndim == 1 else jnp.sum(a * b, axis=tuple(range(1, a.ndim)))


# --- coo_todense -----------------------------------------------------------------------------------
coo_todense_p = Primitive("coo_todense")


def _todense_abstract(data, row, col, *, spinfo):
    check_coords("COO", data, (("row", row), ("col", col)), spinfo.shape)
    return ShapedArray(tuple(spinfo.shape), data.dtype)


def _todense_impl(data, row, col, *, spinfo):
    return jnp.zeros(spinfo.shape, get_aval(data).dtype).at[row, col].add(data, mode="drop")


def _todense_transpose(ct, data, row, col, *, spinfo):
    if is_undefined(row) or is_undefined(col):
        raise ValueError("Cannot transpose with respect to sparse indices")
    return [jnp.asarray(ct).at[row, col].get(mode="fill", fill_value=0), None, None]


abstract_eval_rules[coo_todense_p] = _todense_abstract
register_lowering(coo_todense_p, lower_fun(_todense_impl))
defjvp(coo_todense_p, lambda t, ans, data, row, col, *, spinfo:
       coo_todense_p.bind(t, row, col, spinfo=spinfo), None, None)
linear_primitives.add(coo_todense_p)
transpose_rules[coo_todense_p] = _todense_transpose
batch_rules[coo_todense_p] = vmapped_batch_rule(coo_todense_p, _todense_impl)


def coo_todense(mat: COO):
    """The dense matrix ``mat`` represents (repeated coordinates add up)."""
    _check_coo(mat, "coo_todense")
    return coo_todense_p.bind(*mat._bufs, spinfo=mat._info)


# --- coo_fromdense ----------------------------------------------------------------------------------
coo_fromdense_p = Primitive("coo_fromdense", multiple_results=True)


def _fromdense_abstract(mat, *, nse, index_dtype):
    if mat.ndim != 2:
        raise ValueError(f"coo_fromdense: mat must be 2-dimensional, got shape "
                         f"{tuple(mat.shape)}.")
    return [ShapedArray((nse,), mat.dtype), ShapedArray((nse,), index_dtype),
            ShapedArray((nse,), index_dtype)]


def _fromdense_impl(mat, *, nse, index_dtype):
    row, col = jnp.nonzero(mat, size=nse, fill_value=0)
    data = jnp.where(padding_mask_dense(mat, nse), mat[row, col],
                     jnp.zeros((), get_aval(mat).dtype))
    return [data, row.astype(index_dtype), col.astype(index_dtype)]


def padding_mask_dense(mat, nse: int):
    """True for the stored elements of ``fromdense(mat, nse)`` that are nonzeros (the rest
    are padding, whose data stays zero: their tangent is zero)."""
    return lax.broadcasted_iota(np.int32, (nse,), 0) < jnp.sum(mat != 0, dtype=np.int32)


def _fromdense_jvp(primals, tangents, *, nse, index_dtype):
    (mat,), (mat_dot,) = primals, tangents
    data, row, col = coo_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    if type(mat_dot) is Zero:
        data_dot = Zero(tangent_aval(get_aval(data)))
    else:
        picked = jnp.asarray(mat_dot).at[row, col].get(mode="fill", fill_value=0)
        data_dot = jnp.where(padding_mask_dense(mat, nse), picked,
                             jnp.zeros((), get_aval(picked).dtype))
    zero = Zero(tangent_aval(get_aval(row)))
    return [data, row, col], [data_dot, zero, zero]


abstract_eval_rules[coo_fromdense_p] = _fromdense_abstract
register_lowering(coo_fromdense_p, lower_fun(_fromdense_impl, multiple_results=True))
jvp_rules[coo_fromdense_p] = _fromdense_jvp
batch_rules[coo_fromdense_p] = vmapped_batch_rule(coo_fromdense_p, _fromdense_impl, 3)

TRACED_NSE_ERROR = ("The error arose for the nse argument of {name}. In order for {cls}."
                    "fromdense() to be used in traced/compiled code, you must pass a concrete "
                    "value to the nse (number of stored elements) argument.")


def static_nse(mat, nse, name: str, cls: str) -> int:
    """``nse`` as a Python int (by default the count of nonzeros, which must be concrete)."""
    if nse is None:
        nse = jnp.sum(jnp.asarray(mat) != 0)
    return concrete_or_error(operator.index, nse, TRACED_NSE_ERROR.format(name=name, cls=cls))


def coo_fromdense(mat, *, nse=None, index_dtype=np.int32) -> COO:
    """The COO form of dense 2-D ``mat``: its nonzeros in row-major order, padded with
    zeros at (0, 0) to ``nse`` elements (which must be given under jit)."""
    mat = jnp.asarray(mat)
    nse = static_nse(mat, nse, "coo_fromdense", "COO")
    index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
    data, row, col = coo_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    return COO((data, row, col), shape=get_aval(mat).shape, rows_sorted=True)


# --- coo_matvec / coo_matmat ------------------------------------------------------------------------
coo_matvec_p = Primitive("coo_matvec")
coo_matmat_p = Primitive("coo_matmat")


def _product_rules(prim, name: str, ndim: int):
    def abstract(data, row, col, v, *, spinfo, transpose):
        check_coords("COO", data, (("row", row), ("col", col)), spinfo.shape)
        check_operand(name, data.dtype, spinfo.shape, v, transpose=transpose, ndim=ndim)
        rows = spinfo.shape[1] if transpose else spinfo.shape[0]
        return ShapedArray((rows,) + tuple(v.shape[1:]), data.dtype)

    def impl(data, row, col, v, *, spinfo, transpose):
        rows = spinfo.shape[1] if transpose else spinfo.shape[0]
        row, col = (col, row) if transpose else (row, col)
        return spmv(data, row, col, v, rows)

    def transpose_rule(ct, data, row, col, v, *, spinfo, transpose):
        if is_undefined(row) or is_undefined(col):
            raise ValueError("Cannot transpose with respect to sparse indices")
        if type(ct) is Zero:
            return [None, None, None, None]
        if is_undefined(v):
            return [None, None, None, prim.bind(data, row, col, ct, spinfo=spinfo,
                                                transpose=not transpose)]
        r, c = (col, row) if transpose else (row, col)
        return [sampled_product(ct, v, r, c), None, None, None]

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(impl))
    defjvp(prim, lambda t, ans, data, row, col, v, **params: prim.bind(t, row, col, v, **params),
           None, None,
           lambda t, ans, data, row, col, v, **params: prim.bind(data, row, col, t, **params))
    linear_primitives.add(prim)
    transpose_rules[prim] = transpose_rule
    batch_rules[prim] = vmapped_batch_rule(prim, impl)


_product_rules(coo_matvec_p, "coo_matvec", 1)
_product_rules(coo_matmat_p, "coo_matmat", 2)


def coo_matvec(mat: COO, v, transpose: bool = False):
    """``mat @ v`` (``mat.T @ v`` with ``transpose``) for a 1-D ``v`` of ``mat``'s dtype."""
    _check_coo(mat, "coo_matvec")
    return coo_matvec_p.bind(*mat._bufs, jnp.asarray(v), spinfo=mat._info,
                             transpose=bool(transpose))


def coo_matmat(mat: COO, B, *, transpose: bool = False):
    """``mat @ B`` (``mat.T @ B`` with ``transpose``) for a 2-D ``B`` of ``mat``'s dtype."""
    _check_coo(mat, "coo_matmat")
    return coo_matmat_p.bind(*mat._bufs, jnp.asarray(B), spinfo=mat._info,
                             transpose=bool(transpose))


def _check_coo(x, name: str):
    if not isinstance(x, COO):
        raise TypeError(f"{name}: mat must be a COO matrix, got {type(x).__name__}.")


# --- the COO class -------------------------------------------------------------------------------------
@register_pytree_node_class
class COO(JAXSparse):
    """A 2-D sparse matrix in coordinate format: ``COO((data, row, col), shape=(m, n))``,
    each buffer of shape ``(nse,)``; repeated coordinates add up. A pytree whose leaves
    are the three buffers (differentiable with respect to ``data``)."""

    def __init__(self, args, *, shape, rows_sorted: bool = False, cols_sorted: bool = False):
        self.data, self.row, self.col = map(jnp.asarray, args)
        self._rows_sorted = rows_sorted
        self._cols_sorted = cols_sorted
        super().__init__(args, shape=canonical_shape(shape))
        check_coords("COO", get_aval(self.data), (("row", get_aval(self.row)),
                                                  ("col", get_aval(self.col))), self.shape)

    @property
    def _info(self) -> COOInfo:
        return COOInfo(self.shape, self._rows_sorted, self._cols_sorted)

    @property
    def _bufs(self) -> tuple:
        return (self.data, self.row, self.col)

    @property
    def nse(self) -> int:
        return self.data.shape[0]

    @property
    def dtype(self):
        return self.data.dtype

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
        shape = canonical_shape(shape)
        if len(shape) != 2:
            raise ValueError(f"COO must have ndim=2; got shape={shape}")
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        empty = jnp.zeros((0,), index_dtype)
        return cls((jnp.zeros((0,), dtype), empty, empty), shape=shape, rows_sorted=True,
                   cols_sorted=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> COO:
        """Ones on the ``k``-th diagonal of an N x M matrix (``sparse.eye``)."""
        index_dtype = dtypes.canonicalize_user_dtype(index_dtype, "index_dtype")
        length = min(N, M - k) if k > 0 else min(N + k, M)
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

    def transpose(self, axes=None) -> COO:
        """The transposed matrix (row and column buffers swapped)."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return COO((self.data, self.col, self.row), shape=self.shape[::-1],
                   rows_sorted=self._cols_sorted, cols_sorted=self._rows_sorted)

    def tree_flatten(self):
        return self._bufs, self._info

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.row, obj.col = children
        info = COOInfo(*aux_data)
        obj.shape = tuple(info.shape)
        obj._rows_sorted, obj._cols_sorted = info.rows_sorted, info.cols_sorted
        return obj

    def __matmul__(self, other):
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        other = jnp.asarray(other)
        data, other = promote_dtypes(self.data, other)
        mat = COO((data, self.row, self.col), **self._info._asdict())
        if other.ndim == 1:
            return coo_matvec(mat, other)
        if other.ndim == 2:
            return coo_matmat(mat, other)
        raise NotImplementedError(f"matmul with object of shape {other.shape}")

    def __rmatmul__(self, other):
        raise NotImplementedError(f"{type(self)}.__rmatmul__")
