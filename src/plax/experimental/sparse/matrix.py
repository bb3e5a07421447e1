"""What the unbatched 2-D formats, COO and CSR/CSC, share: the rules of their todense,
fromdense and matvec/matmat primitives, made once from a ``MatrixLayout`` (how a format
checks its index buffers and reads each stored element's row and column off them: COO
stores both, CSR's rows come from ``indptr``), and ``Matrix``, the base of their classes.

JAX has no batching rules for these formats; plax's map the lowering over the vmapped axis.
"""
from __future__ import annotations

import abc
from typing import Callable, NamedTuple

from plax import lax
from plax import numpy as jnp
from plax.api.vmap import vmap
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined,
                             register_lowering, transpose_rules)
from plax.core.trace import get_aval
from plax.experimental.sparse._base import JAXSparse, StoredBuffers
from plax.experimental.sparse.util import (canonical_shape, check_indices_known, fromdense_jvp,
                                           linear_in)
from plax.first_order.batch_util import moveaxis
from plax.lowering.inline import lower_fun
from plax.numpy.util import promote_dtypes

__all__ = ["MatrixLayout", "Matrix", "check_coords", "read_at", "todense_rules",
           "fromdense_rules", "product_rules", "bind_product"]


class MatrixLayout(NamedTuple):
    """How a 2-D format's primitives, ``prim(data, *index_bufs, ...)``, read their buffers."""
    name: str  # the format, in messages
    check: Callable  # (name, data, index_bufs, shape): raises where the buffers do not fit
    coords: Callable  # (*index_bufs) -> (row, col) of each stored element, each (nse,)
    shape_of: Callable  # the primitive's params -> the matrix shape


def vmapped_batch_rule(prim, impl, n_out: int = 1):
    """A batching rule for ``prim`` that maps its lowering (``impl``, plain lax/jnp) over
    the vmapped axis: the batched result is computed, not re-bound as ``prim``."""
    def rule(axis, vals, dims, **params):
        vals = [x if d is None else moveaxis(x, d, 0) for x, d in zip(vals, dims)]
        in_axes = tuple(None if d is None else 0 for d in dims)
        out = vmap(lambda *a: impl(*a, **params), in_axes=in_axes)(*vals)
        return out, ([0] * n_out if prim.multiple_results else 0)
    return rule


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


def _check_operand(name: str, mat_dtype, mat_shape, v, *, transpose: bool, ndim: int):
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


def read_at(x, row, col):
    """``x[row[k], col[k]]`` for every stored element (zero where out of range)."""
    return jnp.asarray(x).at[row, col].get(mode="fill", fill_value=0)


def _spmv(data, row, col, v, out_rows: int):
    """``sum_k data[k] * v[col[k]]`` into ``out[row[k]]``; coordinates out of range add
    nothing. ``v`` may have trailing (matmat) columns."""
    vals = jnp.asarray(v).at[col].get(mode="fill", fill_value=0)
    prod = lax.expand_dims(data, tuple(range(1, vals.ndim))) * vals if vals.ndim > 1 \
        else data * vals
    out_shape = (out_rows,) + tuple(get_aval(v).shape[1:])
    return jnp.zeros(out_shape, get_aval(prod).dtype).at[row].add(prod, mode="drop")


def _sampled_product(ct, v, row, col):
    """The cotangent of the data of ``A @ v``: ``ct[row[k]] . v[col[k]]`` per element."""
    a = jnp.asarray(ct).at[row].get(mode="fill", fill_value=0)
    b = jnp.asarray(v).at[col].get(mode="fill", fill_value=0)
    return a * b if get_aval(a).ndim == 1 else jnp.sum(a * b, axis=tuple(range(1, a.ndim)))


# --- rule makers -------------------------------------------------------------------------------
def todense_rules(prim, layout: MatrixLayout):
    """The rules of ``prim(data, *index_bufs, **params)``, the dense matrix (repeated
    coordinates add up): linear in ``data``; transposed, the cotangent read at the
    coordinates."""
    def abstract(data, *index, **params):
        shape = layout.shape_of(params)
        layout.check(layout.name, data, index, shape)
        return ShapedArray(tuple(shape), data.dtype)

    def impl(data, *index, **params):
        row, col = layout.coords(*index)
        return jnp.zeros(layout.shape_of(params), get_aval(data).dtype).at[row, col].add(
            data, mode="drop")

    def transpose(ct, data, *index, **params):
        check_indices_known(*index)
        return [read_at(ct, *layout.coords(*index))] + [None] * len(index)

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(impl))
    linear_in(prim, 0)
    transpose_rules[prim] = transpose
    batch_rules[prim] = vmapped_batch_rule(prim, impl)


