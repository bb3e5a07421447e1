"""Per-dtype tolerances and the closeness checks of JAX's test utilities.

The tables hold JAX's figures: what values of each dtype may differ by when compared
(``default_tolerance()``; 0 for integers and booleans, 1e-6 for float32, ...) and in
derivative checks (``default_gradient_tolerance``). A tolerance given to a check is a
number (every dtype) or a dict from dtypes to numbers (the others keep their defaults).
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from plax import tree_util
from plax.core import dtypes as _dtypes
from plax.core.config import config

# ml_dtypes' floats NumPy cannot compare: compared as float32.
_CUSTOM_FLOATS = tuple(np.dtype(getattr(ml_dtypes, n)) for n in (
    "float4_e2m1fn", "float8_e8m0fnu", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "bfloat16"))
# ml_dtypes' narrow integers: compared as int8 or uint8.
_NARROW_INTS = tuple(np.dtype(getattr(ml_dtypes, n))
                     for n in ("int2", "uint2", "int4", "uint4", "int1", "uint1")
                     if hasattr(ml_dtypes, n))

_TOLERANCE_BY_NAME = {
    "bool": 0, "int8": 0, "int16": 0, "int32": 0, "int64": 0,
    "uint8": 0, "uint16": 0, "uint32": 0, "uint64": 0,
    "float4_e2m1fn": 1e0, "float8_e3m4": 1e-1, "float8_e4m3": 1e-1, "float8_e8m0fnu": 1e0,
    "float8_e4m3b11fnuz": 1e-1, "float8_e4m3fn": 1e-1, "float8_e4m3fnuz": 1e-1,
    "float8_e5m2": 1e-1, "float8_e5m2fnuz": 1e-1, "bfloat16": 1e-2, "float16": 1e-3,
    "float32": 1e-6, "float64": 1e-15, "complex64": 1e-6, "complex128": 1e-15,
}
_GRADIENT_TOLERANCE_BY_NAME = {
    "float4_e2m1fn": 1e0, "float8_e3m4": 1e-1, "float8_e4m3": 1e-1, "float8_e8m0fnu": 1e0,
    "float8_e4m3b11fnuz": 1e-1, "float8_e4m3fn": 1e-1, "float8_e4m3fnuz": 1e-1,
    "float8_e5m2": 1e-1, "float8_e5m2fnuz": 1e-1, "bfloat16": 1e-1, "float16": 1e-2,
    "float32": 2e-3, "float64": 1e-5, "complex64": 1e-3, "complex128": 1e-5,
}

_default_tolerance = {_dtypes.float0: 0, **{d: 0 for d in _NARROW_INTS},
                      **{_dtypes.np_dtype(n): v for n, v in _TOLERANCE_BY_NAME.items()}}
default_gradient_tolerance = {_dtypes.np_dtype(n): v
                              for n, v in _GRADIENT_TOLERANCE_BY_NAME.items()}


def default_tolerance() -> dict:
    """dtype -> the tolerance values of that dtype are compared with by default."""
    return _default_tolerance


# Python scalars' dtypes (before x64 narrows them).
_PYTHON_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64),
                         float: np.dtype(np.float64), complex: np.dtype(np.complex128)}
_NARROWED = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
             np.dtype(np.float64): np.dtype(np.float32),
             np.dtype(np.complex128): np.dtype(np.complex64)}


def _dtype(x):
    """``x``'s dtype: its ``.dtype``, a Python scalar's 64-bit one, else NumPy's."""
    if hasattr(x, "dtype"):
        return x.dtype
    found = _PYTHON_SCALAR_DTYPES.get(type(x))
    return found if found is not None else np.asarray(x).dtype


def canonicalize(dtype):
    """The dtype values of ``dtype`` have in plax: 64-bit types narrowed when x64 is off
    (an extended dtype, a PRNG key's, as it is)."""
    if isinstance(dtype, _dtypes.ExtendedDType):
        return dtype
    dtype = np.dtype(dtype)
    if not config.read("enable_x64"):
        return _NARROWED.get(dtype, dtype)
    return dtype


def is_python_scalar(x) -> bool:
    """A Python bool, int, float or complex (a NumPy scalar is not one)."""
    return not isinstance(x, np.generic) and isinstance(x, (bool, int, float, complex))


def tolerance(dtype, tol=None):
    """The tolerance for ``dtype``: ``tol`` itself when a number, else its entry for the
    (canonical) dtype, else the default."""
    if tol is None:
        tol = {}
    if not isinstance(tol, dict):
        return tol
    tol = {np.dtype(k): v for k, v in tol.items()}
    dtype = canonicalize(np.dtype(dtype))
    return tol.get(dtype, default_tolerance()[dtype])


def _normalize_tolerance(tol) -> dict:
    tol = tol or 0
    if isinstance(tol, dict):
        return {np.dtype(k): v for k, v in tol.items()}
    return dict.fromkeys(_default_tolerance, tol)


def join_tolerance(tol1, tol2) -> dict:
    """A dtype -> tolerance dict holding, per dtype, the larger of the two (a number stands
    for every dtype; None for 0)."""
    out = _normalize_tolerance(tol1)
    for k, v in _normalize_tolerance(tol2).items():
        out[k] = max(v, out.get(k, 0))
    return out


def _assert_numpy_allclose(a, b, atol=None, rtol=None, err_msg=""):
    """``np.testing.assert_allclose`` on two NumPy arrays, ml_dtypes' floats compared as
    float32 and narrow integers as 8-bit ones; float0 arrays must be equal. A tolerance of
    0 or None is NumPy's default."""
    if a.dtype == b.dtype == _dtypes.float0:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return

    def widen(x):
        if x.dtype in _CUSTOM_FLOATS:
            return x.astype(np.float32)
        if x.dtype in _NARROW_INTS:
            return x.astype(np.int8 if ml_dtypes.iinfo(x.dtype).min < 0 else np.uint8)
        return x
    kw = {}
    if atol:
        kw["atol"] = atol
    if rtol:
        kw["rtol"] = rtol
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(widen(a), widen(b), **kw, err_msg=err_msg)


def _assert_numpy_close(a, b, atol=None, rtol=None, err_msg=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    atol = max(tolerance(a.dtype, atol), tolerance(b.dtype, atol))
    rtol = max(tolerance(a.dtype, rtol), tolerance(b.dtype, rtol))
    _assert_numpy_allclose(a, b, atol=atol * a.size, rtol=rtol * b.size, err_msg=err_msg)


def check_close(xs, ys, atol=None, rtol=None, err_msg=""):
    """Every leaf of ``xs`` close to ``ys``'s, the tolerances scaled by the leaf's size."""
    tree_util.tree_map(functools.partial(_assert_numpy_close, atol=atol, rtol=rtol,
                                         err_msg=err_msg), xs, ys)


def check_eq(xs, ys, err_msg=""):
    """Every leaf of ``xs`` close to ``ys``'s with NumPy's default tolerances."""
    tree_util.tree_map(functools.partial(_assert_numpy_allclose, err_msg=err_msg), xs, ys)
