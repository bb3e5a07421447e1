"""Philox-4x32 random bits from a Pallas kernel, as
``jax.experimental.pallas.ops.tpu.random.philox``. Importing it registers the PRNG
implementation ``"pallas_philox4x32"``: a key is two uint32 words (seeded as
``"threefry2x32"`` seeds), and every bit, split and fold-in is Philox-4x32-10 (Salmon et al.,
"Parallel Random Numbers: As Easy as 1, 2, 3", 2011) of the counter ``(0, i, 0, 0)``, ``i``
each element's flat index (plus the folded-in datum), computed blockwise by a kernel."""
from __future__ import annotations

from collections.abc import Sequence

import plax.numpy as jnp
from plax._src.random import prng
from plax._src.random import threefry2x32 as _threefry
from plax.experimental.pallas.ops.tpu.random import prng_utils

__all__ = ["BLOCK_SIZE", "K_HI_32", "K_LO_32", "MUL_A", "MUL_B", "Shape", "mul32_hi_lo",
           "philox_4x32", "philox_4x32_kernel", "philox_4x32_count", "philox_split",
           "philox_random_bits", "philox_fold_in", "plphilox_prng_impl"]

Shape = Sequence[int]

BLOCK_SIZE = (256, 256)

# The Weyl increments the two key words advance by between rounds, and the round multipliers.
K_HI_32 = 0x9E3779B9
K_LO_32 = 0xBB67AE85
MUL_A = 0xCD9E8D57
MUL_B = 0xD2511F53

_LOW16 = 0xFFFF


def mul32_hi_lo(x, y):
    """The high and low 32-bit words of the 64-bit product of uint32 ``x`` and ``y``,
    from products of 16-bit halves (no 64-bit type needed)."""
    x, y = jnp.asarray(x, jnp.uint32), jnp.asarray(y, jnp.uint32)
    sixteen, low16 = jnp.uint32(16), jnp.uint32(_LOW16)
    x_hi, x_lo, y_hi, y_lo = x >> sixteen, x & low16, y >> sixteen, y & low16
    low_low, high_high = x_lo * y_lo, x_hi * y_hi
    mid1, mid2 = x_hi * y_lo, x_lo * y_hi
    # bits 16..47 of the product: the middle products' low halves plus low_low's high half
    middle = (low_low >> sixteen) + (mid1 & low16) + (mid2 & low16)
    lo = (middle << sixteen) | (low_low & low16)
    hi = high_high + (mid1 >> sixteen) + (mid2 >> sixteen) + (middle >> sixteen)
    return hi, lo


def philox_4x32(hi0, lo0, hi1, lo1, k_hi, k_lo, rounds=10):
    """Philox-4x32 of the counter words ``(hi0, lo0, hi1, lo1)`` under the key
    ``(k_hi, k_lo)``: the four hashed words."""
    for r in range(rounds):
        if r:
            k_hi = k_hi + jnp.uint32(K_HI_32)
            k_lo = k_lo + jnp.uint32(K_LO_32)
        prod_a_hi, prod_a_lo = mul32_hi_lo(jnp.uint32(MUL_A), hi1)
        prod_b_hi, prod_b_lo = mul32_hi_lo(jnp.uint32(MUL_B), hi0)
        hi0, lo0, hi1, lo1 = prod_a_hi ^ lo0 ^ k_hi, prod_a_lo, prod_b_hi ^ lo1 ^ k_lo, prod_b_lo
    return hi0, lo0, hi1, lo1


def _hash_block(k_hi, k_lo, counters):
    zeros = jnp.zeros_like(counters)
    word1, word2, _, _ = philox_4x32(zeros, counters, zeros, zeros, k_hi, k_lo)
    return word1, word2


def philox_4x32_kernel(key, shape: Shape, unpadded_shape: Shape, block_size: tuple[int, int],
                       offset=0, fuse_output: bool = True):
    """Philox bits of ``shape`` (a multiple of ``block_size`` in its last two dimensions)
    under ``key`` (two uint32 words), each element's counter its flat index in
    ``unpadded_shape`` plus ``offset``: the first two hashed words xor-ed
    (``fuse_output``), or both, stacked, of shape ``(2, *shape)``."""
    return prng_utils._hash_counters_call(_hash_block, key, shape, unpadded_shape,
                                          tuple(block_size), offset, fuse_output)


def philox_4x32_count(key, shape: Shape, offset=0, fuse_output: bool = True):
    """``philox_4x32_kernel`` for any shape (0D, 1D, or padded to ``BLOCK_SIZE``)."""
    return prng_utils._padded_to_blocks(
        lambda padded, unpadded: philox_4x32_kernel(key, padded, unpadded, BLOCK_SIZE, offset,
                                                    fuse_output),
        shape, BLOCK_SIZE)


def philox_split(key, shape: Shape):
    """``shape`` new keys (``shape + (2,)``), the two hashed words of each counter."""
    words = philox_4x32_count(key, shape, fuse_output=False)
    return jnp.stack([words[0], words[1]], axis=words.ndim - 1)


def philox_random_bits(key, bit_width: int, shape: Shape):
    """``"pallas_philox4x32"``'s random bits: 32-bit only."""
    if bit_width != 32:
        raise ValueError(f"Only 32-bit PRNG supported (got bit_width={bit_width}).")
    return philox_4x32_count(key, shape, fuse_output=True)


def philox_fold_in(key, data):
    """The key derived from ``key`` and the scalar ``data``: the hash of counter ``data``."""
    if jnp.ndim(data) != 0:
        raise ValueError(f"philox_fold_in folds in a scalar, got shape {jnp.shape(data)}.")
    return philox_4x32_count(key, (), offset=data, fuse_output=False)


plphilox_prng_impl = prng.PRNGImpl(
    key_shape=(2,), seed=_threefry.threefry_seed, split=philox_split,
    random_bits=philox_random_bits, fold_in=philox_fold_in, name="pallas_philox4x32",
    tag="pllox")

prng.register_prng(plphilox_prng_impl)
