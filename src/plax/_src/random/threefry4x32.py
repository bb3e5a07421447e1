"""``jax._src.random.threefry4x32``: the Threefry-4x32 hash ``threefry4x32_p``
(``plax.first_order.counter_hashes``) and its PRNG ``threefry4x32_prng_impl``
(keys ``key<fry4>``, ``plax.random.counter_prngs``)."""
from plax.first_order.counter_hashes import threefry4x32_p  # noqa: F401
from plax.random.counter_prngs import threefry4x32_prng_impl  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {})
