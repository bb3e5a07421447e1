"""NumPy functions made closed under batching, as ``VJPHiPrimitive``s (JAX's
``jax._src.numpy.hijax``): ``searchsorted`` with batch dimensions and a search dimension,
``nonzero`` over chosen axes. Each call binds one operation whose batching rule gives the
same operation with more batch dimensions (no loop), whose results have zero (float0)
tangents and whose inputs get zero cotangents.
"""
from __future__ import annotations

import operator

import numpy as np

from plax.api.hi_primitive import VJPHiPrimitive
from plax.api.jit import eval_shape
from plax.api.vmap import vmap
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.trace import get_aval
from plax.first_order.ad_util import zeros_like_aval
from plax.numpy import creation, shape_ops, sorting
from plax.numpy.util import as_operand, canonicalize_axis, convert

__all__ = ["searchsorted", "searchsorted_via_expand", "nonzero", "SearchSorted", "Nonzero"]


def _float0_like(outs):
    return tuple(np.zeros(get_aval(o).shape, dtypes.float0) for o in outs)


def _aval_of(struct):
    """The type of a result ``eval_shape`` described."""
    return ShapedArray(struct.shape, struct.dtype, weak_type=struct.weak_type)


def _out_dtype(dtype, what):
    dt = dtypes.canonicalize_dtype(np.dtype(dtype))
    if not dtypes.issubdtype(dt, np.integer):
        raise ValueError(f"{what} should be an integer type; got {dt}")
    return dt


class SearchSorted(VJPHiPrimitive):
    """Binary search of ``query`` in ``sorted_arr`` along ``dimension``, with ``batch_dims``
    leading dimensions shared by both."""

    valid_methods = ("compare_all", "scan", "scan_unrolled", "sort")

    def __init__(self, sorted_arr_aval, query_aval, *, side, dimension, batch_dims, method,
                 out_dtype):
        ndim = sorted_arr_aval.ndim
        batch_dims = operator.index(batch_dims)
        if not 0 <= batch_dims < ndim:
            raise ValueError(f"batch_dims={batch_dims} must be in range [0, {ndim})")
        dimension = operator.index(dimension)
        if not batch_dims <= dimension < ndim:
            raise ValueError(f"dimension={dimension} must be in range [{batch_dims}, {ndim})")
        if sorted_arr_aval.dtype != query_aval.dtype:
            raise ValueError("dtypes of sorted_arr and query must match; got "
                             f"{sorted_arr_aval.dtype} and {query_aval.dtype}")
        if side not in ("left", "right"):
            raise ValueError(f"invalid argument side={side!r}, expected 'left' or 'right'")
        if method not in self.valid_methods:
            raise ValueError(f"invalid argument method={method!r}, expected one of "
                             f"{list(self.valid_methods)}")
        if sorted_arr_aval.shape[:batch_dims] != query_aval.shape[:batch_dims]:
            raise ValueError("batch dimension sizes must match; got "
                             f"{sorted_arr_aval.shape[:batch_dims]} != "
                             f"{query_aval.shape[:batch_dims]}")
        out_dtype = _out_dtype(out_dtype, "out_dtype")
        n = sorted_arr_aval.shape[dimension]
        if n > np.iinfo(out_dtype).max:
            raise OverflowError(f"out_dtype {out_dtype} cannot hold the length {n} of "
                                "sorted_arr along dimension")
        self.in_avals = (sorted_arr_aval, query_aval)
        self.params = dict(side=side, dimension=dimension, batch_dims=batch_dims,
                           method=method, out_dtype=out_dtype)
        self.out_aval = _aval_of(eval_shape(self._search, sorted_arr_aval, query_aval))
        super().__init__()

    def _search(self, sorted_arr, query):
        def one(a, v):  # a 1-d sorted array, any query
            return convert(sorting.searchsorted(a, v, side=self.params["side"],
                                                method=self.params["method"]),
                           self.params["out_dtype"])
        a = shape_ops.moveaxis(sorted_arr, self.params["dimension"], -1)
        fun = one
        for _ in range(get_aval(a).ndim - self.params["batch_dims"] - 1):
            fun = vmap(fun, in_axes=(0, None))
        for _ in range(self.params["batch_dims"]):
            fun = vmap(fun, in_axes=0)
        return fun(a, query)

    def expand(self, sorted_arr, query):
        return self._search(sorted_arr, query)

    def batch(self, axis_data, args, dims):
        sorted_arr, query = args
        d_arr, d_query = dims
        batch_dims, dimension = self.batch_dims, self.dimension
        if d_arr is None and d_query is None:
            return self(sorted_arr, query), None
        if d_query is None:  # one more sorted array per query: a dimension after the batch
            sorted_arr = shape_ops.moveaxis(sorted_arr, d_arr, batch_dims)
            dimension += 1
            out_dim = batch_dims
        elif d_arr is None:  # more queries: a query dimension, after the array's dimensions
            query = shape_ops.moveaxis(query, d_query, batch_dims)
            out_dim = get_aval(sorted_arr).ndim - 1
        else:  # both: one more shared batch dimension
            sorted_arr = shape_ops.moveaxis(sorted_arr, d_arr, 0)
            query = shape_ops.moveaxis(query, d_query, 0)
            batch_dims += 1
            dimension += 1
            out_dim = 0
        prim = SearchSorted(get_aval(sorted_arr), get_aval(query), side=self.side,
                            dimension=dimension, batch_dims=batch_dims, method=self.method,
                            out_dtype=self.out_dtype)
        return prim(sorted_arr, query), out_dim

    def jvp(self, primals, tangents):
        out = self(*primals)
        return out, _float0_like([out])[0]

    def vjp_fwd(self, nzs_in, *args):
        return self(*args), None

    def vjp_bwd_retval(self, res, g):
        return tuple(zeros_like_aval(a) for a in self.in_avals)


