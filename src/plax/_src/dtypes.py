"""``jax._src.dtypes``: plax's dtype machinery (``plax.core.dtypes``: canonical dtypes, the
promotion lattice, extended dtypes) under JAX's private names. ml_dtypes' types (bfloat16,
the float8s, int4, ...) are loaded on first use."""
import numpy as _np

from plax.core import dtypes as _core
from plax.core.avals import canonicalize_dtype_handlers as _canonicalize_handlers
from plax.core.dtypes import (  # noqa: F401
    ExtendedDType, TypePromotionError, canonicalize_dtype, default_complex_dtype,
    default_float_dtype, default_int_dtype, dtype, extended, finfo, float0, iinfo,
    is_weakly_typed, issubdtype, itemsize_bits, primal_tangent_dtype, prng_key, promote_types,
    result_type, to_inexact_dtype)
from plax.core.dtypes import python_scalar_dtypes as python_scalar_types_to_dtypes  # noqa: F401
from plax.numpy.numeric import isdtype  # noqa: F401

DType = _np.dtype
bool_, int_, uint, float_, complex_ = _np.bool_, _np.int64, _np.uint64, _np.float64, _np.complex128
python_scalar_types = {bool, int, float, complex}
_weak_types = [int, float, complex]
_WEAK_TYPE_OF = {_core.WEAK_INT: int, _core.WEAK_FLOAT: float, _core.WEAK_COMPLEX: complex}


def __getattr__(name):
    if name in _core.ML_DTYPE_NAMES or name in _core.ML_SCALAR_ONLY_NAMES:
        return getattr(_core.ml_dtypes_module(), name)  # ml_dtypes' types, loaded on first use
    if name == "_jax_types":  # the strong types of the promotion lattice
        _core.ml_dtypes_module()
        return [n for n in _core._lattice(True) if not isinstance(n, _core._Weak)]
    raise AttributeError(f"module 'jax._src.dtypes' has no attribute {name!r}")


def default_uint_dtype() -> _np.dtype:
    return canonicalize_dtype(_np.uint64)


default_types = {"b": lambda: _np.dtype(bool), "i": default_int_dtype, "u": default_uint_dtype,
                 "f": default_float_dtype, "c": default_complex_dtype}


def to_numeric_dtype(dt) -> _np.dtype:
    """``dt``, with booleans computed in int32."""
    dt = _np.dtype(dt)
    return _np.dtype(_np.int32) if dt == _np.dtype(bool) else dt


def to_floating_dtype(dt) -> _np.dtype:
    """The real floating dtype ``dt`` computes in (a complex dtype's component type)."""
    return _np.dtype(finfo(to_inexact_dtype(dt)).dtype)


def to_complex_dtype(dt) -> _np.dtype:
    wide = to_inexact_dtype(dt) in (_np.dtype(_np.float64), _np.dtype(_np.complex128))
    return _np.dtype(_np.complex128 if wide else _np.complex64)


def supports_inf(dt) -> bool:
    """Whether floating-point ``dt`` has infinities (the ``float8_*fn`` kinds do not)."""
    if not issubdtype(dt, _np.inexact):
        return False
    with _np.errstate(all="ignore"):  # an infinity cast to a kind without them is a NaN
        return bool(_np.isinf(_np.array(_np.inf).astype(dt)))


def _jax_type(dt, weak_type: bool):
    """The lattice node of ``dt``: itself, or the Python type of its kind when weak."""
    if not weak_type or dt == _np.dtype(bool):
        return dt
    for kind, py_type in ((_np.complexfloating, complex), (_np.floating, float)):
        if issubdtype(dt, kind):
            return py_type
    return int


def _dtype_and_weaktype(value) -> tuple:
    return dtype(value), any(value is t for t in _weak_types) or is_weakly_typed(value)


def lattice_result_type(*args) -> tuple:
    """``(dtype, weak_type)`` where plax's promotion lattice joins ``args``."""
    nodes = tuple(dict.fromkeys(_core._node_of(a)[0] for a in args))
    node = nodes[0] if len(nodes) == 1 else _core._join(
        nodes, _core.x64_enabled(), _core._strict_promotion())
    if isinstance(node, _core._Weak):
        return canonicalize_dtype(_core._WEAK_DEFAULT[node]), True
    return node, False


def check_and_canonicalize_user_dtype(dt, fun_name=None) -> _np.dtype:
    """A dtype the user asked for, checked and canonicalised (Python types: the defaults)."""
    if dt is None:
        raise ValueError("dtype must be specified.")
    return _core.canonicalize_user_dtype(dt, fun_name=fun_name)


def canonicalize_value(x):
    """``x`` with a canonical dtype (host values converted by the type's handler)."""
    for t in type(x).__mro__:
        handler = _canonicalize_handlers.get(t)
        if handler is not None:
            return handler(x)
    if hasattr(x, "aval"):
        return x
    raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type.")


def safe_to_cast(input_dtype_or_value, output_dtype_or_value) -> bool:
    """Whether promotion keeps ``output``'s dtype when meeting ``input`` (a cast loses
    nothing by the lattice's rules)."""
    out = dtype(output_dtype_or_value)
    return dtype(input_dtype_or_value) == out or result_type(input_dtype_or_value, out) == out