def fromdense_rules(prim, impl, extract, index_lengths):
    """The rules of ``prim(mat, *, nse, index_dtype) -> [data, *index_bufs]`` from its
    lowering, ``extract(x, index_bufs, mat, **params)`` (the data a matrix ``x`` gives at
    the positions ``fromdense(mat)`` stores: the data's tangent) and
    ``index_lengths(mat_shape, nse)``, the lengths of the (1-D) index buffers."""
    def abstract(mat, *, nse, index_dtype):
        if mat.ndim != 2:
            raise ValueError(f"{prim.name}: mat must be 2-dimensional, got shape "
                             f"{tuple(mat.shape)}.")
        return [ShapedArray((nse,), mat.dtype),
                *(ShapedArray((n,), index_dtype) for n in index_lengths(mat.shape, nse))]

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(impl, multiple_results=True))
    fromdense_jvp(prim, extract)
    batch_rules[prim] = vmapped_batch_rule(prim, impl, 3)


def product_rules(prim, name: str, ndim: int, layout: MatrixLayout):
    """The rules of ``prim(data, *index_bufs, v, transpose, **params)``: ``A @ v`` (``A.T
    @ v`` with ``transpose``) for an ``ndim``-D dense ``v``, bilinear in ``data`` and ``v``."""
    def abstract(data, *bufs, transpose, **params):
        *index, v = bufs
        shape = layout.shape_of(params)
        layout.check(layout.name, data, index, shape)
        _check_operand(name, data.dtype, shape, v, transpose=transpose, ndim=ndim)
        rows = shape[1] if transpose else shape[0]
        return ShapedArray((rows,) + tuple(v.shape[1:]), data.dtype)

    def impl(data, *bufs, transpose, **params):
        *index, v = bufs
        shape = layout.shape_of(params)
        row, col = layout.coords(*index)
        if transpose:
            return _spmv(data, col, row, v, shape[1])
        return _spmv(data, row, col, v, shape[0])

    def transpose_rule(ct, data, *bufs, **params):
        *index, v = bufs
        check_indices_known(*index)
        fixed = [None] * len(index)
        if type(ct) is Zero:
            return [None, *fixed, None]
        if is_undefined(v):
            flipped = dict(params, transpose=not params["transpose"])
            return [None, *fixed, prim.bind(data, *index, ct, **flipped)]
        row, col = layout.coords(*index)
        r, c = (col, row) if params["transpose"] else (row, col)
        return [_sampled_product(ct, v, r, c), *fixed, None]

    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(impl))
    linear_in(prim, 0, 3)  # data, and v after the two index buffers
    transpose_rules[prim] = transpose_rule
    batch_rules[prim] = vmapped_batch_rule(prim, impl)


def bind_product(prim, mat: Matrix, v, transpose: bool):
    """``prim`` (a matvec/matmat primitive) applied to ``mat``'s buffers and ``v``."""
    return prim.bind(*mat._bufs, jnp.asarray(v), **mat._params, transpose=bool(transpose))


# --- the classes' base -------------------------------------------------------------------------
class Matrix(StoredBuffers):
    """What the 2-D formats' classes share: buffers of ``nse`` elements (``indptr`` aside),
    the static parameters their primitives take (``_params``), a product's operands."""
    _noun = "matrix"

    @property
    def nse(self) -> int:
        return self.data.shape[0]

    @property
    @abc.abstractmethod
    def _params(self) -> dict:
        """The static parameters the format's primitives take."""

    @abc.abstractmethod
    def _product_matrix(self, data) -> Matrix:
        """The matrix the product primitives take, with ``data`` as its data."""

    @abc.abstractmethod
    def _transposed(self) -> Matrix:
        """The transposed matrix (``transpose()``)."""

    @classmethod
    def _matrix_shape(cls, shape) -> tuple:
        shape = canonical_shape(shape)
        if len(shape) != 2:
            raise ValueError(f"{cls.__name__} must have ndim=2; got shape={shape}")
        return shape

    def _product_operands(self, other):
        """``(matrix, other)`` for ``self @ other``: the dtypes promoted to one."""
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        data, other = promote_dtypes(self.data, jnp.asarray(other))
        if other.ndim not in (1, 2):
            raise NotImplementedError(f"matmul with object of shape {other.shape}")
        return self._product_matrix(data), other

    def transpose(self, axes=None):
        """The transposed matrix."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return self._transposed()
