"""``jax._src.tpu``: the TPU algorithms of lax.linalg (``linalg.qdwh``, ``linalg.svd``)."""

from plax._src import _face

_SUBMODULES = (
    "linalg")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
