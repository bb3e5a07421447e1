"""``jax._src.random.threefry2x32``: the threefry PRNG (``plax.random.threefry``, the hash
``threefry2x32_p`` of ``plax.first_order.prng``)."""
from plax.first_order.prng import threefry2x32, threefry2x32_p  # noqa: F401
from plax.random import threefry as _threefry
from plax.random.threefry import (threefry_2x32, threefry_fold_in,  # noqa: F401
                                  threefry_prng_impl, threefry_random_bits, threefry_seed,
                                  threefry_split)

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _threefry)