class Nonzero(VJPHiPrimitive):
    """The indices of the first ``size`` nonzero entries over ``axes`` (padded with 0), for
    each index of the other axes."""

    def __init__(self, a_aval, *, size, axes, out_dtype):
        size = operator.index(size)
        if size < 0:
            raise ValueError(f"size must be a positive integer; got size={size}")
        out_dtype = _out_dtype(out_dtype, "out_dtype")
        axes = tuple(axes)
        if not all(0 <= ax < a_aval.ndim for ax in axes):
            raise ValueError(f"axes out of range for array with {a_aval.ndim} dimensions: "
                             f"axes={axes}")
        if len(axes) != len(set(axes)):
            raise ValueError(f"duplicate axes are not allowed: axes={axes}")
        self.in_avals = (a_aval,)
        self.params = dict(size=size, axes=axes, out_dtype=out_dtype)
        self.out_aval = tuple(map(_aval_of, eval_shape(self._nonzero, a_aval)))
        super().__init__()

    def _nonzero(self, a):
        size, out_dtype = self.params["size"], self.params["out_dtype"]
        axes = tuple(sorted(self.params["axes"]))
        if not axes:
            return ()
        a = as_operand(a)
        ndim = get_aval(a).ndim
        batch_axes = [ax for ax in range(ndim) if ax not in axes]
        a = shape_ops.transpose(a, (*batch_axes, *axes))
        shape = get_aval(a).shape
        if size == 0 or 0 in shape:
            return tuple(creation.zeros((*shape[:len(batch_axes)], size), out_dtype)
                         for _ in axes)

        def one(sub):
            return tuple(convert(c, out_dtype) for c in sorting.nonzero(sub, size=size))
        for _ in batch_axes:
            one = vmap(one)
        return one(a)

    def expand(self, a):
        return self._nonzero(a)

    def batch(self, axis_data, args, dims):
        (a,), (d,) = args, dims
        if d is None:
            return self(a), None
        axes = tuple(ax + 1 if ax >= d else ax for ax in self.axes)
        prim = Nonzero(get_aval(a), size=self.size, axes=axes, out_dtype=self.out_dtype)
        batch_axes = [ax for ax in range(get_aval(a).ndim) if ax not in axes]
        return prim(a), (batch_axes.index(d),) * len(axes)

    def jvp(self, primals, tangents):
        out = self(*primals)
        return out, _float0_like(out)

    def vjp_fwd(self, nzs_in, *args):
        return self(*args), None

    def vjp_bwd_retval(self, res, g):
        return (zeros_like_aval(self.in_avals[0]),)


def _searchsorted_prim(sorted_arr, query, side, dimension, batch_dims, method, dtype):
    sorted_arr, query = as_operand(sorted_arr), as_operand(query)
    return SearchSorted(get_aval(sorted_arr), get_aval(query), side=side, dimension=dimension,
                        batch_dims=batch_dims, method=method, out_dtype=dtype), sorted_arr, query


def searchsorted(sorted_arr, query, /, *, side="left", dimension=0, batch_dims=0,
                 method="scan", dtype="int32"):
    """Insertion indices of ``query`` into ``sorted_arr`` (sorted along ``dimension``); the
    first ``batch_dims`` dimensions of both are batch dimensions. ``method``: "scan"
    (binary search), "scan_unrolled", "compare_all" or "sort"."""
    prim, a, q = _searchsorted_prim(sorted_arr, query, side, dimension, batch_dims, method,
                                    dtype)
    return prim(a, q)


def searchsorted_via_expand(sorted_arr, query, /, *, side="left", dimension=0, batch_dims=0,
                            method="scan", dtype="int32"):
    """``searchsorted`` computed without binding its primitive."""
    prim, a, q = _searchsorted_prim(sorted_arr, query, side, dimension, batch_dims, method,
                                    dtype)
    return prim.expand(a, q)


def nonzero(a, /, *, size, axes=None, dtype="int32"):
    """Indices of the nonzero entries of ``a`` over ``axes`` (all by default): one array per
    axis, of shape (other axes..., size), padded with 0."""
    a = as_operand(a)
    ndim = get_aval(a).ndim
    axes = tuple(range(ndim)) if axes is None else tuple(
        canonicalize_axis(ax, ndim) for ax in ((axes,) if np.ndim(axes) == 0 else axes))
    return Nonzero(get_aval(a), size=size, axes=axes, out_dtype=dtype)(a)
