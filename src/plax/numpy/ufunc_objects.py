"""jnp.ufunc: NumPy's universal-function objects (``jnp.add.outer``, ``jnp.add.at``,
``jnp.multiply.reduce``, ...) and ``frompyfunc``, as JAX 0.10 has them.

The fourteen ufuncs JAX makes objects of wrap the plain functions of ``ufuncs.py`` (which
plax's own code keeps calling directly). Their methods use the matching reduction,
cumulative op or indexed update where one exists; any other function (``frompyfunc``)
is applied elementwise in order, with a scan, as NumPy's definition reads.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.core.trace import Tracer, get_aval
from plax.numpy import creation, reductions, shape_ops, ufuncs
from plax.numpy.util import check_arraylike
from plax.numpy.vectorize import vectorize

__all__ = ["ufunc", "frompyfunc", "add", "subtract", "multiply", "maximum", "minimum",
           "logaddexp", "logaddexp2", "logical_and", "logical_or", "logical_xor",
           "bitwise_and", "bitwise_or", "bitwise_xor", "negative"]

_AT_MESSAGE = ("Because plax arrays are immutable, jnp.ufunc.at() cannot operate inplace like "
               "np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.\n"
               ">>> arr = jnp.add.at(arr, ind, val, inplace=False)")


class ufunc:
    """A universal function: called elementwise (broadcasting), with the methods ``outer``,
    ``reduce``, ``accumulate``, ``reduceat`` and ``at``. ``call``/``reduce``/... override
    the generic (scan-based) methods with faster equivalents."""

    def __init__(self, func, /, nin: int, nout: int, *, name=None, nargs=None, identity=None,
                 call=None, reduce=None, accumulate=None, at=None, reduceat=None):
        self._func = func
        self.nin, self.nout = operator.index(nin), operator.index(nout)
        self.nargs = self.nin if nargs is None else operator.index(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self.__doc__ = getattr(func, "__doc__", None)
        self._call = call or vectorize(func)
        self._reduce, self._accumulate, self._at, self._reduceat = reduce, accumulate, at, reduceat

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __hash__(self):
        return hash((self._func, self.__name__, self.nin, self.nout))

    def __eq__(self, other):
        return isinstance(other, ufunc) and (self._func, self.__name__, self.nin, self.nout,
                                             self.identity) == (other._func, other.__name__,
                                                                other.nin, other.nout,
                                                                other.identity)

    def __call__(self, *args, out=None, where=None):
        if out is not None:
            raise NotImplementedError(f"out argument of {self}: plax arrays are immutable; "
                                      "use the returned value.")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}: compute the result and "
                                      "select with jnp.where instead.")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} positional argument(s) but "
                            f"{len(args)} were given.")
        call = self._call
        for a in args:
            if isinstance(a, Tracer):  # traced: the Python function, not the eager dispatch
                return getattr(call, "_traced_form", call)(*args)
        return call(*args)

    @property
    def _traced_form(self):
        """What a call with ``nin`` operands, some traced, comes to: for the built-in ufuncs
        the Python function behind their compiled eager form, else the ufunc itself (see
        ``plax.api.jit.eager_compiled``; the tracer's operators call it)."""
        return getattr(self._call, "_traced_form", self)

    # --- outer ---------------------------------------------------------------------------
    def outer(self, A, B, /):
        """``func(a, b)`` for every pair of elements: shape A.shape + B.shape."""
        self._check_method("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        A, B = creation.asarray(A), creation.asarray(B)
        nb = get_aval(B).ndim
        return self(lax.reshape(A, get_aval(A).shape + (1,) * nb) if nb else A, B)

    # --- reduce --------------------------------------------------------------------------
    def _check_method(self, method: str, out=None):
        """The checks every method but ``at`` makes: a binary ufunc, and no ``out=``."""
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{method} only supported for binary ufuncs with one output, got "
                             f"{self} (nin={self.nin}, nout={self.nout}).")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.{method}: plax arrays "
                                      "are immutable; use the returned value.")

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """``func`` folded over ``axis`` (an int, a tuple, or None for every axis)."""
        self._check_method("reduce", out)
        check_arraylike(f"{self.__name__}.reduce", a)
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                                where=where)
        if where is not None:
            raise NotImplementedError(f"where argument of {self.__name__}.reduce is supported "
                                      "for the built-in ufuncs only.")
        a = creation.asarray(a) if dtype is None else creation.asarray(a).astype(dtype)
        ndim = get_aval(a).ndim
        axes = tuple(range(ndim)) if axis is None else (
            (axis,) if np.ndim(axis) == 0 else tuple(axis))
        axes = sorted({operator.index(ax) % ndim for ax in axes})
        result = a
        for ax in reversed(axes):  # each axis folded in order (one axis at a time)
            result = self._fold(result, ax, initial)
            initial = None if len(axes) > 1 else initial
        if keepdims:
            result = lax.expand_dims(result, tuple(axes))
        return result

    def _fold(self, a, axis: int, initial):
        moved = shape_ops.moveaxis(a, axis, 0)
        n = get_aval(moved).shape[0]
        if initial is None:  # as JAX: the identity starts the fold, else the first element
            if self.identity is not None:
                initial = self.identity
            elif n == 0:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 "which has no identity; pass initial=.")
            else:
                start, rest = moved[0], moved[1:]
                return lax.scan(lambda c, x: (self._func(c, x), None), start, rest)[0]
        start = creation.full(get_aval(moved).shape[1:], initial, get_aval(moved).dtype)
        return lax.scan(lambda c, x: (self._func(c, x), None), start, moved)[0]

    # --- accumulate ----------------------------------------------------------------------
    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running ``func`` along ``axis`` (result[i] = func(result[i-1], a[i]))."""
        self._check_method("accumulate", out)
        check_arraylike(f"{self.__name__}.accumulate", a)
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        a = creation.asarray(a) if dtype is None else creation.asarray(a).astype(dtype)
        axis = operator.index(axis) % max(get_aval(a).ndim, 1)
        moved = shape_ops.moveaxis(a, axis, 0)
        if get_aval(moved).shape[0] == 0:
            return a

        def step(c, x):
            y = self._func(c, x)
            return y, y
        first = moved[0]
        _, rest = lax.scan(step, first, moved[1:])
        return shape_ops.moveaxis(shape_ops.concatenate([first[None], rest], 0), 0, axis)

    # --- at ------------------------------------------------------------------------------
    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """``a`` with ``func`` applied at ``indices`` (with ``b`` for binary ufuncs), each
        repeated index applied again. Needs ``inplace=False``: arrays are immutable."""
        if inplace:
            raise NotImplementedError(_AT_MESSAGE)
        if self.nout != 1:
            raise ValueError(f"at only supported for ufuncs with one output, got {self}.")
        if (b is None) != (self.nin == 1):
            raise ValueError(f"{self.__name__}.at: a binary ufunc needs b, a unary one takes "
                             "none.")
        if self._at is not None:
            return self._at(a, indices, b)
        a = creation.asarray(a)
        index_shape = get_aval(creation.asarray(a)[indices]).shape
        positions = creation.arange(int(np.prod(get_aval(a).shape)), dtype=np.int32)
        flat_index = positions.reshape(get_aval(a).shape)[indices].ravel()
        values = None if b is None else shape_ops.broadcast_to(b, index_shape).ravel()

        def step(flat, k):
            i = flat_index[k]
            new = self._func(flat[i]) if values is None else self._func(flat[i], values[k])
            return flat.at[i].set(new), None
        flat, _ = lax.scan(step, a.ravel(), creation.arange(flat_index.shape[0]))
        return flat.reshape(get_aval(a).shape)

    # --- reduceat ------------------------------------------------------------------------
    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """``func`` folded over each slice a[indices[i]:indices[i+1]] along ``axis`` (just
        a[indices[i]] where indices[i] >= indices[i+1]; the last runs to the end)."""
        self._check_method("reduceat", out)
        check_arraylike(f"{self.__name__}.reduceat", a)
        a = creation.asarray(a) if dtype is None else creation.asarray(a).astype(dtype)
        indices = creation.asarray(indices)
        if get_aval(indices).ndim != 1:
            raise ValueError(f"{self.__name__}.reduceat: indices must be one-dimensional, got "
                             f"shape {get_aval(indices).shape}.")
        axis = operator.index(axis) % get_aval(a).ndim
        moved = shape_ops.moveaxis(a, axis, 0)
        n = get_aval(moved).shape[0]
        ends = shape_ops.concatenate([indices[1:], creation.full((1,), n, get_aval(indices).dtype)])
        out = moved[indices]
        expand = (slice(None),) + (None,) * (get_aval(moved).ndim - 1)

        def step(acc, j):
            inside = ((j > indices) & (j < ends))[expand]
            return ufuncs.where(inside, self._func(acc, moved[j]), acc), None
        out, _ = lax.scan(step, out, creation.arange(n))
        return shape_ops.moveaxis(out, 0, axis)


def frompyfunc(func, /, nin: int, nout: int, *, identity=None):
    """A jnp.ufunc made from ``func``, a Python function of scalars (vectorized with vmap)."""
    return ufunc(func, nin, nout, identity=identity)


# --- the built-in ufunc objects ----------------------------------------------------------------
def _reduction(fn):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        return fn(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
    return reduce


def _no_dtype_reduction(fn):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        a = creation.asarray(a) if dtype is None else creation.asarray(a).astype(dtype)
        return fn(a, axis=axis, keepdims=keepdims, initial=initial, where=where)
    return reduce


def _cumulative(fn):
    def accumulate(a, axis=0, dtype=None):
        return fn(a, axis=axis, dtype=dtype)
    return accumulate


def _lax_cumulative(fn):
    def accumulate(a, axis=0, dtype=None):
        a = creation.asarray(a) if dtype is None else creation.asarray(a).astype(dtype)
        return fn(a, axis=operator.index(axis) % get_aval(a).ndim)
    return accumulate


def _indexed(method, transform=None):
    def at(a, indices, b):
        ref = creation.asarray(a).at[indices]
        return getattr(ref, method)(b if transform is None else transform(b))
    return at


add = ufunc(ufuncs.add, 2, 1, identity=0, reduce=_reduction(reductions.sum),
            accumulate=_cumulative(reductions.cumsum), at=_indexed("add"))
multiply = ufunc(ufuncs.multiply, 2, 1, identity=1, reduce=_reduction(reductions.prod),
                 accumulate=_cumulative(reductions.cumprod), at=_indexed("multiply"))
subtract = ufunc(ufuncs.subtract, 2, 1, at=_indexed("add", ufuncs.negative))
maximum = ufunc(ufuncs.maximum, 2, 1, reduce=_no_dtype_reduction(reductions.max),
                accumulate=_lax_cumulative(lax.cummax), at=_indexed("max"))
minimum = ufunc(ufuncs.minimum, 2, 1, reduce=_no_dtype_reduction(reductions.min),
                accumulate=_lax_cumulative(lax.cummin), at=_indexed("min"))
def _truth_reduction(fn, combine):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        out = fn(a, axis=axis, keepdims=keepdims, where=where)
        out = out if initial is None else combine(out, initial)
        return out if dtype is None else out.astype(dtype)
    return reduce


logical_and = ufunc(ufuncs.logical_and, 2, 1, identity=True,
                    reduce=_truth_reduction(reductions.all, ufuncs.logical_and))
logical_or = ufunc(ufuncs.logical_or, 2, 1, identity=False,
                   reduce=_truth_reduction(reductions.any, ufuncs.logical_or))
logical_xor = ufunc(ufuncs.logical_xor, 2, 1, identity=False)
bitwise_and = ufunc(ufuncs.bitwise_and, 2, 1, identity=-1)
bitwise_or = ufunc(ufuncs.bitwise_or, 2, 1, identity=0)
bitwise_xor = ufunc(ufuncs.bitwise_xor, 2, 1, identity=0)
logaddexp = ufunc(ufuncs.logaddexp, 2, 1, identity=-np.inf)
logaddexp2 = ufunc(ufuncs.logaddexp2, 2, 1, identity=-np.inf)
negative = ufunc(ufuncs.negative, 1, 1, at=lambda a, indices, b: creation.asarray(a).at[indices]
                 .apply(ufuncs.negative))
for _u in (add, multiply, subtract, maximum, minimum, logical_and, logical_or, logical_xor,
           bitwise_and, bitwise_or, bitwise_xor, logaddexp, logaddexp2, negative):
    _u._call = _u._func  # the plain function broadcasts already: no vectorize needed
del _u
