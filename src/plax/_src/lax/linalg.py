"""``jax._src.lax.linalg``: plax's ``plax.lax.linalg`` (its primitives and functions)."""
from plax.lax import linalg as _public

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)
