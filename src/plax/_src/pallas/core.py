"""``jax._src.pallas.core``: block specs, grid specs and memory spaces
(``plax.experimental.pallas.core``)."""
from plax.experimental.pallas import core as _core
from plax.higher_order import pallas_call as _call

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _core, _call)
