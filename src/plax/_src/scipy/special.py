"""``jax._src.scipy.special``: ``plax.scipy.special``."""
from plax.scipy import special as _public

from plax._src import _face

_REFUSED = {"_xlogx": "plax computes x log x inside entr (plax.scipy.special) with no "
                      "function of its own"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
