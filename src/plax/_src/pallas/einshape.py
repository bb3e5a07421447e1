"""``jax._src.pallas.einshape``: einshape equations as transforms (``plax.pallas.einshape``)."""
from plax.pallas import einshape as _einshape

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _einshape)
