"""Array creation: array, asarray, zeros, ones, full, empty, *_like, arange, eye, identity,
linspace, logspace, geomspace, meshgrid, tri, tril, triu, copy."""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.first_order import sharding_constraint, shapes as lax_shapes
from plax.first_order.utility import copy_p
from plax.core import dtypes, replication
from plax.core.avals import (WeakHostArray, from_array_protocol, has_array_protocol,
                              masked_array_error, shape_entries)
from plax.core.errors import InconclusiveDimensionOperation, shape_type_error
from plax.core.symbolic_shapes import DimExpr, dimension_as_value, max_dim
from plax.core.trace import EvalTrace, Tracer, current_trace, get_aval
from plax.api.jit import eager_compiled
from plax.numpy.util import (as_operand, broadcast_shapes, broadcast_to_shape, canonicalize_axis,
                             check_arraylike, convert, is_traced_ref, shape_of)
from plax.runtime.array import ARRAY_TYPES, CONCRETE
from plax.runtime.dispatch import array_from_host, put_sharded
from plax.sharding.mesh import computation_mesh
from plax.sharding.named import NamedSharding
from plax.sharding.partition_spec import PartitionSpec

__all__ = [
    "array", "asarray", "full", "zeros", "ones", "empty", "full_like", "zeros_like", "ones_like",
    "empty_like", "arange", "eye", "identity", "copy", "astype", "linspace", "logspace",
    "geomspace",
    "meshgrid", "tri", "tril", "triu",
]


def _canonical_shape(shape, name="shape", negative=TypeError) -> tuple:
    """A static shape (one int, or a 1-D sequence of ints; concrete arrays are read).

    Negative sizes raise ``negative``: a TypeError for zeros/ones/full/empty (as JAX, whose
    broadcast_in_dim rejects them) and a ValueError for eye/identity (as JAX, and NumPy).
    """
    if type(shape) in CONCRETE or (isinstance(shape, np.ndarray) and shape.ndim <= 1):
        shape = np.asarray(shape).tolist()
    shape = shape_entries(shape)
    try:
        out = tuple(operator.index(d) for d in shape)
    except InconclusiveDimensionOperation:  # symbolic sizes (plax.export)
        from plax.core.symbolic_shapes import checked_symbolic_shape
        return checked_symbolic_shape(shape)
    except TypeError:
        raise shape_type_error(shape, name) from None
    if any(d < 0 for d in out):
        if negative is ValueError:
            raise ValueError(f"negative dimensions are not allowed in {name}={out}")
        raise TypeError(f"{name} must have every element be nonnegative, got {out}.")
    return out


def _contains_traced(obj) -> bool:
    if isinstance(obj, ARRAY_TYPES):
        return True
    if isinstance(obj, (list, tuple)):  # (a symbolic dimension in one is a traced value)
        return any(isinstance(o, DimExpr) or _contains_traced(o) for o in obj)
    return False


def _nested_leaves(obj):
    """The entries of nested lists/tuples, Python scalars as they are (weakly typed)."""
    if isinstance(obj, (list, tuple)):
        return [leaf for o in obj for leaf in _nested_leaves(o)]
    return [obj if isinstance(obj, (int, float, complex, bool)) else as_operand(obj)]


def _stack_nested(obj, dtype):
    """Build an array from nested sequences that contain plax arrays or tracers."""
    from plax.first_order.shapes import broadcast_in_dim, concatenate
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


