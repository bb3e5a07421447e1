"""Format-generic sparse functions: ``todense`` (and its primitive), ``empty``, ``eye`` (for
every format: BCOO here, the others from their modules on first use)."""
from __future__ import annotations

import operator

from plax import tree_util
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined, jvp_rules,
                             linear_primitives, register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import concrete_or_error, get_aval
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.bcoo import BCOO
from plax.experimental.sparse.bcoo_convert import (batch_to_front, extract_bufs, todense_bufs,
                                                   unbroadcast)
from plax.lowering.inline import lower_fun
from plax.runtime.array import Array  # noqa: F401 (JAX's module exposes these names)
from plax.typing import DTypeLike  # noqa: F401

__all__ = ["todense", "todense_p", "empty", "eye"]

# The formats JAX has (and plax).
_JAX_FORMATS = ("bcsr", "bcoo", "coo", "csr", "csc")

todense_p = Primitive("todense")


def todense(arr):
    """The dense form of a sparse array; a dense array passes through unchanged."""
    bufs, tree = tree_util.tree_flatten(arr)
    return todense_p.bind(*bufs, tree=tree)


def _rebuild(tree, bufs):
    arr = tree_util.tree_unflatten(tree, list(bufs))
    if not isinstance(arr, JAXSparse) and len(bufs) != 1:
        raise TypeError(f"todense: expected a sparse array or a dense array, got {type(arr)}.")
    return arr


def _abstract(*avals, tree):
    arr = _rebuild(tree, avals)
    if isinstance(arr, ShapedArray):
        return arr
    return ShapedArray(tuple(arr.shape), arr.data.dtype, arr.data.weak_type)


def _impl(*bufs, tree):
    arr = _rebuild(tree, bufs)
    return arr.todense() if isinstance(arr, JAXSparse) else arr


def _jvp(primals, tangents, *, tree):
    out = todense_p.bind(*primals, tree=tree)
    if type(tangents[0]) is Zero:
        return out, Zero(tangent_aval(get_aval(out)))
    return out, todense_p.bind(tangents[0], *primals[1:], tree=tree)


def _transpose(ct, *bufs, tree):
    if any(is_undefined(b) for b in bufs[1:]):
        raise ValueError("Cannot transpose with respect to sparse indices")
    if len(bufs) == 1:
        return [ct]
    data, *rest = bufs
    if len(rest) == 1:  # BCOO: the cotangent read at the indices
        return [unbroadcast(extract_bufs(rest[0], ct), data.aval.shape), None]
    # Other formats: the transpose of their own todense, which is linear in the data.
    from plax.api.autodiff import linear_transpose
    dense_of = linear_transpose(lambda d: _impl(d, *rest, tree=tree), data.aval)
    return [dense_of(ct)[0], *[None] * len(rest)]


def _batch(axis, vals, dims, *, tree):
    if len(vals) == 1:
        return vals[0], dims[0]
    if len(vals) != 2 or not isinstance(tree_util.tree_unflatten(tree, [object(), object()]),
                                        BCOO):  # other formats: their own operations, mapped
        from plax.api.vmap import vmap
        out = vmap(lambda *bufs: _impl(*bufs, tree=tree), in_axes=tuple(dims),
                   axis_size=axis.size)(*vals)
        return out, 0
    info = tree_util.tree_unflatten(tree, [object(), object()])._info
    bufs, info = batch_to_front(vals, dims, info, axis.size)
    return todense_bufs(*bufs, spinfo=info), 0


abstract_eval_rules[todense_p] = _abstract
register_lowering(todense_p, lower_fun(_impl))
jvp_rules[todense_p] = _jvp
linear_primitives.add(todense_p)
transpose_rules[todense_p] = _transpose
batch_rules[todense_p] = _batch


_FORMAT_CLASSES = {"bcsr": ("bcsr", "BCSR"), "coo": ("coo", "COO"), "csr": ("csr", "CSR"),
                   "csc": ("csr", "CSC")}


def __getattr__(name):
    # The other formats' classes, from their modules on first use (as JAX's module has them).
    for module, cls in _FORMAT_CLASSES.values():
        if name == cls:
            import importlib
            return getattr(importlib.import_module(f"plax.experimental.sparse.{module}"), cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _format(sparse_format: str):
    if sparse_format == "bcoo":
        return BCOO
    if sparse_format in _FORMAT_CLASSES:
        return __getattr__(_FORMAT_CLASSES[sparse_format][1])
    raise ValueError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                     f"{list(_JAX_FORMATS)}")


def empty(shape, dtype=None, index_dtype="int32", sparse_format: str = "bcoo", **kwds):
    """An all-zero sparse array of ``shape`` (keywords such as ``n_batch``, ``n_dense`` and
    ``nse`` go to the format's constructor)."""
    return _format(sparse_format)._empty(tuple(shape), dtype=dtype, index_dtype=index_dtype,
                                         **kwds)


def eye(N, M=None, k=0, dtype=None, index_dtype="int32", sparse_format: str = "bcoo", **kwds):
    """A sparse 2-D array with ones on the ``k``-th diagonal (N x M, M defaulting to N)."""
    cls = _format(sparse_format)
    M = N if M is None else M
    N, M, k = (concrete_or_error(operator.index, v, "sparse.eye") for v in (N, M, k))
    return cls._eye(N=N, M=M, k=k, dtype=dtype, index_dtype=index_dtype, **kwds)


