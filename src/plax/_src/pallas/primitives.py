"""``jax._src.pallas.primitives``: what kernels call (``program_id``, ``num_programs``,
``multiple_of``, ...), from ``plax.experimental.pallas``, and the masked ``load``, ``swap``
and ``store`` (``plax.experimental.pallas.helpers``)."""
from plax.experimental import pallas as _pallas
from plax.experimental.pallas import helpers as _helpers

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _pallas, _helpers)
