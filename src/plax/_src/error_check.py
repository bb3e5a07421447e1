"""``jax._src.error_check``: JAX's error values set inside jitted code and raised outside;
plax's counterpart is ``plax.experimental.checkify``."""
from plax._src import _face

_REFUSED = dict.fromkeys(("JaxValueError", "raise_if_error", "set_error_if",
                          "error_checking_context"),
                         "plax checks errors with plax.experimental.checkify; it keeps no "
                         "error state to raise from later")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
