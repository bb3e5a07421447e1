"""Operators and NumPy-style methods for plax.Array and for tracers.

Both classes get the same methods, so code behaves alike inside and outside
transformations. Each method forwards to the plax.numpy function of its name; a
tracer's forwards to that function's traced form (``_traced_form``: the Python function
behind a compiled eager form), since its operand is traced by definition.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import has_array_protocol
from plax.core.refs import AbstractRef
from plax.core.trace import Tracer
from plax.first_order import state
from plax.runtime.array import ARRAY_TYPES, Array, ArrayImpl, KeyArray


_jnp_module = []


def _jnp():
    if not _jnp_module:
        import plax.numpy as jnp
        _jnp_module.append(jnp)
    return _jnp_module[0]


def _is_operand(x) -> bool:
    return isinstance(x, (ARRAY_TYPES, np.ndarray, np.generic, bool, int, float, complex)) or \
        has_array_protocol(x)


_OPERAND_TYPES = frozenset((ArrayImpl, KeyArray, float, int, bool, complex, np.ndarray))


def _lookup(name: str, traced: bool):
    """The plax.numpy function ``name``; for a tracer's methods (``traced``), its traced form."""
    f = getattr(_jnp(), name)
    return getattr(f, "_traced_form", f) if traced else f


def _binop(name: str, reverse: bool = False, traced: bool = False):
    fn = []  # looked up on first use

    def method(self, other):
        if type(other) not in _OPERAND_TYPES and not isinstance(other, Tracer) \
                and not _is_operand(other):
            return NotImplemented
        if not fn:
            fn.append(_lookup(name, traced))
        return fn[0](other, self) if reverse else fn[0](self, other)
    method.__name__ = f"__{'r' if reverse else ''}{name}__"
    return method


def _unop(name: str, traced: bool = False):
    fn = []

    def method(self):
        if not fn:
            fn.append(_lookup(name, traced))
        return fn[0](self)
    return method


def _forward(name: str, traced: bool = False):
    fn = []

    def method(self, *args, **kwargs):
        if not fn:
            fn.append(_lookup(name, traced))
        return fn[0](self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"Same as plax.numpy.{name}(self, ...)."
    return method


_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "divmod": "divmod", "pow": "power",
    "matmul": "matmul", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}
_METHODS = ["reshape", "transpose", "ravel", "flatten", "squeeze", "swapaxes", "sum", "prod",
            "mean", "var", "std", "max", "min", "argmax", "argmin", "all", "any", "cumsum",
            "cumprod", "clip", "conj", "conjugate", "dot", "round", "sort", "argsort", "trace",
            "diagonal", "repeat", "take", "nonzero", "ptp", "searchsorted", "argpartition",
            "choose"]


def _compress(self, condition, axis=None, **kwargs):
    """Same as plax.numpy.compress(condition, self, axis, ...)."""
    return _jnp().compress(condition, self, axis, **kwargs)


def _reshape(self, *args, order="C", out_sharding=None):
    """Same as plax.numpy.reshape(self, shape); the shape may also be given as separate ints,
    and none at all means shape ``()`` (a size-1 array to a scalar)."""
    shape = args[0] if len(args) == 1 else args
    return _jnp().shape_ops.reshape_to(self, shape, order, out_sharding)


def _transpose(self, *axes):
    """Same as plax.numpy.transpose(self, axes); the axes may also be given as separate ints."""
    return _jnp().transpose(self, axes[0] if len(axes) == 1 else (axes or None))


def _flatten(self, order="C"):
    """A flattened copy of the array (same as plax.numpy.ravel)."""
    return _jnp().ravel(self, order=order)


def _astype(self, dtype, copy: bool = False, device=None):
    """A copy of the array cast to ``dtype`` (same as plax.numpy.astype)."""
    return _jnp().astype(self, dtype, copy=copy, device=device)


