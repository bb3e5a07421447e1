"""``jax._src.dtypes``: plax's dtype machinery (``plax.core.dtypes``) under JAX's names."""
import numpy as _np

from plax.core.dtypes import (  # noqa: F401
    ExtendedDType, TypePromotionError, bfloat16, canonicalize_dtype, dtype, extended, finfo,
    float0, iinfo, is_weakly_typed, issubdtype, promote_types, result_type)

DType = _np.dtype


def supports_inf(dtype) -> bool:
    """Whether floating-point ``dtype`` has infinities (the ``float8_*fn`` kinds do not)."""
    if not issubdtype(dtype, _np.inexact):
        return False
    with _np.errstate(all="ignore"):  # an infinity cast to a kind without them is a NaN
        return bool(_np.isinf(_np.array(_np.inf).astype(dtype)))
