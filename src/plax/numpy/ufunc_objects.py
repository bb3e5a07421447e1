"""jnp.ufunc: NumPy's universal-function objects (``jnp.add.outer``, ``jnp.add.at``,
``jnp.multiply.reduce``, ...) and ``frompyfunc``, as JAX 0.10 has them.

The fourteen ufuncs JAX makes objects of wrap the plain functions of ``ufuncs.py`` (which
plax's own code keeps calling directly). Their methods use the matching reduction,
cumulative op or indexed update where one exists; any other function (``frompyfunc``)
is applied elementwise in order, with a loop, as NumPy's definition reads.

Every method runs compiled, with the ufunc itself a static argument (as JAX jits them):
an eager call compiles once per signature, and the ufunc's properties are read-only so that
it stays a valid static argument.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.api.jit import eager_compiled, eval_shape
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.core.trace import Tracer, get_aval
from plax.numpy import creation, reductions, shape_ops, ufuncs
from plax.numpy.util import canonicalize_axes, canonicalize_axis, check_arraylike
from plax.numpy.vectorize import vectorize

__all__ = ["ufunc", "frompyfunc", "add", "subtract", "multiply", "maximum", "minimum",
           "logaddexp", "logaddexp2", "logical_and", "logical_or", "logical_xor",
           "bitwise_and", "bitwise_or", "bitwise_xor", "negative"]

_AT_MESSAGE = ("Because plax arrays are immutable, jnp.ufunc.at() cannot operate inplace like "
               "np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.\n"
               ">>> arr = jnp.add.at(arr, ind, val, inplace=False)")


def _static_axis(axis):
    """``axis`` as a hashable static argument (a list becomes a tuple)."""
    return tuple(axis) if isinstance(axis, list) else axis


class ufunc:
    """A universal function: called elementwise (broadcasting), with the methods ``outer``,
    ``reduce``, ``accumulate``, ``reduceat`` and ``at``. ``call``/``reduce``/... override
    the generic (loop-based) methods with faster equivalents."""

    def __init__(self, func, /, nin: int, nout: int, *, name=None, nargs=None, identity=None,
                 call=None, reduce=None, accumulate=None, at=None, reduceat=None):
        nin = operator.index(nin)
        self.__props = {"func": func, "nin": nin, "nout": operator.index(nout),
                        "nargs": nin if nargs is None else operator.index(nargs),
                        "identity": identity, "call": call or vectorize(func),
                        "reduce": reduce, "accumulate": accumulate, "at": at,
                        "reduceat": reduceat}
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self.__doc__ = getattr(func, "__doc__", None)

    # Read-only: a ufunc is a static argument of its compiled methods.
    _func = property(lambda self: self.__props["func"])
    nin = property(lambda self: self.__props["nin"])
    nout = property(lambda self: self.__props["nout"])
    nargs = property(lambda self: self.__props["nargs"])
    identity = property(lambda self: self.__props["identity"])

    def _override(self, method: str):
        return self.__props[method]

    def _key(self):
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, ufunc) and self._key() == other._key()

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
        call = self.__props["call"]
        for a in args:
            if isinstance(a, Tracer):  # traced: the Python function, not the eager dispatch
                return getattr(call, "_traced_form", call)(*args)
        return call(*args)

    @property
    def _traced_form(self):
        """What a call with ``nin`` operands, some traced, comes to: for the built-in ufuncs
        the Python function behind their compiled eager form, else the ufunc itself (see
        ``plax.api.jit.eager_compiled``; the tracer's operators call it)."""
        return getattr(self.__props["call"], "_traced_form", self)

    def _check_method(self, method: str, out=None):
        """The checks every method but ``at`` makes: a binary ufunc, and no ``out=``."""
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{method} only supported for binary ufuncs with one output, got "
                             f"{self} (nin={self.nin}, nout={self.nout}).")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.{method}: plax arrays "
                                      "are immutable; use the returned value.")

    def _result_dtype(self, *operands):
        """The dtype ``func`` returns for scalars of the operands' dtypes."""
        scalars = [ShapeDtypeStruct((), get_aval(creation.asarray(x)).dtype) for x in operands]
        return eval_shape(self._func, *scalars).dtype

    def outer(self, A, B, /):
        """``func(a, b)`` for every pair of elements: shape A.shape + B.shape."""
        self._check_method("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        return _outer(A, B, ufunc=self)

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """``func`` folded over ``axis`` (an int, a tuple, or None for every axis); ``where``
        picks the elements folded in (then the fold needs an identity or ``initial``)."""
        self._check_method("reduce", out)
        check_arraylike(f"{self.__name__}.reduce", a)
        if initial is not None:
            check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            check_arraylike(f"{self.__name__}.reduce", where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 "identity, so to use a where mask one has to specify "
                                 "'initial'.")
            if get_aval(creation.asarray(where)).dtype != np.bool_:
                raise ValueError("where argument must have dtype=bool; got dtype="
                                 f"{get_aval(creation.asarray(where)).dtype}")
        return _reduce(a, initial, where, ufunc=self, axis=_static_axis(axis), dtype=dtype,
                       keepdims=bool(keepdims))

    def _reduce_via_loop(self, a, axis=0, dtype=None, keepdims=False, initial=None,
                         where=None):
        a = creation.asarray(a)
        shape = get_aval(a).shape
        if initial is None:
            initial = self.identity
        if dtype is None:
            dtype = self._result_dtype(a, a)
        axes = canonicalize_axes(axis, len(shape))
        rest = tuple(d for i, d in enumerate(shape) if i not in axes)
        final_shape = (tuple(1 if i in axes else d for i, d in enumerate(shape)) if keepdims
                       else rest)
        n = int(np.prod([shape[i] for i in axes], dtype=int))

        def folded(x):  # the reduced axes first, as one axis
            return shape_ops.moveaxis(x, axes, tuple(range(len(axes)))).reshape((n, *rest))
        arr = folded(a)
        if where is not None:
            where = folded(shape_ops.broadcast_to(where, shape))
        if n == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 "which has no identity")
            return creation.full(final_shape, initial, dtype)

        def body(i, val):
            new = self(val, arr[i].astype(dtype))
            return new if where is None else ufuncs.where(where[i], new, val)
        if initial is None:
            start, value = 1, arr[0]
        else:
            start, value = 0, initial
        value = shape_ops.broadcast_to(creation.asarray(value).astype(dtype), rest)
        return lax.fori_loop(start, n, body, value).reshape(final_shape)

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running ``func`` along ``axis`` (result[i] = func(result[i-1], a[i]))."""
        self._check_method("accumulate", out)
        check_arraylike(f"{self.__name__}.accumulate", a)
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("accumulate does not allow multiple axes")
        return _accumulate(a, ufunc=self, axis=operator.index(axis), dtype=dtype)

    def _accumulate_via_loop(self, a, axis=0, dtype=None):
        a = creation.asarray(a)
        if dtype is None:
            dtype = self._result_dtype(a, a)
        aval = get_aval(a)
        axis = canonicalize_axis(axis, max(aval.ndim, 1))
        if aval.size == 0:
            return creation.full(aval.shape, 0, dtype)
        moved = shape_ops.moveaxis(a, axis, 0).astype(dtype)

        def step(c, x):
            y = self(c, x)
            return y, y
        first = moved[0]
        _, rest = lax.scan(step, first, moved[1:])
        return shape_ops.moveaxis(shape_ops.concatenate([first[None], rest], 0), 0, axis)

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
        check_arraylike(f"{self.__name__}.at", a, *([] if b is None else [b]))
        return _at(a, indices, b, ufunc=self)

    def _at_via_loop(self, a, indices, b=None):
        dtype = self._result_dtype(a, *([] if b is None else [b]))
        a = creation.asarray(a).astype(dtype)
        shape = get_aval(a).shape
        index_shape = get_aval(a[indices]).shape
        positions = creation.arange(int(np.prod(shape, dtype=int)), dtype=np.int32)
        flat_index = positions.reshape(shape)[indices].ravel()
        values = (None if b is None else
                  shape_ops.broadcast_to(creation.asarray(b).astype(dtype), index_shape).ravel())

        def step(flat, k):
            i = flat_index[k]
            new = self(flat[i]) if values is None else self(flat[i], values[k])
            return flat.at[i].set(new), None
        flat, _ = lax.scan(step, a.ravel(), creation.arange(get_aval(flat_index).shape[0]))
        return flat.reshape(shape)

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """``func`` folded over each slice a[indices[i]:indices[i+1]] along ``axis`` (just
        a[indices[i]] where indices[i] >= indices[i+1]; the last runs to the end)."""
        self._check_method("reduceat", out)
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        return _reduceat(a, indices, ufunc=self, axis=operator.index(axis), dtype=dtype)

    def _reduceat_via_loop(self, a, indices, axis=0, dtype=None):
        a = creation.asarray(a) if dtype is None else creation.asarray(a).astype(dtype)
        indices = creation.asarray(indices)
        if get_aval(a).ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got shape "
                             f"{get_aval(a).shape}")
        if get_aval(indices).ndim != 1:
            raise ValueError(f"{self.__name__}.reduceat: indices must be one-dimensional, got "
                             f"shape {get_aval(indices).shape}.")
        axis = canonicalize_axis(axis, get_aval(a).ndim)
        moved = shape_ops.moveaxis(a, axis, 0)
        n = get_aval(moved).shape[0]
        ends = shape_ops.concatenate([indices[1:], creation.full((1,), n, get_aval(indices).dtype)])
        out = moved[indices]
        expand = (slice(None),) + (None,) * (get_aval(moved).ndim - 1)

        def body(j, acc):
            inside = ((j > indices) & (j < ends))[expand]
            return ufuncs.where(inside, self(acc, lax.expand_dims(moved[j], (0,))), acc)
        return shape_ops.moveaxis(lax.fori_loop(0, n, body, out), 0, axis)


def frompyfunc(func, /, nin: int, nout: int, *, identity=None):
    """A jnp.ufunc made from ``func``, a Python function of scalars (vectorized with vmap)."""
    return ufunc(func, nin, nout, identity=identity)


# --- the compiled methods (the ufunc a static argument) ----------------------------------------
@eager_compiled(static_argnames=("ufunc",))
def _outer(A, B, *, ufunc):
    A, B = creation.asarray(A), creation.asarray(B)
    sa, sb = get_aval(A).shape, get_aval(B).shape
    return ufunc(A.reshape(sa + (1,) * len(sb)), B.reshape((1,) * len(sa) + sb))


@eager_compiled(static_argnames=("ufunc", "axis", "dtype", "keepdims"))
def _reduce(a, initial, where, *, ufunc, axis, dtype, keepdims):
    reduce = ufunc._override("reduce") or ufunc._reduce_via_loop
    return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


@eager_compiled(static_argnames=("ufunc", "axis", "dtype"))
def _accumulate(a, *, ufunc, axis, dtype):
    accumulate = ufunc._override("accumulate") or ufunc._accumulate_via_loop
    return accumulate(a, axis=axis, dtype=dtype)


@eager_compiled(static_argnames=("ufunc",))
def _at(a, indices, b, *, ufunc):
    at = ufunc._override("at")
    return at(a, indices, b) if at is not None else ufunc._at_via_loop(a, indices, b)


@eager_compiled(static_argnames=("ufunc", "axis", "dtype"))
def _reduceat(a, indices, *, ufunc, axis, dtype):
    reduceat = ufunc._override("reduceat") or ufunc._reduceat_via_loop
    return reduceat(a, indices, axis=axis, dtype=dtype)


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


def _truth_reduction(fn, combine):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        out = fn(a, axis=axis, keepdims=keepdims, where=where)
        out = out if initial is None else combine(out, initial)
        return out if dtype is None else out.astype(dtype)
    return reduce


def _builtin(fn, nin: int, **methods):
    """The ufunc object of one of plax's ufuncs: ``fn`` broadcasts already (no vectorize)."""
    return ufunc(fn, nin, 1, call=fn, **methods)


