"""``jax._src.pallas.mosaic``: the TPU side of Pallas, faces over
``plax.experimental.pallas.tpu`` and the kernel primitives of ``plax.pallas``."""
from plax._src import _face

_SUBMODULES = ("core", "primitives", "helpers", "random", "pipeline", "error_handling")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES, _face.face_getattr(__name__, {}))
