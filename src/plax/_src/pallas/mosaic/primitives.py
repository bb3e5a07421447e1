"""``jax._src.pallas.mosaic.primitives``: DMAs, roll, bitcast and the kernel PRNG
(``plax.pallas.dma``, ``plax.pallas.tpu_ops``, ``plax.experimental.pallas.tpu``)."""
from plax.experimental.pallas import tpu as _tpu
from plax.pallas import dma as _dma
from plax.pallas import tpu_ops as _tpu_ops

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _dma, _tpu_ops, _tpu)
