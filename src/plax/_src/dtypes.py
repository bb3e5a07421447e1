"""``jax._src.dtypes``: plax's dtype machinery (``plax.core.dtypes``) under JAX's names."""
import numpy as _np

from plax.core.dtypes import (  # noqa: F401
    ExtendedDType, TypePromotionError, canonicalize_dtype, dtype, extended, finfo,
    float0, iinfo, is_weakly_typed, issubdtype, primal_tangent_dtype, promote_types, result_type)

from plax.core import dtypes as _core

DType = _np.dtype


def __getattr__(name):
    if name in _core.ML_DTYPE_NAMES:  # ml_dtypes' types, imported on first use
        return getattr(_core.ml_dtypes_module(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def supports_inf(dtype) -> bool:
    """Whether floating-point ``dtype`` has infinities (the ``float8_*fn`` kinds do not)."""
    if not issubdtype(dtype, _np.inexact):
        return False
    with _np.errstate(all="ignore"):  # an infinity cast to a kind without them is a NaN
        return bool(_np.isinf(_np.array(_np.inf).astype(dtype)))
