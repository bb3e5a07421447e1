"""Argument checks, dtype promotion and shape broadcasting shared by plax.numpy."""
from __future__ import annotations

import functools
import operator
import warnings

import numpy as np

from plax.core import dtypes
from plax.core.avals import (from_array_protocol, has_array_protocol, masked_array_error,
                             weak_host_value)
from plax.core.config import config
from plax.core.refs import AbstractRef
from plax.core.source_info import user_stacklevel
from plax.core.trace import Tracer, get_aval
from plax.runtime.array import ARRAY_TYPES
from plax.transforms.jvp import JVPTracer

_SCALARS = (bool, int, float, complex)


def alias(fn, name: str):
    """``fn`` under another of NumPy's names for it, as a function object of its own whose
    ``__name__`` is that name (JAX's aliases are distinct functions, and code keys on names)."""
    @functools.wraps(fn)
    def named(*args, **kwargs):
        return fn(*args, **kwargs)
    named.__name__ = named.__qualname__ = name
    named.__doc__ = f"Alias of :func:`plax.numpy.{fn.__name__}`."
    return named


def is_traced_ref(x) -> bool:
    """Whether ``x`` is a traced reference (a kernel's, say): not an array, though it has a
    shape and a dtype (the *_like functions take it as a duck-typed array, as JAX's do)."""
    return isinstance(x, Tracer) and isinstance(x.aval, AbstractRef)


def is_arraylike(x) -> bool:
    # (subclasses of the Python scalar types count, as in JAX: an IntEnum member is an int;
    # a traced reference, such as a kernel's, is not an array: it is read with ref[...])
    if isinstance(x, Tracer):
        return not isinstance(x.aval, AbstractRef)
    return (type(x) in _SCALARS or isinstance(x, (ARRAY_TYPES, np.ndarray, np.generic))
            or isinstance(x, _SCALARS) or has_array_protocol(x))


def check_arraylike(name: str, *args) -> None:
    for i, a in enumerate(args):
        if not is_arraylike(a):
            hint = ("Convert lists and tuples with plax.numpy.asarray first."
                    if isinstance(a, (list, tuple)) else
                    f"It is a reference, {a.aval}: read it with ref[...] first."
                    if isinstance(a, Tracer) else
                    f"A {type(a).__name__} is not a valid JAX array type: pass arrays, NumPy "
                    "values or Python scalars.")
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at "
                            f"position {i}. {hint}")


def as_operand(x):
    """A value lax primitives accept: Arrays and tracers as they are, host data canonicalised."""
    if isinstance(x, ARRAY_TYPES) or type(x) in _SCALARS:
        return x
    if isinstance(x, _SCALARS):  # an int/float/complex subclass (IntEnum): its plain value
        return next(t for t in _SCALARS if isinstance(x, t))(x)
    if isinstance(x, (np.ndarray, np.generic)):
        if isinstance(x, np.ma.MaskedArray):
            raise masked_array_error()
        dt = dtypes.canonicalize_dtype(x.dtype)
        return x if x.dtype == dt else np.asarray(x, dt)
    if has_array_protocol(x):
        return from_array_protocol(x)
    raise TypeError(f"Value of type {type(x).__name__} is not an array.")


def convert(x, dtype, weak_type: bool = False):
    """``x`` with ``dtype`` (and weak type), converting host values without tracing."""
    from plax.first_order.conversion import convert_with_weak_type
    if not isinstance(dtype, dtypes.ExtendedDType):
        dtype = np.dtype(dtype)
    if type(x) in _SCALARS or isinstance(x, (np.ndarray, np.generic)):
        if type(x) is complex and not dtypes.is_complex(dtype):
            x = x.real
        if type(x) is int and dtypes.is_integer(dtype):
            x = np.asarray(x).astype(dtype)  # out-of-range ints wrap around, as in JAX
        return weak_host_value(x, dtype) if weak_type else np.asarray(x, dtype)
    aval = get_aval(x)
    if aval.dtype == dtype and aval.weak_type == weak_type and not _host_tangent(x):
        return x
    return convert_with_weak_type(x, dtype, weak_type)


def _host_tangent(x) -> bool:
    """Is ``x`` differentiated along a Python scalar (``jvp(f, (1.0,), (1.0,))``)? JAX's
    promotion converts such a value even to its own dtype, making the tangent an Array."""
    return type(x) is JVPTracer and type(x.tangent) in _SCALARS


