"""``jax._src.numpy.error``: JAX's error checking of NumPy operations (NaNs, division by
zero, out-of-bounds indices); plax stores the ``jax_error_checking_behavior_*`` flags but
does not act on them."""
from plax._src import _face

_REFUSED = dict.fromkeys(
    ("error_checking_behavior", "_set_error_if_nan", "_set_error_if_divide_by_zero",
     "_set_error_if_with_category"),
    "plax does not check NumPy operations for errors (plax.experimental.checkify does)")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
