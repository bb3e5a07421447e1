"""Array creation: array, asarray, zeros, ones, full, empty, *_like, arange, eye, identity."""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.trace import Tracer, get_aval
from plax.numpy.util import as_operand, convert
from plax.runtime.array import Array
from plax.runtime.dispatch import array_from_host


def _canonical_shape(shape, name="shape") -> tuple:
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "__index__") and not hasattr(shape, "__len__")):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError as e:
        if any(isinstance(d, Tracer) for d in shape):
            raise TypeError(f"{name} must be static: a traced value was used as an array size. "
                            "Mark that argument static (static_argnums) or use a Python int.") from e
        raise TypeError(f"{name} must be a sequence of integers, got {shape!r}.") from e
    if any(d < 0 for d in out):
        raise ValueError(f"negative dimensions are not allowed in {name}={out}")
    return out


def _contains_traced(obj) -> bool:
    if isinstance(obj, (Array, Tracer)):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_traced(o) for o in obj)
    return False


def _stack_nested(obj, dtype):
    """Build an array from nested sequences that contain plax arrays or tracers."""
    from plax.lax.shapes import broadcast_in_dim, concatenate
    if not isinstance(obj, (list, tuple)):
        return as_operand(obj) if not isinstance(obj, (int, float, complex, bool)) else np.asarray(obj)
    parts = [_stack_nested(o, dtype) for o in obj]
    if not parts:
        return np.zeros((0,), dtype or dtypes.default_float_dtype())
    common = dtypes.result_type(*parts) if dtype is None else dtype
    parts = [convert(p, common) for p in parts]
    shapes = {get_aval(p).shape if not isinstance(p, np.ndarray) else p.shape for p in parts}
    if len(shapes) != 1:
        raise ValueError(f"setting an array element with a sequence: inhomogeneous shapes {sorted(shapes)}.")
    shape = shapes.pop()
    parts = [broadcast_in_dim(p, (1,) + shape, tuple(range(1, len(shape) + 1))) for p in parts]
    return concatenate(parts, 0)


def array(object, dtype=None, copy: bool = True, order=None, ndmin: int = 0):
    """Create an array from array-likes, nested sequences or scalars (as numpy.array)."""
    if order not in (None, "K", "A", "C"):
        raise NotImplementedError(f"plax arrays are always C-ordered; order={order!r} is not supported.")
    dt = None if dtype is None else dtypes.canonicalize_dtype(dtypes.check_user_dtype(dtype))
    if isinstance(object, (Array, Tracer)):
        out = object if dt is None else lax.convert_element_type(object, dt)
        if get_aval(out).weak_type and dt is None:
            out = convert(out, get_aval(out).dtype, False)
    elif _contains_traced(object):
        out = _stack_nested(object, dt)
        if dt is not None:
            out = convert(out, dt)
    elif hasattr(object, "__plax_array__"):
        return array(object.__plax_array__(), dtype, copy, order, ndmin)
    else:
        if type(object) is int and dt is None:
            dt = dtypes.default_int_dtype()
        if isinstance(object, (list, tuple)) and dt is None:
            host = np.asarray(object)
            if host.dtype == object.__class__ or host.dtype.kind == "O":
                raise TypeError(f"plax.numpy.array cannot build an array from {object!r}.")
        host = np.asarray(object, dtype=dt)
        if host.dtype.kind in "OUSV":
            raise TypeError(f"plax.numpy.array: objects of dtype {host.dtype} ({type(object).__name__}) "
                            "are not supported; pass numbers, booleans or arrays.")
        canon = dtypes.canonicalize_dtype(host.dtype)
        if type(object) is int and dtypes.is_integer(canon):
            info = dtypes.iinfo(canon)
            if not info.min <= object <= info.max:
                raise OverflowError(f"Python int {object} too large to convert to {canon}")
        weak = dtype is None and type(object) in (int, float, complex)
        out = array_from_host(host.astype(canon, copy=False), weak_type=weak)
    if ndmin > get_aval(out).ndim:
        from plax.lax.shapes import reshape
        out = reshape(out, (1,) * (ndmin - get_aval(out).ndim) + get_aval(out).shape)
    return out


def asarray(a, dtype=None, order=None, *, copy=None):
    """Convert ``a`` to an array without copying when it already is one of ``dtype``."""
    if isinstance(a, (Array, Tracer)) and (dtype is None or np.dtype(dtype) == get_aval(a).dtype):
        return a
    return array(a, dtype=dtype, order=order)