def _array(object, dtype=None, copy: bool = True, order=None, ndmin: int = 0):
    """Create an array from array-likes, nested sequences or scalars (as numpy.array)."""
    if order not in (None, "K", "A", "C"):
        raise NotImplementedError(f"plax arrays are always C-ordered; order={order!r} is not supported.")
    dt = None if dtype is None else dtypes.canonicalize_user_dtype(dtype)
    if object is None:
        raise ValueError("None is not a valid value for jnp.array")
    if isinstance(object, ARRAY_TYPES):
        out = copy_p.bind(object) if copy else object  # (a new buffer: see lax.utility.copy_p)
        out = out if dt is None else lax.convert_element_type(out, dt)
    elif _contains_traced(object):
        if dt is None:  # one promotion over all leaves, so Python scalars stay weak
            dt = dtypes.result_type(*_nested_leaves(object))
        out = _stack_nested(object, dt)
        if dt is not None:
            out = convert(out, dt)
    elif has_array_protocol(object):
        return array(from_array_protocol(object), dtype, copy, order, ndmin)
    else:
        if isinstance(object, np.ma.MaskedArray):
            raise masked_array_error()
        if type(object) is int and dt is None:
            dt = dtypes.default_int_dtype()
        if isinstance(object, (list, tuple)) and dt is None:
            host = np.asarray(object)
            if host.dtype == object.__class__ or host.dtype.kind == "O":
                _not_numeric(object, host)
        host = np.asarray(object, dtype=dt)
        if host.dtype == dtypes.float0:  # float0s hold no data: they stay on the host, as in JAX
            return np.zeros((1,) * max(0, ndmin - host.ndim) + host.shape, dtypes.float0)
        if host.dtype not in dtypes.supported_dtypes and host.dtype.kind not in "iufcb":
            _not_numeric(object, host)
        canon = dtypes.canonicalize_dtype(host.dtype)
        if dt is None and dtypes.is_integer(canon) and host.size and (
                type(object) is int or isinstance(object, (list, tuple))):
            _check_int_range(host, canon)
        weak = dtype is None and (type(object) in (int, float, complex)
                                  or isinstance(object, WeakHostArray))
        out = _from_host(host.astype(canon, copy=False), weak)
        out = current_trace().staged_constant(out)  # a tracer under jit, as in JAX
    if ndmin > get_aval(out).ndim:
        from plax.first_order.shapes import reshape
        out = reshape(out, (1,) * (ndmin - get_aval(out).ndim) + get_aval(out).shape)
    return out


def _from_host(host: np.ndarray, weak: bool):
    """An Array of host data: on the default device, or eagerly under ``set_mesh`` replicated
    over the mesh's devices, as JAX's."""
    mesh = computation_mesh()
    if mesh is None or not isinstance(current_trace(), EvalTrace):
        return array_from_host(host, weak_type=weak)
    return put_sharded(host, NamedSharding(mesh, PartitionSpec()), weak_type=weak)


def _not_numeric(obj, host: np.ndarray):
    value = host.flat[0] if host.size else obj
    value = value.item() if isinstance(value, np.generic) else value
    raise TypeError(f"Value {value!r} with dtype {host.dtype} is not a valid JAX array type: "
                    f"plax.numpy.array builds arrays of numbers and booleans only (got a "
                    f"{type(obj).__name__}).")


def _check_int_range(host: np.ndarray, dtype) -> None:
    """Python ints must fit the (canonical) integer type they become, as in JAX."""
    info = dtypes.iinfo(dtype)
    lo, hi = int(host.min()), int(host.max())
    for v in (lo, hi):
        if not int(info.min) <= v <= int(info.max):
            raise OverflowError(f"Python integer {v} out of bounds for {np.dtype(dtype).name}")


def array(object, dtype=None, copy: bool = True, order=None, ndmin: int = 0, *, device=None,
          out_sharding=None):
    """An array holding ``object`` (an array, scalar or nested sequence), in ``dtype`` if given;
    ``device``/``out_sharding`` say where it lives."""
    return _laid_out(_array(object, dtype, copy, order, ndmin), device, out_sharding)


def _laid_out(x, device, out_sharding):
    if out_sharding is not None:
        return sharding_constraint.with_out_sharding(lambda v: v, out_sharding, x)
    return _place(x, device)


def asarray(a, dtype=None, order=None, *, copy=None, device=None, out_sharding=None):
    """``asarray`` placed by ``device``/``out_sharding`` when given (see ``_asarray``)."""
    return _laid_out(_asarray(a, dtype, order, copy=copy), device, out_sharding)


