"""``jax._src.tpu.linalg``: ``qdwh`` and ``svd``, plax's algorithms for TPUs in lax ops
(``plax.lax.linalg.qdwh``, ``plax.lax.linalg.svd_qdwh``), which run on any platform."""

from plax._src import _face

_SUBMODULES = (
    "qdwh", "svd")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