def promote_dtypes(*args):
    """Convert ``args`` to their common dtype (JAX's promotion rules, weak scalars)."""
    args = [as_operand(a) for a in args]
    if len(args) < 2:
        return args
    first = getattr(args[0], "aval", None)
    if first is not None and all(getattr(a, "aval", None) == first for a in args[1:]):
        return args  # already one type: nothing to promote
    if len(args) == 2:
        fast = _array_with_scalar(*args)
        if fast is not None:
            return fast
    dtype, weak = dtypes.lattice_result(*args)
    return [convert(a, dtype, weak) for a in args]


# The Python scalar kinds an array's dtype kind absorbs without changing dtype.
_ABSORBS = {"i": (int,), "u": (int,), "f": (int, float), "V": (int, float),
            "c": (int, float, complex)}


def _array_with_scalar(a, b):
    """The promotion of ``array op python_scalar`` (either order) when the array's dtype
    absorbs the scalar, which is the common case; None otherwise."""
    ta, tb = type(a), type(b)
    if tb in (int, float, complex) and ta not in _SCALARS:
        arr, scalar, swap = a, b, False
    elif ta in (int, float, complex) and tb not in _SCALARS:
        arr, scalar, swap = b, a, True
    else:
        return None
    aval = getattr(arr, "aval", None)
    if aval is None or type(scalar) not in _ABSORBS.get(aval.dtype.kind, ()):
        return None
    if aval.dtype.kind == "V" and not dtypes.is_float(aval.dtype):
        return None
    converted = convert(scalar, aval.dtype, aval.weak_type)
    if _host_tangent(arr):
        arr = convert(arr, aval.dtype, aval.weak_type)
    return [converted, arr] if swap else [arr, converted]


def promote_dtypes_inexact(*args):
    """Like promote_dtypes, then to the default float type if the result is not inexact."""
    args = [as_operand(a) for a in args]
    dtype, weak = dtypes.lattice_result(*args)
    if not dtypes.is_inexact(dtype):
        dtype = dtypes.to_inexact_dtype(dtype)
    return [convert(a, dtype, weak) for a in args]


def promote_dtypes_numeric(*args):
    """Like promote_dtypes, then bool to the default int type."""
    args = [as_operand(a) for a in args]
    dtype, weak = dtypes.lattice_result(*args)
    if dtypes.is_bool(dtype):
        dtype = dtypes.default_int_dtype()
    return [convert(a, dtype, weak) for a in args]


def shape_of(x) -> tuple:
    return () if type(x) in _SCALARS else tuple(np.shape(x)) if isinstance(x, (np.ndarray, np.generic)) \
        else get_aval(x).shape


def broadcast_shapes(*shapes) -> tuple:
    """NumPy broadcasting of shapes, with plax's error message."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        sizes = {s[i - nd + len(s)] for s in shapes if i - nd + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={[tuple(s) for s in shapes]}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _check_rank_promotion(name, shapes):
    mode = config.read("numpy_rank_promotion")
    if mode == "allow" or len({len(s) for s in shapes if len(s)}) <= 1:
        return
    shown = " ".join(str(tuple(s)) for s in shapes)
    if mode == "raise":
        raise ValueError(f"Operands could not be broadcast together for {name} on shapes {shown} "
                         "and with the config option jax_numpy_rank_promotion='raise'. Add the "
                         "missing dimensions explicitly (e.g. x[None, :] or expand_dims).")
    warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {shown}. Set "
                  "the jax_numpy_rank_promotion config option to 'allow' to disable this warning.",
                  stacklevel=user_stacklevel())


def broadcast_to_shape(x, shape):
    """``x`` broadcast to ``shape`` (NumPy rules); rank-0 values are left for lax to broadcast."""
    from plax.first_order.shapes import broadcast_in_dim
    s = shape_of(x)
    if s == tuple(shape):
        return x
    nd = len(shape)
    if len(s) > nd or any(a not in (1, b) for a, b in zip(s, shape[nd - len(s):])):
        raise ValueError(f"Incompatible shapes for broadcasting: {s} and requested shape {tuple(shape)}")
    # size-1 dims that grow are dropped from the mapping by squeezing them first
    return broadcast_in_dim(x, tuple(shape), tuple(range(nd - len(s), nd)))


def filled_like(x, value):
    """``value`` in ``x``'s shape, dtype and weak type."""
    aval = get_aval(x)
    return broadcast_to_shape(convert(value, aval.dtype, aval.weak_type), shape_of(x))


