"""``jax._src.lax.lax``: plax's lax operations (``plax.lax``) with JAX's private helpers
``_convert_element_type`` (keeping a weak type), ``_delta`` and ``remaining``."""
import numpy as _np

from plax import lax as _public
from plax.core import dtypes as _dtypes
from plax.experimental.sparse.bcoo import remaining  # noqa: F401
from plax.first_order.conversion import convert_with_weak_type as _convert

from plax._src import _face

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)


def _convert_element_type(operand, new_dtype=None, weak_type=False, sharding=None,
                          warn_on_complex_to_real_cast=True):
    """``operand`` converted to ``new_dtype`` (its own by default; canonicalized, so float
    is float32 without x64), weakly typed or not."""
    del sharding, warn_on_complex_to_real_cast
    return _convert(operand, _dtypes.dtype(operand) if new_dtype is None
                    else _dtypes.canonicalize_dtype(new_dtype), weak_type)


def _delta(dtype, shape, axes):
    """The Kronecker delta over ``axes`` of ``shape`` in ``dtype``: 1 where the indices along
    all of ``axes`` are equal, else 0 (constant along the other axes)."""
    shape, axes = tuple(shape), tuple(int(a) for a in axes)
    base = tuple(shape[a] for a in axes)
    index = [_public.broadcasted_iota(_np.int32, base, i) for i in range(len(base))]
    same = _public.full(base, True, _np.bool_)
    for other in index[1:]:
        same = _public.bitwise_and(same, _public.eq(index[0], other))
    out = _public.convert_element_type(same, _dtypes.canonicalize_dtype(dtype))
    return _public.broadcast_in_dim(out, shape, axes)