add = _builtin(ufuncs.add, 2, identity=0, reduce=_reduction(reductions.sum),
               accumulate=_cumulative(reductions.cumsum), at=_indexed("add"))
multiply = _builtin(ufuncs.multiply, 2, identity=1, reduce=_reduction(reductions.prod),
                    accumulate=_cumulative(reductions.cumprod), at=_indexed("multiply"))
subtract = _builtin(ufuncs.subtract, 2, at=_indexed("add", ufuncs.negative))
maximum = _builtin(ufuncs.maximum, 2, reduce=_no_dtype_reduction(reductions.max),
                   accumulate=_lax_cumulative(lax.cummax), at=_indexed("max"))
minimum = _builtin(ufuncs.minimum, 2, reduce=_no_dtype_reduction(reductions.min),
                   accumulate=_lax_cumulative(lax.cummin), at=_indexed("min"))
logical_and = _builtin(ufuncs.logical_and, 2, identity=True,
                       reduce=_truth_reduction(reductions.all, ufuncs.logical_and))
logical_or = _builtin(ufuncs.logical_or, 2, identity=False,
                      reduce=_truth_reduction(reductions.any, ufuncs.logical_or))
logical_xor = _builtin(ufuncs.logical_xor, 2, identity=False)
bitwise_and = _builtin(ufuncs.bitwise_and, 2, identity=-1)
bitwise_or = _builtin(ufuncs.bitwise_or, 2, identity=0)
bitwise_xor = _builtin(ufuncs.bitwise_xor, 2, identity=0)
logaddexp = _builtin(ufuncs.logaddexp, 2, identity=-np.inf)
logaddexp2 = _builtin(ufuncs.logaddexp2, 2, identity=-np.inf)
negative = _builtin(ufuncs.negative, 1)  # (at: by the loop; a repeated index negates again)