def _asarray(a, dtype=None, order=None, *, copy=None):
    """Convert ``a`` to an array without copying when it already is one of ``dtype``.

    An explicit ``dtype`` gives a strongly typed result, as in JAX (a weakly typed ``a`` of
    that dtype is converted).
    """
    if copy is not True and isinstance(a, ARRAY_TYPES) and (dtype is None or (
            dtypes.dtype(dtype) == get_aval(a).dtype and not get_aval(a).weak_type)):
        return a
    return array(a, dtype=dtype, order=order, copy=copy is True)


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    """An array of ``shape`` filled with ``fill_value`` (broadcast to ``shape``)."""
    if dtype is None:
        return _full(shape, fill_value, None, False, device, out_sharding)
    return _full(shape, fill_value, _user_dtype(dtype), False, device, out_sharding)


def _full(shape, fill_value, dt, weak: bool, device, out_sharding=None):
    return _laid_out(_filled(shape, fill_value, dt, weak), device, out_sharding)


def _filled(shape, fill_value, dt, weak: bool):
    """``full`` with a resolved dtype; ``dt`` None takes dtype and weak type from the value."""
    shape = _canonical_shape(shape)
    if dtypes.is_extended(dt):
        return _filled_keys(shape, fill_value, dt)
    if dt == dtypes.float0:  # the tangent type of integers holds no data (a host array, as in JAX)
        return np.zeros(shape, dtypes.float0)
    if isinstance(fill_value, (list, tuple)):
        fill = array(fill_value)
    else:
        check_arraylike("full", fill_value)
        fill = as_operand(fill_value)
    if dt is None:
        dt, weak = dtypes.lattice_result(fill)
    fill = convert(fill, dt, weak)
    if shape_of(fill) == shape:
        return asarray(fill)
    return broadcast_to_shape(fill, shape)


def _filled_keys(shape, fill_value, dt):
    """PRNG keys of ``shape``: copies of the key ``fill_value``, or keys whose words all hold
    the integer ``fill_value`` (zeros_like of keys is keys of zero data, as in JAX)."""
    aval = getattr(fill_value, "aval", None)
    if aval is not None and aval.dtype == dt:
        return broadcast_to_shape(fill_value, shape)
    if not isinstance(fill_value, (int, np.integer)):
        raise TypeError(f"An array of PRNG keys ({dt}) is filled with a key or with an integer "
                        f"for every word, got fill_value={fill_value!r}.")
    return lax.prng.filled_keys(shape, dt, int(fill_value))


def _user_dtype(dtype) -> np.dtype:
    return dtypes.canonicalize_user_dtype(dtype)


def _place(x, device):
    if device is None:
        return x
    from plax.api.devices import device_put
    return device_put(x, device)


def _default_dtype(dtype):
    return dtypes.default_float_dtype() if dtype is None else \
        dtypes.canonicalize_user_dtype(dtype)


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
    """An array of zeros."""
    return full(shape, 0, _default_dtype(dtype), device=device, out_sharding=out_sharding)


def ones(shape, dtype=None, *, device=None, out_sharding=None):
    """An array of ones."""
    return full(shape, 1, _default_dtype(dtype), device=device, out_sharding=out_sharding)


def empty(shape, dtype=None, *, device=None, out_sharding=None):
    """An array of zeros (plax arrays are never uninitialised)."""
    return zeros(shape, dtype, device=device, out_sharding=out_sharding)


def _like(name, a, dtype, shape):
    """Shape, dtype, weak type and layout a *_like function starts from: those of ``a``
    (an array, a scalar, or any object with ``.shape`` and ``.dtype`` such as a
    ShapeDtypeStruct) unless given. The layout is ``(typed, placed)``: the sharding in
    ``a``'s type, and the sharding a concrete ``a`` lies on; both only when the shape is kept."""
    if hasattr(a, "shape") and hasattr(a, "dtype") and (is_traced_ref(a) or not isinstance(
            a, (*ARRAY_TYPES, np.ndarray, np.generic))):  # (before any __jax_array__, as JAX)
        a_shape, a_dtype, a_weak = tuple(a.shape), _duck_dtype(a), False
        sharding = getattr(a, "sharding", None)
        typed = sharding if sharding is not None and lax_shapes.is_explicit_sharding(sharding) \
            else None
        placed = None if typed is not None else sharding
    else:
        check_arraylike(name, a)
        a = as_operand(a)
        aval = get_aval(a)
        a_shape, a_dtype, a_weak = aval.shape, aval.dtype, aval.weak_type
        typed = aval._sharding
        placed = a.sharding if isinstance(a, CONCRETE) else None
    shape = a_shape if shape is None else _canonical_shape(shape)
    if shape != a_shape:
        typed = placed = None
    if dtype is None:
        return shape, a_dtype, a_weak, (typed, placed)
    return shape, _user_dtype(dtype), False, (typed, placed)


