"""``jax._src.random.rbg``: the rbg and unsafe_rbg PRNGs (``plax.random.rbg``)."""
from plax.random import rbg as _rbg
from plax.random.rbg import rbg_prng_impl, unsafe_rbg_prng_impl  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _rbg)
