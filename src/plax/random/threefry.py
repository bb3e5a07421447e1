"""Keys and bits of the Threefry-2x32 generator, laid out exactly as JAX lays them out.

A key is a ``uint32[2]`` array (the "legacy" raw key). With the flag
``jax_threefry_partitionable`` on (the default, as in JAX since 0.5), element
``i`` of a request of ``shape`` is the hash of the 64-bit counter ``i`` (split
into high and low words), so every element is computed independently. With it
off, counters ``0 .. n-1`` are hashed as the two halves of one array, JAX's
original layout.
"""
from __future__ import annotations

import math

import numpy as np

from plax.api import jit
from plax.core import dtypes
from plax.core.config import config
from plax.core.trace import get_aval
from plax.lax import bitwise as _bitwise
from plax.lax import conversion as _conversion
from plax.lax import shapes as _shapes
from plax.lax import slicing as _slicing
from plax.lax.arithmetic import add, mul
from plax.lax.prng import threefry2x32
from plax.transforms.remat import optimization_barrier

U32 = np.dtype(np.uint32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: U32, 64: np.dtype(np.uint64)}


def key_from_seed(seed):
    """The key of an integer seed: its high and low 32-bit words (the high word is 0 for
    32-bit seeds)."""
    aval = get_aval(seed)
    if aval.shape:
        raise TypeError(f"PRNG key seed must be a scalar; got {seed!r}.")
    if not dtypes.is_integer(aval.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    return _key_from_seed(seed)


@jit(inline=True)
def _key_from_seed(seed):
    bits = np.dtype(get_aval(seed).dtype).itemsize * 8
    if bits == 64:
        hi = _conversion.convert_element_type(
            _bitwise.shift_right_logical(seed, np.array(32, get_aval(seed).dtype)), U32)
    else:  # a shift by the whole width is 0, as XLA defines it
        hi = _shapes.full((), 0, U32)
    lo = _conversion.convert_element_type(seed, U32)
    return _shapes.concatenate([_shapes.expand_dims(hi, (0,)), _shapes.expand_dims(lo, (0,))], 0)


def iota_2x32(shape):
    """The row-major index of every element of ``shape``, as (high, low) uint32 words."""
    shape = tuple(shape)
    if math.prod(shape) >= 2 ** 32:
        raise NotImplementedError(f"random arrays of {math.prod(shape)} elements (2**32 or "
                                  "more) are not supported yet.")
    if not shape:
        zero = _shapes.full((), 0, U32)
        return zero, zero
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    lo = None
    for d, stride in enumerate(strides):
        term = _shapes.broadcasted_iota(U32, shape, d)
        if stride != 1:
            term = mul(term, np.uint32(stride))
        lo = term if lo is None else add(lo, term)
    return _shapes.full(shape, 0, U32), lo


def threefry_2x32(key, count):
    """The hash of the uint32 array ``count`` under ``key``, as JAX's original layout uses
    it: the flattened counts (padded to an even length) hashed as two halves."""
    flat = _shapes.reshape(count, (math.prod(get_aval(count).shape),))
    n = get_aval(flat).shape[0]
    if n % 2:
        flat = _shapes.concatenate([flat, _shapes.full((1,), 0, U32)], 0)
    half = get_aval(flat).shape[0] // 2
    x1, x2 = _slicing.slice_in_dim(flat, 0, half), _slicing.slice_in_dim(flat, half, 2 * half)
    k1, k2 = _key_words(key)
    out = _shapes.concatenate(list(threefry2x32(k1, k2, x1, x2)), 0)
    return _shapes.reshape(_slicing.slice_in_dim(out, 0, n), get_aval(count).shape)


def _key_words(key):
    return (_shapes.reshape(_slicing.slice_in_dim(key, 0, 1), ()),
            _shapes.reshape(_slicing.slice_in_dim(key, 1, 2), ()))


def split(key, shape: tuple):
    """``shape`` new keys from ``key``: an array of shape ``shape + (2,)``."""
    return _split(key, tuple(shape), bool(config.read("threefry_partitionable")))


@jit(static_argnums=(1, 2), inline=True)
def _split(key, shape, partitionable):
    if partitionable:
        hi, lo = iota_2x32(shape)
        b1, b2 = threefry2x32(*_key_words(key), hi, lo)
        keys = _shapes.concatenate([_shapes.expand_dims(b1, (len(shape),)),
                                    _shapes.expand_dims(b2, (len(shape),))], len(shape))
    else:
        counts = _shapes.iota(U32, math.prod(shape) * 2)
        keys = _shapes.reshape(threefry_2x32(key, counts), shape + (2,))
    # XLA fuses a split's hash into the hash of the bits drawn from its keys and then takes
    # seconds to compile a sort of those bits; the barrier (an identity) keeps them apart.
    return optimization_barrier(keys)


@jit(inline=True)
def fold_in(key, data):
    """A new key from ``key`` and the uint32 scalar ``data``."""
    return threefry_2x32(key, _key_from_seed(data))


def random_bits(key, bit_width: int, shape: tuple):
    """Uniform random bits: an unsigned array of ``bit_width`` bits and ``shape``."""
    if bit_width not in _UINT:
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    return _random_bits(key, bit_width, tuple(shape),
                        bool(config.read("threefry_partitionable")))


@jit(static_argnums=(1, 2, 3), inline=True)
def _random_bits(key, bit_width, shape, partitionable):
    dtype = _UINT[bit_width]
    if partitionable:
        hi, lo = iota_2x32(shape)
        b1, b2 = threefry2x32(*_key_words(key), hi, lo)
        if bit_width == 64:
            high = _conversion.convert_element_type(b1, dtype)
            low = _conversion.convert_element_type(b2, dtype)
            return _bitwise.bitwise_or(_bitwise.shift_left(high, np.array(32, dtype)), low)
        bits = _bitwise.bitwise_xor(b1, b2)
        return bits if bit_width == 32 else _conversion.convert_element_type(bits, dtype)
    size = math.prod(shape)
    words = -(-bit_width * size // 32)
    if words >= 2 ** 32 - 1:
        raise NotImplementedError("random bits of 2**32 words or more are not supported yet.")
    bits = threefry_2x32(key, _shapes.iota(U32, words))
    if bit_width == 64:
        high, low = (_conversion.convert_element_type(h, dtype) for h in
                     (_slicing.slice_in_dim(bits, 0, words // 2),
                      _slicing.slice_in_dim(bits, words // 2, words)))
        bits = _bitwise.bitwise_or(_bitwise.shift_left(high, np.array(32, dtype)), low)
    elif bit_width in (8, 16):
        # Each 32-bit word holds 32 // bit_width values, lowest bits first.
        per_word = 32 // bit_width
        shifts = mul(np.uint32(bit_width), _shapes.broadcasted_iota(U32, (words, per_word), 1))
        parts = _bitwise.shift_right_logical(
            _shapes.broadcast_in_dim(bits, (words, per_word), (0,)), shifts)
        parts = _bitwise.bitwise_and(parts, np.uint32(2 ** bit_width - 1))
        bits = _slicing.slice_in_dim(_shapes.reshape(parts, (words * per_word,)), 0, size)
        bits = _conversion.convert_element_type(bits, dtype)
    return _shapes.reshape(bits, shape)