def full(shape, fill_value, dtype=None, *, device=None):
    """An array of ``shape`` filled with ``fill_value``."""
    from plax.lax.shapes import broadcast_in_dim
    shape = _canonical_shape(shape)
    fill = as_operand(fill_value) if not isinstance(fill_value, (list, tuple)) else array(fill_value)
    if dtype is None:
        dt = dtypes.result_type(fill)
        if type(fill_value) in (int, float, complex):
            dt = dtypes.canonicalize_dtype(dtypes.python_scalar_dtypes[type(fill_value)])
    else:
        dt = dtypes.canonicalize_dtype(dtypes.check_user_dtype(dtype))
    fill = convert(fill, dt)
    fshape = get_aval(fill).shape if not isinstance(fill, np.ndarray) else fill.shape
    if fshape == shape:
        return fill if not isinstance(fill, np.ndarray) else array(fill)
    nd = len(shape)
    out = broadcast_in_dim(fill, shape, tuple(range(nd - len(fshape), nd)))
    return _place(out, device)


def _place(x, device):
    if device is None:
        return x
    from plax.api import device_put
    return device_put(x, device)


def _default_dtype(dtype):
    return dtypes.default_float_dtype() if dtype is None else \
        dtypes.canonicalize_dtype(dtypes.check_user_dtype(dtype))


def zeros(shape, dtype=None, *, device=None):
    """An array of zeros."""
    return full(shape, 0, _default_dtype(dtype), device=device)


def ones(shape, dtype=None, *, device=None):
    """An array of ones."""
    return full(shape, 1, _default_dtype(dtype), device=device)


def empty(shape, dtype=None, *, device=None):
    """An array of zeros (plax arrays are never uninitialised)."""
    return zeros(shape, dtype, device=device)


def _like(a, dtype, shape):
    aval = get_aval(as_operand(a))
    return (aval.shape if shape is None else _canonical_shape(shape),
            aval.dtype if dtype is None else dtypes.canonicalize_dtype(dtypes.check_user_dtype(dtype)))


def full_like(a, fill_value, dtype=None, shape=None, *, device=None):
    """An array with the shape and dtype of ``a`` filled with ``fill_value``."""
    shape, dt = _like(a, dtype, shape)
    return full(shape, fill_value, dt, device=device)


def zeros_like(a, dtype=None, shape=None, *, device=None):
    """Zeros with the shape and dtype of ``a``."""
    return full_like(a, 0, dtype, shape, device=device)


def ones_like(a, dtype=None, shape=None, *, device=None):
    """Ones with the shape and dtype of ``a``."""
    return full_like(a, 1, dtype, shape, device=device)


def empty_like(prototype, dtype=None, shape=None, *, device=None):
    """Zeros with the shape and dtype of ``prototype``."""
    return zeros_like(prototype, dtype, shape, device=device)


def _concrete_scalar(x, name):
    if isinstance(x, Tracer):
        val = x.to_concrete_value()
        if val is None:
            from plax.core.errors import ConcretizationTypeError
            raise ConcretizationTypeError(x, f"The problem arose with the `{name}` argument of arange: "
                                             "it must be a concrete value, since it sets the array size.")
        return val
    if isinstance(x, Array):
        return x.item()
    return x


def arange(start, stop=None, step=None, dtype=None, *, device=None):
    """Evenly spaced values in ``[start, stop)``; the bounds must be concrete."""
    start = _concrete_scalar(start, "start")
    stop = None if stop is None else _concrete_scalar(stop, "stop")
    step = None if step is None else _concrete_scalar(step, "step")
    if stop is None and step is None:
        start, stop = 0, start
    if step is None:
        step = 1
    host = np.arange(start, stop, step)
    if dtype is not None:
        dt = dtypes.canonicalize_dtype(dtypes.check_user_dtype(dtype))
    else:
        dt = dtypes.canonicalize_dtype(host.dtype)
    if start == 0 and step == 1 and not dtypes.is_complex(dt) and dt != np.bool_:
        return _place(lax_iota(dt, host.size), device)
    return _place(array(host.astype(dt)), device)


def lax_iota(dtype, size):
    from plax.lax.shapes import iota
    return iota(dtype, size)


def eye(N, M=None, k: int = 0, dtype=None, *, device=None):
    """A 2-D array with ones on the k-th diagonal."""
    from plax.lax.shapes import broadcasted_iota
    M = N if M is None else M
    N, M = _canonical_shape((N, M))
    k = operator.index(k)
    dt = _default_dtype(dtype)
    rows = broadcasted_iota(np.int32, (N, M), 0)
    cols = broadcasted_iota(np.int32, (N, M), 1)
    mask = lax.eq(lax.add(rows, np.int32(k)), cols)
    return _place(lax.convert_element_type(mask, dt), device)


def identity(n, dtype=None):
    """The n x n identity matrix."""
    return eye(n, dtype=dtype)
