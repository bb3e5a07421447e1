"""Threefry-2x32 random bits from a Pallas kernel, as
``jax.experimental.pallas.ops.tpu.random.threefry``. Importing it registers the PRNG
implementation ``"pallas_threefry2x32"``: keys, splits and fold-ins are ``"threefry2x32"``'s,
and its bits equal ``"threefry2x32"``'s under ``jax_threefry_partitionable`` (each element the
hash of its flat index), computed in 256 x 256 blocks by the kernel."""
from __future__ import annotations

from collections.abc import Sequence

import plax.numpy as jnp
from plax._src.random import prng
from plax._src.random import threefry2x32 as _threefry
from plax.experimental.pallas.ops.tpu.random import prng_utils

__all__ = ["BLOCK_SIZE", "Shape", "threefry_2x32_count", "plthreefry_random_bits",
           "plthreefry_prng_impl"]

Shape = Sequence[int]

BLOCK_SIZE = (256, 256)

# The rotation distances of Threefry-2x32's rounds (four per key injection, two alternating
# sets) and the constant the third key word is derived with.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = 0x1BD11BDA


def _rotate_left(x, distance: int):
    return (x << jnp.uint32(distance)) | (x >> jnp.uint32(32 - distance))


def _threefry_words(k1, k2, x1, x2):
    """Threefry-2x32 (20 rounds) of the counters ``(x1, x2)`` under the key ``(k1, k2)``,
    in uint32 arithmetic that a kernel lowers."""
    keys = (k1, k2, k1 ^ k2 ^ jnp.uint32(_KEY_PARITY))
    x1, x2 = x1 + keys[0], x2 + keys[1]
    for injection in range(1, 6):
        for distance in _ROTATIONS[(injection - 1) % 2]:
            x1 = x1 + x2
            x2 = _rotate_left(x2, distance) ^ x1
        x1 = x1 + keys[injection % 3]
        x2 = x2 + keys[(injection + 1) % 3] + jnp.uint32(injection)
    return x1, x2


def _hash_block(k1, k2, counters):
    return _threefry_words(k1, k2, jnp.zeros_like(counters), counters)


def threefry_2x32_count(key, shape: Shape, unpadded_shape: Shape, block_size: tuple[int, int]):
    """uint32 bits of ``shape`` (a multiple of ``block_size`` in its last two dimensions):
    each element the Threefry-2x32 hash, under ``key`` (two uint32 words), of its flat index
    in ``unpadded_shape`` (the words xor-ed), generated blockwise by a kernel."""
    return prng_utils._hash_counters_call(_hash_block, key, shape, unpadded_shape,
                                          tuple(block_size))


def plthreefry_random_bits(key, bit_width: int, shape: Shape):
    """``"pallas_threefry2x32"``'s random bits: 32-bit only, any shape (padded to blocks)."""
    if bit_width != 32:
        raise ValueError(f"Only 32-bit PRNG supported (got bit_width={bit_width}).")
    return prng_utils._padded_to_blocks(
        lambda padded, unpadded: threefry_2x32_count(key, padded, unpadded, BLOCK_SIZE),
        shape, BLOCK_SIZE)


plthreefry_prng_impl = prng.PRNGImpl(
    key_shape=(2,), seed=_threefry.threefry_seed, split=_threefry.threefry_split,
    random_bits=plthreefry_random_bits, fold_in=_threefry.threefry_fold_in,
    name="pallas_threefry2x32", tag="plfry")

prng.register_prng(plthreefry_prng_impl)
