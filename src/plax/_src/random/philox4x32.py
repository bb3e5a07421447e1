"""``jax._src.random.philox4x32``: the Philox-4x32 hash ``philox4x32_p``
(``plax.first_order.counter_hashes``) and its PRNG ``philox4x32_prng_impl``
(keys ``key<phx4>``, ``plax.random.counter_prngs``)."""
from plax.first_order.counter_hashes import philox4x32_p  # noqa: F401
from plax.random.counter_prngs import philox4x32_prng_impl  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {})
