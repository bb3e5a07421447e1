"""``jax._src.random.prng``: PRNG implementations and the typed-key primitives
(``plax.first_order.prng``); ``prngs`` the implementations by name (``plax.random.keys``).
``PRNGImpl`` takes JAX's arguments (``key_shape, seed, split, random_bits, fold_in, name,
tag``) and makes plax's implementation object."""
from plax.first_order import prng as _prng
from plax.first_order.prng import (random_bits, random_bits_p, random_clone,  # noqa: F401
                                   random_clone_p, random_fold_in, random_fold_in_p,
                                   random_seed, random_seed_p, random_split, random_split_p,
                                   random_unwrap, random_unwrap_p, random_wrap, random_wrap_p,
                                   threefry2x32_p)
from plax.random.keys import _IMPLS as prngs  # noqa: F401
from plax.random.keys import impl_from_key_functions
from plax.random.keys import register_impl as register_prng  # noqa: F401
from plax.random.rbg import rbg_prng_impl, unsafe_rbg_prng_impl  # noqa: F401
from plax.random.threefry import threefry_prng_impl  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _prng)


class PRNGImpl(_prng.PRNGImpl):
    """plax's PRNG implementation, made with JAX's argument order and defaults from functions
    on one key's data (arrays of keys map them with ``vmap``, as in JAX)."""

    def __init__(self, key_shape, seed, split, random_bits, fold_in, name="<unnamed>",
                 tag="?"):
        made = impl_from_key_functions(name, tag, key_shape, seed, split, random_bits, fold_in)
        super().__init__(name, tag, made.key_shape, seed=made.seed, split=made.split,
                         fold_in=made.fold_in, random_bits=made.random_bits)


def seed_with_impl(impl, seed):
    """Typed keys of ``impl`` seeded with ``seed``."""
    return random_seed(seed, impl)