def _duck_dtype(a):
    """The dtype of a duck-typed array (``.dtype`` must be a dtype object, as in JAX)."""
    dt = a.dtype
    if dtypes.is_extended(dt):
        return dt
    if not isinstance(dt, np.dtype):
        raise ValueError(f"Could not convert {a!r} to a NumPy dtype (via `.dtype` value "
                         f"{dt!r}): give the object a numpy dtype, e.g. np.dtype({dt!r}).")
    return dtypes.canonicalize_dtype(dt)


def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None):
    """An array with the shape and dtype of ``a`` filled with ``fill_value``; when its shape
    is kept, laid out as ``a`` is (the sharding in its type, or the one it lies on)."""
    return _full_like("full_like", a, fill_value, dtype, shape, device, out_sharding)


def _full_like(name, a, fill_value, dtype, shape, device, out_sharding):
    shape, dt, weak, (typed, placed) = _like(name, a, dtype, shape)
    if out_sharding is None and device is None and typed is not None:
        # an array's own layout names its devices (its type's names only the mesh's axes)
        out_sharding = placed if isinstance(placed, NamedSharding) else typed
    out = _full(shape, fill_value, dt, weak, device, out_sharding)
    if (out_sharding is None and device is None and placed is not None
            and isinstance(out, CONCRETE) and out.sharding != placed
            and (computation_mesh() is None or getattr(a, "_committed", True))):
        # (under set_mesh, an uncommitted ``a``'s device gives way to the mesh, as in JAX)
        out = _place(out, placed)
    if isinstance(a, Tracer):  # inside shard_map: varying as ``a`` is, as JAX's full_like
        out = replication.vary_like(out, a)
    return out


def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Zeros with the shape and dtype of ``a`` (see ``full_like``)."""
    return _full_like("zeros_like", a, 0, dtype, shape, device, out_sharding)


def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Ones with the shape and dtype of ``a`` (see ``full_like``)."""
    return _full_like("ones_like", a, 1, dtype, shape, device, out_sharding)