def _view(self, dtype=None, type=None):
    """The same bits read as ``dtype`` (NumPy's ``ndarray.view``): with a different item
    size the last axis shrinks or grows by the ratio, as in NumPy."""
    from plax.core import dtypes
    from plax.first_order import conversion
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    if dtype is None:
        return self
    want = dtypes.canonicalize_user_dtype(dtype, "dtype")
    x, have = self, np.dtype(self.dtype)
    if want == have:
        return x
    if have == np.bool_:  # bools are bytes here, as in NumPy
        x, have = conversion.convert_element_type(x, np.uint8), np.dtype(np.uint8)
    target = np.dtype(np.uint8) if want == np.bool_ else want
    big, small = have.itemsize, target.itemsize
    if big != small and x.ndim == 0:
        raise ValueError("view() of a 0d array is only supported if the itemsize is "
                         f"unchanged ({have} has {big} bytes, {want} {small}).")
    if big > small:  # each element becomes several: they join the last axis
        out = conversion.bitcast_convert_type(x, target)
        out = _jnp().reshape(out, x.shape[:-1] + (x.shape[-1] * (big // small),))
    elif big < small:  # several elements become one: the last axis must divide
        ratio = small // big
        if x.shape[-1] % ratio:
            raise ValueError("When changing to a larger dtype, its size must be a divisor of "
                             f"the total size in bytes of the last axis of the array: shape "
                             f"{x.shape} of {have} cannot be viewed as {want}.")
        out = conversion.bitcast_convert_type(
            _jnp().reshape(x, x.shape[:-1] + (x.shape[-1] // ratio, ratio)), target)
    else:
        out = conversion.bitcast_convert_type(x, target)
    return conversion.convert_element_type(out, np.bool_) if want == np.bool_ else out


def _to_device(self, device, *, stream=None):
    """This array on ``device`` (a Device or Sharding), committed there (Array API)."""
    if stream is not None:
        raise NotImplementedError("to_device(stream=...) is not supported.")
    from plax.api.devices import device_put
    return device_put(self, device)


def _contains(self, value):
    return bool(_jnp().any(_jnp().equal(self, value)))


def _array_namespace(self, *, api_version=None):
    """plax.numpy: the Array API namespace of plax arrays."""
    if api_version is not None and api_version != "2024.12":
        raise ValueError(f"{api_version=!r} is not available; available versions are: "
                         "['2024.12']")
    return _jnp()


def _setitem(self, idx, value):
    raise TypeError("JAX arrays are immutable and do not support in-place item assignment: "
                    f"{type(self).__name__} values cannot be changed in place. Instead of "
                    "x[idx] = y, use x = x.at[idx].set(y) (or another .at[] method).")


def _matrix_transpose(self):
    from plax.first_order.shapes import transpose
    if self.ndim < 2:
        raise ValueError(f"x.mT requires ndim >= 2, got ndim={self.ndim}")
    perm = tuple(range(self.ndim - 2)) + (self.ndim - 1, self.ndim - 2)
    return transpose(self, perm)


def _getitem(self, idx):
    return _jnp().indexing.rewriting_take(self, idx)


def _at(self):
    """``x.at[idx].set(y)`` and friends: functional index updates (see plax.numpy.indexing)."""
    from plax.numpy.indexing import IndexUpdateHelper
    return IndexUpdateHelper(self)


def _round_dunder(self, ndigits=None):
    if ndigits is None:
        return round(self.item()) if self.ndim == 0 and not isinstance(self, Tracer) else \
            _jnp().round(self)
    return _jnp().round(self, ndigits)


def _len(self):
    if self.ndim == 0:
        raise TypeError("len() of unsized object")
    return self.shape[0]


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))


def _install(cls, traced: bool = False) -> None:
    for dunder, fn in _BINARY.items():
        setattr(cls, f"__{dunder}__", _binop(fn, traced=traced))
        setattr(cls, f"__r{dunder}__", _binop(fn, reverse=True, traced=traced))
    for dunder, fn in _COMPARE.items():
        setattr(cls, f"__{dunder}__", _binop(fn, traced=traced))
    for dunder, fn in _UNARY.items():
        setattr(cls, f"__{dunder}__", _unop(fn, traced))
    for name in _METHODS:
        setattr(cls, name, _forward(name, traced))
    cls.astype = _astype
    cls.reshape, cls.transpose, cls.flatten = _reshape, _transpose, _flatten
    cls.T = property(lambda self: _jnp().transpose(self))
    cls.mT = property(_matrix_transpose)
    cls.real = property(lambda self: _jnp().real(self))
    cls.imag = property(lambda self: _jnp().imag(self))
    cls.__getitem__ = _getitem
    cls.__setitem__ = _setitem
    cls.at = property(_at)
    cls.__len__ = _len
    cls.__iter__ = _iter
    cls.__round__ = _round_dunder
    cls.copy = lambda self: _jnp().array(self, copy=True)
    cls.compress = _compress
    cls.view = _view
    cls.to_device = _to_device
    cls.__contains__ = _contains
    cls.__array_namespace__ = _array_namespace


_install(ArrayImpl)
_install(KeyArray)
_install(Tracer, traced=True)


# A tracer of a reference (its type an AbstractRef: a jaxpr's Ref variable) is read, written,
# viewed and reshaped with the state primitives (plax.first_order.state).
def _ref_aware(array_method, ref_method):
    def method(self, *args, **kwargs):
        if isinstance(self.aval, AbstractRef):
            return ref_method(self, *args, **kwargs)
        return array_method(self, *args, **kwargs)
    method.__name__, method.__doc__ = array_method.__name__, array_method.__doc__
    return method


Tracer.__getitem__ = _ref_aware(_getitem, state.ref_get)
Tracer.__setitem__ = _ref_aware(_setitem, state.ref_set)
Tracer.reshape = _ref_aware(_reshape, lambda self, *shape, **_: state.reshape_ref(self, *shape))
Tracer.at = property(_ref_aware(_at, state.RefIndexer))


def _ref_bitcast(self):
    if not isinstance(self.aval, AbstractRef):  # (arrays have no such method)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute 'bitcast'")
    return lambda dtype: state.bitcast_ref(self, dtype)


Tracer.bitcast = property(_ref_bitcast)
# plax.Array, the base class, carries the same methods, as jax.Array does (a Mock with
# spec=jax.Array, and protocol checks, read them off the class); its own
# __array_namespace__ (refusing a user's subclass) stays.
_namespace = Array.__array_namespace__
_install(Array)
Array.__array_namespace__ = _namespace
# A traced value copied (copy.copy, copy.deepcopy, dataclasses.astuple) is a traced copy, as
# in JAX; without these, deepcopy would reduce it through NumPy and fail.
Tracer.__copy__ = lambda self: self.copy()
Tracer.__deepcopy__ = lambda self, memo: self.copy()
