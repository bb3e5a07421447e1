"""``jax._src.pallas.mosaic.primitives``: DMAs, roll, bitcast and the kernel PRNG
(``plax.pallas.dma``, ``plax.pallas.tpu_ops``, ``plax.experimental.pallas.tpu``,
``plax.pallas.tpu_prng``: ``split_key_p``/``join_key_p`` are its ``prng_split_p`` and
``prng_join_p``)."""
from plax.experimental.pallas import _tpu_random
from plax.experimental.pallas import tpu as _tpu
from plax.pallas import dma as _dma
from plax.pallas import tpu_ops as _tpu_ops
from plax.pallas import tpu_prng as _tpu_prng

from plax._src import _face

split_key_p = _tpu_prng.prng_split_p
join_key_p = _tpu_prng.prng_join_p
unwrap_pallas_seed = _tpu_random.unwrap_pallas_seed
wrap_pallas_seed = _tpu_random.wrap_pallas_seed

__getattr__ = _face.face_getattr(__name__, {}, _dma, _tpu_ops, _tpu, _tpu_prng)
