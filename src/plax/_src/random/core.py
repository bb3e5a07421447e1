"""``jax._src.random.core``: helpers of plax's samplers (``plax.random``):
``_check_broadcast_shapes`` and ``_safe_int_to_float``."""
import numpy as _np

from plax import random as _public
from plax.random.discrete import _check_broadcast_shapes  # noqa: F401
from plax.random.distributions import _safe_int_to_float as _words_to_float

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)


def _safe_int_to_float(bits, dtype):
    """Two uint32 words per element (``bits[0]`` high, ``bits[1]`` low) as a float32 in
    (0, 1), keeping the low word's bits when the high word has leading zeros."""
    if _np.dtype(bits.dtype) != _np.uint32 or _np.dtype(dtype) != _np.float32:
        raise RuntimeError("_safe_int_to_float only works for u32 -> f32")
    return _words_to_float(bits)
