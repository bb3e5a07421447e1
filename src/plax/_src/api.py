"""``jax._src.api``: plax's public API (``plax``: jit, grad, vmap, device_put, ...)."""
import plax as _plax
from plax.api.jit import clear_backends, clear_caches  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _plax)
