"""``jax._src.pallas.mosaic.core``: TPU memory spaces, semaphore types, compiler parameters
and grid specs (``plax.experimental.pallas.tpu``, ``plax.pallas.semaphores``)."""
from plax.experimental.pallas import tpu as _tpu
from plax.pallas import semaphores as _semaphores

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _tpu, _semaphores)