def empty_like(prototype, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Zeros with the shape and dtype of ``prototype`` (see ``full_like``)."""
    return _full_like("empty_like", prototype, 0, dtype, shape, device, out_sharding)


def _concrete_scalar(x, name, fn="arange"):
    """A host scalar for an argument that sets an array size (arrays must be concrete)."""
    if isinstance(x, Tracer):
        val = x.to_concrete_value()
        if val is None:
            from plax.core.errors import ConcretizationTypeError
            raise ConcretizationTypeError(x, f"The problem arose with the `{name}` argument of {fn}: "
                                             "it must be a concrete value, since it sets the array size.")
        return np.asarray(val)[()]
    if isinstance(x, ARRAY_TYPES):
        return np.asarray(x)[()]
    return x


def _arange_size(start, stop, step) -> int:
    if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        start, stop, step = int(start), int(stop), int(step)
        return max(0, -((start - stop) // step))
    return max(0, int(np.ceil((stop - start) / step)))


def _arange_symbolic(start, stop, step, dtype):
    """``arange`` where a bound or the step is a symbolic dimension (plax.export): the others
    must be integers, and the sign of the step known."""
    if any(v is not None and type(v) is not DimExpr and
           not (isinstance(v, (int, np.integer)) and not isinstance(v, bool))
           for v in (start, stop, step)):
        raise ValueError("In arange with non-constant arguments all of start, stop, and step "
                         "must be either dimension expressions or integers: "
                         f"start={start}, stop={stop}, step={step}")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if type(step) is not DimExpr and step == 0:
        raise ValueError(f"arange has step == 0: start={start}, stop={stop}")
    try:
        positive = bool(step > 0)
    except InconclusiveDimensionOperation as e:
        raise InconclusiveDimensionOperation(
            f"In arange with non-constant arguments the step ({step}) must be resolved "
            f"statically if it is > 0 or < 0.\n{e}") from e
    # the number of values: ceil((stop - start) / step), at least 0
    size = max_dim(0, (stop - start + step - 1) // step) if positive else \
        max_dim(0, (start - stop - step - 1) // (-step))
    dt = _user_dtype(dtype) if dtype is not None else dtypes.canonicalize_dtype(np.int64)
    out = lax.iota(dt, size)
    if type(step) is DimExpr or step != 1:
        out = lax.mul(_dim_as(step, dt), out)
    if type(start) is DimExpr or start != 0:
        out = lax.add(_dim_as(start, dt), out)
    return out


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
    """Evenly spaced values ``start + i * step`` in ``[start, stop)``; the bounds are concrete
    or (under plax.export) symbolic dimensions and integers."""
    if any(type(v) is DimExpr for v in (start, stop, step)):
        return _laid_out(_arange_symbolic(start, stop, step, dtype), device, out_sharding)
    start = _concrete_scalar(start, "start")
    stop = None if stop is None else _concrete_scalar(stop, "stop")
    step = None if step is None else _concrete_scalar(step, "step")
    given = [v for v in (start, stop, step) if v is not None]
    if any(np.iscomplexobj(v) for v in given):
        raise ValueError("arange does not accept complex start/stop/step; build a real range and "
                         "convert it instead.")
    dt = dtypes.canonicalize_dtype(dtypes.result_type(*given)) if dtype is None else _user_dtype(dtype)
    if dtypes.is_bool(dt):
        raise TypeError("arange does not accept dtype bool; use an integer or floating dtype.")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if step == 0:
        raise ValueError("arange: step must not be zero.")
    out = lax.iota(dt, _arange_size(start, stop, step))
    if step != 1:
        out = lax.mul(convert(step, dt), out)
    if start != 0:
        out = lax.add(convert(start, dt), out)
    return _laid_out(out, device, out_sharding)


def eye(N, M=None, k=0, dtype=None, *, device=None):
    """A 2-D array with ones on the k-th diagonal (k may be a traced integer)."""
    M = N if M is None else M
    N, M = _canonical_shape((N, M), negative=ValueError)
    k = np.int32(operator.index(k)) if not isinstance(k, ARRAY_TYPES) else \
        lax.convert_element_type(k, np.int32)
    rows = lax.broadcasted_iota(np.int32, (N, M), 0)
    cols = lax.broadcasted_iota(np.int32, (N, M), 1)
    mask = lax.eq(lax.add(rows, k), cols)
    return _place(lax.convert_element_type(mask, _default_dtype(dtype)), device)


def identity(n, dtype=None):
    """The n x n identity matrix."""
    return eye(n, dtype=dtype)


def astype(x, dtype, /, *, copy: bool = False, device=None):
    """``x`` cast to ``dtype``; with ``copy=True`` always in a new buffer."""
    check_arraylike("astype", x)
    dt = dtypes.canonicalize_user_dtype(dtype)
    out = lax.convert_element_type(as_operand(x), dt)
    return _place(copy_p.bind(out) if copy else out, device)


def copy(a, order=None):
    """A copy of ``a``."""
    check_arraylike("copy", a)
    return array(a, copy=True, order=order)


# --- ranges -----------------------------------------------------------------------------
def _inexact_of(*args) -> np.dtype:
    return dtypes.to_inexact_dtype(dtypes.result_type(*args))


def _cast_result(y, dtype):
    """Values computed in floating point, cast to ``dtype`` (integers round down, as NumPy)."""
    if dtypes.is_integer(dtype) and not dtypes.is_integer(get_aval(y).dtype):
        y = lax.floor(y)
    return lax.convert_element_type(y, dtype)


def _bcast(x, shape, dims=None):
    """``x`` broadcast to ``shape``; its axes map to ``dims`` (default: the trailing axes)."""
    nd = len(shape_of(x))
    if dims is None and shape_of(x) == tuple(shape):
        return x
    dims = tuple(range(len(shape) - nd, len(shape))) if dims is None else dims
    return lax.broadcast_in_dim(x, tuple(shape), dims)


def _dim_as(d, dtype):
    """A dimension (symbolic ones as their values) converted to ``dtype``."""
    if type(d) is DimExpr:
        return lax.convert_element_type(dimension_as_value(d), dtype)
    return convert(d, dtype)


@eager_compiled(static_argnames=("num", "endpoint", "retstep", "dtype", "axis", "device"))
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """``num`` evenly spaced values from ``start`` to ``stop``, stacked along ``axis``.

    ``start`` and ``stop`` may be arrays; they broadcast together.
    """
    if type(num) is DimExpr:  # (plax.export) the scope must tell that there are >= 2
        if not num >= 2:
            raise ValueError(f"linspace: a symbolic number of samples, {num}, must be >= 2.")
    else:
        num = operator.index(_concrete_scalar(num, "num", "linspace"))
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    check_arraylike("linspace", start, stop)
    start, stop = as_operand(start), as_operand(stop)
    dt = _inexact_of(start, stop) if dtype is None else _user_dtype(dtype)
    ct = dt if dtypes.is_inexact(dt) else _inexact_of(start, stop)
    start, stop = convert(start, ct), convert(stop, ct)
    bshape = broadcast_shapes(shape_of(start), shape_of(stop))
    axis = canonicalize_axis(axis, len(bshape) + 1)
    out_shape = bshape[:axis] + (num,) + bshape[axis:]
    other = tuple(i for i in range(len(out_shape)) if i != axis)
    div = num - 1 if endpoint else num
    lo, hi = _bcast(start, bshape), _bcast(stop, bshape)
    if num == 0:
        out = lax.broadcast_in_dim(convert(0, ct), out_shape, ())
    elif endpoint and num == 1:
        out = lax.broadcast_in_dim(lo, out_shape, other)
    else:
        n = num - 1 if endpoint else num
        shape_n = bshape[:axis] + (n,) + bshape[axis:]
        t = lax.div(lax.broadcasted_iota(ct, shape_n, axis), _dim_as(div, ct))
        lo_n, hi_n = (lax.broadcast_in_dim(v, shape_n, other) if bshape else v for v in (lo, hi))
        out = lax.add(lax.mul(lo_n, lax.sub(convert(1, ct), t)), lax.mul(hi_n, t))
        if endpoint:
            last = lax.broadcast_in_dim(hi, bshape[:axis] + (1,) + bshape[axis:], other)
            out = lax.concatenate([out, last], axis)
    out = _place(_cast_result(out, dt), device)
    if not retstep:
        return out
    if div > 0:
        step = lax.div(lax.sub(hi, lo), _dim_as(div, ct))
    else:
        step = lax.broadcast_in_dim(convert(np.nan, ct), bshape, ())
    return out, asarray(step)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop, num)``: values evenly spaced on a log scale."""
    check_arraylike("logspace", start, stop, base)
    start, stop, base = as_operand(start), as_operand(stop), as_operand(base)
    dt = _inexact_of(start, stop) if dtype is None else _user_dtype(dtype)
    ct = dt if dtypes.is_inexact(dt) else _inexact_of(start, stop)
    exps = linspace(start, stop, num, endpoint, dtype=ct, axis=axis)
    base = convert(base, ct)
    if shape_of(base):
        base = _bcast(lax.expand_dims(base, (canonicalize_axis(axis, len(shape_of(exps))),)),
                      shape_of(exps))
    return _cast_result(lax.pow(base, exps), dt)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``num`` values from ``start`` to ``stop`` spaced evenly on a log scale (a geometric
    progression); both must have the same sign."""
    check_arraylike("geomspace", start, stop)
    start, stop = as_operand(start), as_operand(stop)
    dt = _inexact_of(start, stop) if dtype is None else _user_dtype(dtype)
    ct = dt if dtypes.is_inexact(dt) else _inexact_of(start, stop)
    start, stop = convert(start, ct), convert(stop, ct)
    sign = lax.sign(start)
    inv_ln10 = convert(1 / np.log(10), ct)
    lo = lax.mul(lax.log(lax.div(start, sign)), inv_ln10)
    hi = lax.mul(lax.log(lax.div(stop, sign)), inv_ln10)
    out = logspace(lo, hi, num, endpoint, 10.0, ct, axis)
    bshape = broadcast_shapes(shape_of(start), shape_of(stop))
    if bshape:
        ax = canonicalize_axis(axis, len(bshape) + 1)
        sign = _bcast(lax.expand_dims(_bcast(sign, bshape), (ax,)), shape_of(out))
    return _cast_result(lax.mul(sign, out), dt)


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy"):
    """Coordinate arrays from 1-D coordinate vectors (``indexing`` 'xy' swaps the first two
    output axes, as for plotting; 'ij' is matrix indexing)."""
    check_arraylike("meshgrid", *xi)
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    xs = [asarray(x) for x in xi]
    shapes = [shape_of(x) for x in xs]
    if any(len(s) != 1 for s in shapes):
        raise ValueError(f"Arguments to plax.numpy.meshgrid must be 1D, got shapes {shapes}")
    sizes = [s[0] for s in shapes]
    axes = list(range(len(xs)))
    if indexing == "xy" and len(xs) >= 2:
        axes[0], axes[1] = 1, 0
    out_shape = [0] * len(xs)
    for ax, n in zip(axes, sizes):
        out_shape[ax] = n
    outs = []
    for x, ax in zip(xs, axes):
        shape = [1] * len(xs) if sparse else list(out_shape)
        shape[ax] = out_shape[ax]
        outs.append(lax.broadcast_in_dim(x, tuple(shape), (ax,)))
    return outs


# --- triangles --------------------------------------------------------------------------
def _diagonal(k):
    return k if type(k) is DimExpr else operator.index(k)


def _tri_mask(n: int, m: int, k: int, lower: bool):
    """Boolean (n, m) mask: j <= i + k for the lower triangle, j >= i + k for the upper."""
    offset = lax.convert_element_type(dimension_as_value(k), np.int32) if type(k) is DimExpr \
        else np.int32(k)  # (a symbolic diagonal: its value, plax.export)
    rows = lax.add(lax.broadcasted_iota(np.int32, (n, m), 0), offset)
    cols = lax.broadcasted_iota(np.int32, (n, m), 1)
    return lax.ge(rows, cols) if lower else lax.le(rows, cols)


def tri(N, M=None, k: int = 0, dtype=None):
    """An (N, M) array with ones at and below the k-th diagonal."""
    M = N if M is None else M
    N, M = _canonical_shape((N, M))
    return lax.convert_element_type(_tri_mask(N, M, _diagonal(k), True), _default_dtype(dtype))


def _triangle(name: str, m, k, lower: bool):
    check_arraylike(name, m)
    m = asarray(m)
    aval = get_aval(m)
    if aval.ndim < 2:
        raise ValueError(f"Argument to plax.numpy.{name} must be at least 2D, got shape "
                         f"{aval.shape}.")
    n, cols = aval.shape[-2:]
    mask = _tri_mask(n, cols, _diagonal(k), lower)
    mask = lax.broadcast_in_dim(mask, aval.shape, (aval.ndim - 2, aval.ndim - 1))
    zero = lax.broadcast_in_dim(convert(0, aval.dtype, aval.weak_type), aval.shape, ())
    return lax.select(mask, m, zero)


def tril(m, k: int = 0):
    """``m`` with the elements above the k-th diagonal (of the last two axes) zeroed."""
    return _triangle("tril", m, k, lower=True)


def triu(m, k: int = 0):
    """``m`` with the elements below the k-th diagonal (of the last two axes) zeroed."""
    return _triangle("triu", m, k, lower=False)