def promote_shapes(name: str, *args, rank_only: bool = False, check_rank: bool = True):
    """Broadcast ``args`` to a common shape; rank-0 arguments stay rank 0.

    With ``rank_only``, arguments only gain leading size-1 dimensions up to the common
    rank: lax's elementwise ops broadcast size-1 dimensions themselves (as in JAX), so
    nothing is materialised at full size. ``check_rank=False`` skips the
    jax_numpy_rank_promotion check, for the functions JAX broadcasts without it.
    """
    if len(args) < 2:
        return list(args)
    shapes = [shape_of(a) for a in args]
    ranked = [s for s in shapes if s]
    if all(s == ranked[0] for s in ranked):
        return list(args)  # equal shapes, or scalars that lax broadcasts itself
    if check_rank:
        _check_rank_promotion(name, shapes)
    if rank_only:
        # lax broadcasts the size-1 dimensions, and (as in JAX) its elementwise ops report
        # a mismatch of equal-rank shapes as a TypeError; shapes of different ranks fail to
        # broadcast first, with a ValueError.
        try:
            target = broadcast_shapes(*shapes)
        except ValueError:
            if len({len(s) for s in ranked}) > 1:
                raise
            raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                            f"{', '.join(str(tuple(s)) for s in shapes)}.") from None
    else:
        target = broadcast_shapes(*shapes)
    if rank_only:
        from plax.first_order.shapes import broadcast_in_dim
        nd = len(target)
        return [a if len(s) in (0, nd) else
                broadcast_in_dim(a, (1,) * (nd - len(s)) + s, tuple(range(nd - len(s), nd)))
                for a, s in zip(args, shapes)]
    return [a if s == () or s == target else broadcast_to_shape(a, target)
            for a, s in zip(args, shapes)]


def _check_no_float0s(name: str, *args) -> None:
    """float0s take part in no operation; PRNG keys only in ==/!= among keys of one type."""
    arg_dtypes = [getattr(a, "dtype", None) for a in args]
    if any(d == dtypes.float0 for d in arg_dtypes):
        from plax.first_order.common import FLOAT0_ADVICE
        raise TypeError(f"Called {name} with a float0 array. {FLOAT0_ADVICE}")
    if any(dtypes.is_extended(d) for d in arg_dtypes) and len(set(map(str, arg_dtypes))) > 1:
        names = ", ".join(dtypes.result_type(a).name if not dtypes.is_extended(d) else d.name
                          for a, d in zip(args, arg_dtypes))
        raise TypeError(f"{name} does not accept dtypes {names}. PRNG keys (extended dtypes) do "
                        "not mix with numbers: use jax.random.key_data(key) for the integers "
                        "inside a key.")


def promote_args(name: str, *args, check_rank: bool = True):
    """Check, promote dtypes and broadcast shapes: the standard ufunc preamble."""
    check_arraylike(name, *args)
    _check_no_float0s(name, *args)
    return promote_shapes(name, *promote_dtypes(*args), rank_only=True,
                          check_rank=check_rank)


def promote_args_inexact(name: str, *args, check_rank: bool = True):
    check_arraylike(name, *args)
    _check_no_float0s(name, *args)
    return promote_shapes(name, *promote_dtypes_inexact(*args), rank_only=True,
                          check_rank=check_rank)


def promote_args_numeric(name: str, *args, check_rank: bool = True):
    check_arraylike(name, *args)
    _check_no_float0s(name, *args)
    return promote_shapes(name, *promote_dtypes_numeric(*args), rank_only=True,
                          check_rank=check_rank)


def canonicalize_axis(axis: int, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        # NumPy's AxisError is both a ValueError and an IndexError: JAX raises one or the
        # other depending on the function, so either ``except`` keeps working.
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def canonicalize_axes(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = tuple(canonicalize_axis(a, ndim) for a in axis)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {tuple(axis)}")
    return out


def static_nonnegative_int(value, name: str, fn: str) -> int:
    """``value`` as a Python int >= 0 (a static parameter such as a length or an order)."""
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be a Python integer, got {value!r}.") from None
    if value < 0:
        raise ValueError(f"{fn}: {name} must be non-negative, got {value}.")
    return value
