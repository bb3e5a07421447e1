"""plax.dtypes: dtype helpers (as ``jax.dtypes``); the machinery lives in ``plax.core.dtypes``."""
from __future__ import annotations

import numpy as np

from plax.core.dtypes import (  # noqa: F401
    ExtendedDType, TypePromotionError, canonicalize_dtype, extended, finfo, float0,
    iinfo, issubdtype, itemsize_bits, prng_key, result_type)
from plax.core import dtypes as _core


def __getattr__(name):
    if name == "bfloat16":  # ml_dtypes' type, imported on first use (see plax.core.dtypes)
        return _core.ml_dtypes_module().bfloat16
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def scalar_type_of(x) -> type:
    """The Python scalar type (bool, int, float or complex) that holds values like ``x``."""
    dt = _core.dtype(x)
    if dt == np.dtype(bool):
        return bool
    if _core.is_integer(dt):
        return int
    if _core.is_float(dt):
        return float
    if _core.is_complex(dt):
        return complex
    raise TypeError(f"scalar_type_of: no Python scalar type holds values of dtype {dt}.")


__all__ = ["ExtendedDType", "TypePromotionError", "bfloat16", "canonicalize_dtype", "extended",
           "finfo", "float0", "iinfo", "issubdtype", "itemsize_bits", "prng_key", "result_type",
           "scalar_type_of"]
