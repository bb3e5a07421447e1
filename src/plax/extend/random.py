"""``plax.extend.random``: PRNG implementations as objects (JAX's ``jax.extend.random``).

``threefry_prng_impl``, ``rbg_prng_impl`` and ``unsafe_rbg_prng_impl`` are the ones behind
``random.key(..., impl=...)``; ``define_prng_impl`` makes a new one from functions on a
single key's uint32 data (plax maps them over arrays of keys with ``vmap``), usable wherever
``impl=`` is taken. ``threefry2x32_p`` and ``threefry_2x32`` are the Threefry hash.
"""
from __future__ import annotations

import math

import numpy as np

from plax.api.jit import jit
from plax.core.trace import get_aval
from plax.first_order import shapes as _shapes
from plax.first_order import prng as _prng
from plax.first_order.prng import PRNGImpl, threefry2x32_p
from plax.random import threefry as _threefry
from plax.random.keys import PRNGSpec, _resolve_impl, impl_from_key_functions, key as _key
from plax.random.rbg import rbg_prng_impl, unsafe_rbg_prng_impl
from plax.random.threefry import threefry_prng_impl
from plax.runtime.dispatch import array_from_host

__all__ = ["define_prng_impl", "random_seed", "rbg_prng_impl", "seed_with_impl",
           "threefry2x32_p", "threefry_2x32", "threefry_prng_impl", "unsafe_rbg_prng_impl"]


def define_prng_impl(*, key_shape, seed, split, random_bits, fold_in, name: str = "<unnamed>",
                     tag: str = "?"):
    """A new PRNG implementation from functions on one key's uint32 data (of ``key_shape``):
    ``seed(seed) -> key``, ``split(key, shape) -> keys`` (``shape + key_shape``),
    ``random_bits(key, bit_width, shape) -> bits`` and ``fold_in(key, data) -> key``. Pass
    the result as ``impl=`` to ``random.key``, ``wrap_key_data``, ... ."""
    return PRNGSpec(impl_from_key_functions(name, tag, key_shape, seed, split, random_bits,
                                            fold_in))


def seed_with_impl(impl, seed):
    """A typed key of ``impl`` (a PRNGImpl, a spec, or its name) from an integer seed."""
    return _key(seed, impl=impl)


def random_seed(seeds, impl):
    """Typed keys of ``impl``, one per integer of ``seeds`` (an int or an integer array)."""
    if not hasattr(seeds, "aval"):
        seeds = array_from_host(np.asarray(seeds))
    return _prng.random_seed(seeds, _resolve_impl(impl))


@jit
def _hash(keypair, count):
    flat = _shapes.reshape(count, (math.prod(get_aval(count).shape),))
    return _shapes.reshape(_threefry.threefry_2x32(keypair, flat), get_aval(count).shape)


def threefry_2x32(keypair, count):
    """The Threefry-2x32 hash of the uint32 array ``count`` (of any shape) under the key
    ``keypair`` (two uint32 words), as JAX's original counter layout uses it: the counters,
    flattened and padded to an even length, hashed as two halves. Same shape as ``count``."""
    k1, k2 = keypair
    args = [x if hasattr(x, "aval") else array_from_host(np.asarray(x)) for x in (k1, k2, count)]
    dtypes = [get_aval(a).dtype for a in args]
    if any(d != np.uint32 for d in dtypes):
        raise TypeError(f"threefry_2x32 requires uint32 arguments, got {dtypes}")
    if any(get_aval(a).shape != () for a in args[:2]):
        raise TypeError("threefry_2x32 takes a key of two uint32 scalars, got shapes "
                        f"{[get_aval(a).shape for a in args[:2]]}.")
    pair = _shapes.concatenate([_shapes.reshape(a, (1,)) for a in args[:2]], 0)
    if math.prod(get_aval(args[2]).shape) == 0:
        return args[2]
    return _hash(pair, args[2])
