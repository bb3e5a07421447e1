"""``jax._src.pallas.mosaic.random``: the kernel PRNG and stateful samplers
(``plax.experimental.pallas._tpu_random``)."""
from plax.experimental.pallas import _tpu_random

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _tpu_random)
