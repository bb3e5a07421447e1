"""``jax._src.lax.utils``: helpers of lax's rules; plax's rules keep theirs private, but
the index dtype choice for a shape is answered here."""
import numpy as _np

from plax._src import _face
from plax.core.symbolic_shapes import DimExpr as _DimExpr

_REFUSED = dict.fromkeys(
    ("standard_primitive", "dtype_rule", "shape_rule"),
    "plax's rules build primitives in plax.first_order.common; it offers no helpers under "
    "these names")


def _default(signed: bool) -> _np.dtype:
    from plax._src.dtypes import default_int_dtype, default_uint_dtype
    return default_int_dtype() if signed else default_uint_dtype()


def int_dtype_for_dim(d, *, signed: bool) -> _np.dtype:
    """An integer dtype that holds the indices of a dimension of size ``d`` (the default
    integer dtype for a symbolic size)."""
    return int_dtype_for_shape((d,), signed=signed)


def int_dtype_for_shape(shape, *, signed: bool) -> _np.dtype:
    """An integer dtype that holds the indices of every dimension of ``shape``: 32 bits
    unless a size needs 64, and the default integer dtype when a size is symbolic."""
    limit = _np.iinfo(_np.int32 if signed else _np.uint32).max
    for d in shape:
        if isinstance(d, _DimExpr):
            return _default(signed)
        if d > limit:
            return _np.dtype(_np.int64 if signed else _np.uint64)
    return _np.dtype(_np.int32 if signed else _np.uint32)


__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
