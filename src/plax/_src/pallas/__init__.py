"""``jax._src.pallas``: Pallas's private modules, faces over ``plax.experimental.pallas``
(``core``, ``cost_estimate``, ``pallas_call``, ``primitives``) and our own test helpers
(``pallas_test_util``)."""
from plax._src import _face

_SUBMODULES = ("core", "cost_estimate", "pallas_call", "primitives", "pallas_test_util",
               "mosaic", "einshape")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES, _face.face_getattr(__name__, {}))
