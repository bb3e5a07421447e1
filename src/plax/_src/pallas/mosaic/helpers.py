"""``jax._src.pallas.mosaic.helpers``: sync_copy, core_barrier, run_on_first_core
(``plax.experimental.pallas.tpu``)."""
from plax.experimental.pallas import tpu as _tpu

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _tpu)
