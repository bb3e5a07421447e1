"""``jax._src.export``: symbolic shapes by JAX's private modules (``shape_poly``,
``shape_poly_decision``)."""

from plax._src import _face

_SUBMODULES = (
    "shape_poly", "shape_poly_decision")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
