"""The Threefry-2x32 PRNG implementation, laid out exactly as JAX lays it out.

A key's data is two uint32 words. The functions here act on key data of shape
``batch + (2,)`` (batched over the leading dimensions) and are the lowering of
the typed-key primitives (``plax.first_order.prng``) for keys of dtype ``key<fry>``.
With the flag ``jax_threefry_partitionable`` on (the default, as in JAX since
0.5), element ``i`` of a request of ``shape`` is the hash of the 64-bit counter
``i`` (split into high and low words), so every element is computed
independently. With it off, counters ``0 .. n-1`` are hashed as the two halves
of one array, JAX's original layout.

``split``, ``fold_in`` and ``random_bits`` at the bottom are what the samplers
call on typed keys.
"""
from __future__ import annotations

import math

import numpy as np

from plax.api.jit import jit
from plax.core.config import config
from plax.core.trace import get_aval
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _comparison
from plax.first_order import conversion as _conversion
from plax.first_order import prng as _prng
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order import utility as _utility
from plax.first_order.arithmetic import add, mul
from plax.first_order.prng import threefry2x32
from plax.first_order.utility import optimization_barrier

U32 = np.dtype(np.uint32)


# --- the implementation, on key data ---------------------------------------------------------
def threefry_seed(seeds):
    """Key data from integer seeds: each seed's high and low 32-bit words (the high word is
    0 for seeds of 32 bits or fewer)."""
    aval = get_aval(seeds)
    if aval.dtype.itemsize == 8:
        hi = _conversion.convert_element_type(
            _bitwise.shift_right_logical(seeds, np.array(32, aval.dtype)), U32)
    else:  # a shift by the whole width is 0, as XLA defines it
        hi = _shapes.full(aval.shape, 0, U32)
    lo = _conversion.convert_element_type(seeds, U32)
    return _stack_words(hi, lo)


def _stack_words(hi, lo):
    n = get_aval(hi).ndim
    return _shapes.concatenate([_shapes.expand_dims(hi, (n,)), _shapes.expand_dims(lo, (n,))], n)


def _words(keys):
    """The two words of key data ``batch + (2,)``, each of shape ``batch``."""
    aval = get_aval(keys)
    n = aval.ndim - 1
    return tuple(_shapes.reshape(_slicing.slice_in_dim(keys, i, i + 1, axis=n), aval.shape[:n])
                 for i in (0, 1))


def _over_batch(x, batch: tuple, shape: tuple, leading: bool):
    """``x`` (of shape ``batch`` if ``leading``, else ``shape``) broadcast to batch + shape."""
    dims = tuple(range(len(batch))) if leading else tuple(range(len(batch), len(batch) + len(shape)))
    return _shapes.broadcast_in_dim(x, batch + shape, dims)


def _hash_counters(keys, shape):
    """The two hashed words of every counter of ``shape`` under every key (partitionable
    layout): each of shape ``batch + shape``."""
    k1, k2 = _words(keys)
    batch = get_aval(k1).shape
    hi, lo = iota_2x32(shape)
    if batch:  # (one key's words stay scalars: the hash broadcasts them where they are used)
        k1, k2 = (_over_batch(k, batch, shape, True) for k in (k1, k2))
    hi, lo = (_over_batch(c, batch, shape, False) for c in (hi, lo))
    return threefry2x32(k1, k2, hi, lo)


def threefry_split(keys, shape):
    """Key data of ``shape`` new keys per key: ``batch + shape + (2,)``."""
    shape = tuple(shape)
    if config.read("threefry_partitionable"):
        out = _stack_words(*_hash_counters(keys, shape))
    else:
        batch = get_aval(keys).shape[:-1]
        out = threefry_2x32(keys, _shapes.iota(U32, math.prod(shape) * 2))
        out = _shapes.reshape(out, batch + shape + (2,))
    # XLA fuses a split's hash into the hash of the bits drawn from its keys and then takes
    # seconds to compile a sort of those bits; the barrier (an identity) keeps them apart.
    return optimization_barrier(out)


def threefry_fold_in(keys, data):
    """Key data derived from each key and its uint32 datum (``data`` of shape ``batch``)."""
    return threefry_2x32(keys, threefry_seed(data))


