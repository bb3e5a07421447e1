"""``jax._src.numpy``: plax's NumPy API by JAX's private modules: ``util``, ``fft``,
``indexing``, ``hijax``, ``error``."""

from plax._src import _face

_SUBMODULES = (
    "util", "fft", "indexing", "hijax", "error")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
