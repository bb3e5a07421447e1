"""``jax._src.scipy.special``: ``plax.scipy.special``."""
from plax.scipy import special as _public

from plax._src import _face

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
