"""``jax._src.dtypes``: plax's dtype machinery (``plax.core.dtypes``: canonical dtypes, the
promotion lattice, extended dtypes) under JAX's private names. ml_dtypes' types (bfloat16,
the float8s, int4, ...) are loaded on first use."""
import warnings as _warnings

import numpy as _np

from plax.core import dtypes as _core
from plax.core.config import config as _config
from plax.core.avals import canonicalize_dtype_handlers as _canonicalize_handlers
from plax.core.dtypes import (  # noqa: F401
    ExtendedDType, TypePromotionError, default_complex_dtype, default_float_dtype,
    default_int_dtype, extended, finfo, float0, iinfo, is_weakly_typed, issubdtype,
    itemsize_bits, primal_tangent_dtype, prng_key, promote_types, to_inexact_dtype)
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


def canonicalize_dtype(dt, allow_extended_dtype: bool = False):
    """``dt`` as arrays hold it (64-bit types narrowed when x64 is off); the scalar-only
    ml_dtypes types (float6_*, int1, uint1) are dtypes too, and are their own."""
    if not isinstance(dt, ExtendedDType):
        np_dt = _core.np_dtype(dt)
        if np_dt.name in _core.ML_SCALAR_ONLY_NAMES:
            return np_dt
    return _core.canonicalize_dtype(dt)


def _is_jax_dtype(dt) -> bool:
    return (isinstance(dt, ExtendedDType) or dt in _core.supported_dtypes or dt == float0
            or dt in _core.scalar_only_dtypes)


def _explicit(dt, fun_name: str):
    """An explicitly requested dtype as ``jax_explicit_x64_dtypes`` says: kept ('allow' or
    with x64 on), narrowed with a warning ('warn') or refused ('error')."""
    mode = _config.read("explicit_x64_dtypes")
    if mode == "allow" or _core.x64_enabled():
        return dt
    canon = canonicalize_dtype(dt)
    if canon == dt:
        return dt
    where = f" requested in {fun_name}" if fun_name else ""
    if mode == "error":
        raise ValueError(f"Explicitly requested dtype {dt}{where} is not available. To enable "
                         "more dtypes, set the jax_enable_x64 or jax_explicit_x64_dtypes "
                         "configuration options.")
    _warnings.warn(f"Explicitly requested dtype {dt}{where} is not available, and will be "
                   f"truncated to dtype {canon.name}. To enable more dtypes, set the "
                   "jax_enable_x64 configuration option or the JAX_ENABLE_X64 shell "
                   "environment variable.", UserWarning, stacklevel=3)
    return canon


def dtype(x):
    """The dtype of a value or type, as JAX's ``dtypes.dtype`` gives it: Python scalars and
    their types give the canonical defaults, NumPy types and dtype names are explicit
    requests (see ``_explicit``), values carrying an aval (arrays, typed literals) keep
    their dtype, and other values are canonicalised."""
    if x is None:
        raise ValueError(f"Invalid argument to dtype: {x}.")
    if isinstance(x, type):
        if x in python_scalar_types_to_dtypes:
            return canonicalize_dtype(python_scalar_types_to_dtypes[x])
        if issubclass(x, _np.generic):
            return _explicit(_np.dtype(x), "dtype")
    elif type(x) in python_scalar_types_to_dtypes:
        return canonicalize_dtype(python_scalar_types_to_dtypes[type(x)])
    elif hasattr(x, "aval") and hasattr(x, "dtype"):
        return x.dtype
    if isinstance(x, (str, _np.dtype)):
        dt = _core.np_dtype(x)
        if not _is_jax_dtype(dt):
            raise TypeError(f"Value '{x}' with dtype {dt} is not a valid JAX array type. "
                            "Only arrays of numeric types are supported by JAX.")
        return _explicit(dt, "dtype")
    dt = getattr(x, "dtype", None)
    if not isinstance(dt, (_np.dtype, ExtendedDType)):
        try:
            dt = _np.result_type(x)
        except TypeError as err:
            raise TypeError(f"Cannot determine dtype of {x}") from err
    if not _is_jax_dtype(dt):
        raise TypeError(f"Value '{x}' with dtype {dt} is not a valid JAX array type. "
                        "Only arrays of numeric types are supported by JAX.")
    return canonicalize_dtype(dt)


def result_type(*args, return_weak_type_flag: bool = False):
    """plax's promotion of ``args`` (values or dtypes); ``None`` stands for the default float
    dtype, as ``np.result_type(None)`` is float64."""
    args = tuple(default_float_dtype() if a is None else a for a in args)
    return _core.result_type(*args, return_weak_type_flag=return_weak_type_flag)


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
    return _core.lattice_result(*args)


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
