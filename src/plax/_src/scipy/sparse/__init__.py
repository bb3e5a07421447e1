"""``jax._src.scipy.sparse``: ``linalg`` (plax.scipy.sparse.linalg)."""

from plax._src import _face

_SUBMODULES = (
    "linalg")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
