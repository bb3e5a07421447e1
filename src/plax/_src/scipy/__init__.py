"""``jax._src.scipy``: plax's SciPy API by JAX's private modules (``special``,
``sparse.linalg``)."""

from plax._src import _face

_SUBMODULES = (
    "special", "sparse")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