def threefry_random_bits(keys, bit_width: int, shape):
    """Unsigned random bits of ``bit_width`` for every key: ``batch + shape``."""
    shape = tuple(shape)
    dtype = np.dtype(f"uint{bit_width}")
    if config.read("threefry_partitionable"):
        b1, b2 = _hash_counters(keys, shape)
        if bit_width == 64:
            high = _conversion.convert_element_type(b1, dtype)
            low = _conversion.convert_element_type(b2, dtype)
            return _bitwise.bitwise_or(_bitwise.shift_left(high, np.array(32, dtype)), low)
        bits = _bitwise.bitwise_xor(b1, b2)
        return bits if bit_width == 32 else _conversion.convert_element_type(bits, dtype)
    batch = get_aval(keys).shape[:-1]
    last = len(batch)
    size = math.prod(shape)
    words = -(-bit_width * size // 32)
    if words >= 2 ** 32 - 1:
        raise NotImplementedError("random bits of 2**32 words or more are not supported yet.")
    bits = threefry_2x32(keys, _shapes.iota(U32, words))
    if bit_width == 64:
        high, low = (_conversion.convert_element_type(h, dtype) for h in
                     (_slicing.slice_in_dim(bits, 0, words // 2, axis=last),
                      _slicing.slice_in_dim(bits, words // 2, words, axis=last)))
        bits = _bitwise.bitwise_or(_bitwise.shift_left(high, np.array(32, dtype)), low)
    elif bit_width in (8, 16):
        # Each 32-bit word holds 32 // bit_width values, lowest bits first.
        per_word = 32 // bit_width
        grid = batch + (words, per_word)
        shifts = mul(np.uint32(bit_width), _shapes.broadcasted_iota(U32, grid, last + 1))
        parts = _bitwise.shift_right_logical(
            _shapes.broadcast_in_dim(bits, grid, tuple(range(last + 1))), shifts)
        parts = _bitwise.bitwise_and(parts, np.uint32(2 ** bit_width - 1))
        bits = _slicing.slice_in_dim(_shapes.reshape(parts, batch + (words * per_word,)), 0, size,
                                     axis=last)
        bits = _conversion.convert_element_type(bits, dtype)
    return _shapes.reshape(bits, batch + shape)


def iota_2x32(shape, wide: bool | None = None):
    """The row-major index of every element of ``shape``, as (high, low) uint32 words.

    The high words are computed (in 64-bit arithmetic on word pairs) when ``wide``, by
    default when the shape has more than 2**32 elements; otherwise they are zero."""
    shape = tuple(shape)
    size = math.prod(shape)
    if size > 2 ** 64:
        raise NotImplementedError("random bits array of size exceeding 2 ** 64")
    wide = size > 2 ** 32 if wide is None else wide
    zero = _shapes.full(shape, 0, U32)
    hi, lo = zero, zero
    for d in range(len(shape)):
        stride = math.prod(shape[d + 1:])
        if stride >= 2 ** 64:  # only when the shape is empty
            continue
        term = _shapes.broadcasted_iota(U32, shape, d)
        if wide:
            hi, lo = add_u64((hi, lo), times_u64(term, stride))
        else:
            lo = add(lo, term if stride == 1 else mul(term, np.uint32(stride)))
    return hi, lo


def times_u64(x, c: int):
    """uint32 ``x`` times the constant ``c`` (< 2**64): the (high, low) words of the product
    mod 2**64."""
    c_hi, c_lo = divmod(c, 2 ** 32)
    lo = mul(x, np.uint32(c_lo))
    hi = _utility.mulhi(x, _shapes.full(get_aval(x).shape, c_lo, U32))
    return (add(hi, mul(x, np.uint32(c_hi))) if c_hi else hi), lo


def add_u64(a, b):
    """The sum mod 2**64 of two numbers given as (high, low) uint32 words."""
    lo = add(a[1], b[1])
    carry = _conversion.convert_element_type(_comparison.lt(lo, b[1]), U32)
    return add(add(a[0], b[0]), carry), lo


def threefry_2x32(keys, counts):
    """The hash of uint32 ``counts`` under each key, as JAX's original layout uses it: the
    counters along the last axis (padded to an even length) hashed as two halves.

    ``keys`` is key data ``batch + (2,)``; ``counts`` has shape ``(n,)`` (the same counters
    for every key) or ``batch + (n,)``; the result has shape ``batch + (n,)``.
    """
    k1, k2 = _words(keys)
    batch = get_aval(k1).shape
    last = get_aval(counts).ndim - 1
    n = get_aval(counts).shape[last]
    if n % 2:
        pad = _shapes.full(get_aval(counts).shape[:last] + (1,), 0, U32)
        counts = _shapes.concatenate([counts, pad], last)
    half = (n + 1) // 2
    halves = [_slicing.slice_in_dim(counts, 0, half, axis=last),
              _slicing.slice_in_dim(counts, half, 2 * half, axis=last)]
    if last == 0 and batch:
        halves = [_over_batch(x, batch, (half,), False) for x in halves]
    if batch:
        k1, k2 = (_over_batch(k, batch, (half,), True) for k in (k1, k2))
    out = _shapes.concatenate(list(threefry2x32(k1, k2, *halves)), len(batch))
    return _slicing.slice_in_dim(out, 0, n, axis=len(batch))


threefry_prng_impl = _prng.PRNGImpl(
    "threefry2x32", "fry", (2,), seed=threefry_seed, split=threefry_split,
    fold_in=threefry_fold_in, random_bits=threefry_random_bits)


# --- on typed keys, for the samplers -------------------------------------------------------
# Eager calls run through jit, whose cache knows the layout flag (the primitives' own
# one-equation cache does not).
@jit(static_argnums=1, inline=True)
def split(keys, shape: tuple):
    """``shape`` new keys per key (typed keys of shape ``keys.shape + shape``)."""
    return _prng.random_split(keys, shape)


@jit(inline=True)
def fold_in(keys, data):
    """Keys derived from ``keys`` and uint32 ``data`` of the same shape."""
    return _prng.random_fold_in(keys, data)


@jit(static_argnums=(1, 2), inline=True)
def random_bits(keys, bit_width: int, shape: tuple):
    """Unsigned random bits of ``bit_width`` and shape ``keys.shape + shape``."""
    if bit_width not in (8, 16, 32, 64):
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    return _prng.random_bits(keys, bit_width, shape)
