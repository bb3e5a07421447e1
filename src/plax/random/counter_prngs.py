"""The threefry4x32, philox2x32 and philox4x32 PRNG implementations (keys ``key<fry4>``,
``key<phx2>``, ``key<phx4>`` of 4, 1 and 2 uint32 words), laid out as JAX lays them out.

Each is a counter-based hash (``plax.first_order.counter_hashes``) used the same way:

- a seed's high and low 32-bit words, hashed under a zero key, make the key;
- ``split`` hashes every element's 64-bit row-major index (high, low words) under the key;
- ``fold_in`` hashes the datum as the last counter word, the other words zero;
- ``random_bits`` hashes every element's index and combines the hashed words: all of them
  xored for 32 bits or fewer (then truncated), two 32-bit halves for 64 bits.

Which counter words carry the index, and which hashed words make the key or the 64-bit
halves, differ per implementation (the tables below). The functions act on key data
``batch + key_shape``, batched over the leading dimensions.
"""
from __future__ import annotations

import functools

import numpy as np

from plax.core.trace import get_aval
from plax.first_order import bitwise as _bitwise
from plax.first_order import conversion as _conversion
from plax.first_order import prng as _prng
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.counter_hashes import philox2x32_p, philox4x32_p, threefry4x32_p
from plax.random.threefry import _over_batch, iota_2x32, threefry_seed

__all__ = ["threefry4x32_prng_impl", "philox2x32_prng_impl", "philox4x32_prng_impl"]

U32 = np.dtype(np.uint32)


class _Layout:
    """How one hash makes a PRNG: its key and counter widths, the operand slots (key words
    first, then counter words) a seed's two words go to, the counter slots an index's two
    words and a fold-in datum go to, and the hashed words kept."""

    def __init__(self, prim, n_key, n_counter, seed_slots, index_slots, split_slots, key_out,
                 fold_slot, wide_out):
        self.prim, self.n_key, self.n_counter = prim, n_key, n_counter
        self.seed_slots, self.index_slots, self.split_slots = seed_slots, index_slots, split_slots
        self.key_out, self.fold_slot = key_out, fold_slot
        self.wide_out = wide_out  # per 64-bit half, the hashed words xored into it


_THREEFRY4 = _Layout(threefry4x32_p, 4, 4, seed_slots=(0, 1), index_slots=(0, 1),
                     split_slots=(2, 3), key_out=(0, 1, 2, 3), fold_slot=3,
                     wide_out=((0, 2), (1, 3)))
_PHILOX2 = _Layout(philox2x32_p, 1, 2, seed_slots=(1, 2), index_slots=(0, 1),
                   split_slots=(0, 1), key_out=(0,), fold_slot=1, wide_out=((0,), (1,)))
_PHILOX4 = _Layout(philox4x32_p, 2, 4, seed_slots=(2, 3), index_slots=(0, 1),
                   split_slots=(2, 3), key_out=(0, 1), fold_slot=3, wide_out=((0,), (1,)))


def _key_words(keys, n: int):
    """The ``n`` words of key data ``batch + (n,)``, each of shape ``batch``."""
    aval = get_aval(keys)
    last = aval.ndim - 1
    return [_shapes.reshape(_slicing.slice_in_dim(keys, i, i + 1, axis=last), aval.shape[:last])
            for i in range(n)]


def _stack(words):
    n = get_aval(words[0]).ndim
    return _shapes.concatenate([_shapes.expand_dims(w, (n,)) for w in words], n)


def _hash(layout: _Layout, keys, counters: dict, shape: tuple):
    """The hashed words of the counters (slot -> word, each of ``shape``; other slots zero)
    under every key: each of shape ``batch + shape``."""
    words = _key_words(keys, layout.n_key)
    batch = get_aval(words[0]).shape
    if batch:
        words = [_over_batch(w, batch, shape, True) for w in words]
    full = batch + shape
    zero = _shapes.full(full, 0, U32)
    xs = [_over_batch(counters[i], batch, shape, False) if i in counters else zero
          for i in range(layout.n_counter)]
    return layout.prim.bind(*words, *xs)


def _seed(layout: _Layout, seeds):
    hi, lo = _key_words(threefry_seed(seeds), 2)
    shape = get_aval(hi).shape
    args = [_shapes.full(shape, 0, U32)] * (layout.n_key + layout.n_counter)
    args[layout.seed_slots[0]], args[layout.seed_slots[1]] = hi, lo
    out = layout.prim.bind(*args)
    return _stack([out[i] for i in layout.key_out])


def _split(layout: _Layout, keys, shape):
    shape = tuple(shape)
    hi, lo = iota_2x32(shape)
    out = _hash(layout, keys, dict(zip(layout.split_slots, (hi, lo))), shape)
    return _stack([out[i] for i in layout.key_out])


def _fold_in(layout: _Layout, keys, data):
    words = _key_words(keys, layout.n_key)
    zero = _shapes.full(get_aval(data).shape, 0, U32)
    xs = [data if i == layout.fold_slot else zero for i in range(layout.n_counter)]
    out = layout.prim.bind(*words, *xs)
    return _stack([out[i] for i in layout.key_out])


def _xor_all(words):
    return functools.reduce(_bitwise.bitwise_xor, words)


def _random_bits(layout: _Layout, keys, bit_width: int, shape):
    shape = tuple(shape)
    hi, lo = iota_2x32(shape)
    out = _hash(layout, keys, dict(zip(layout.index_slots, (hi, lo))), shape)
    dtype = np.dtype(f"uint{bit_width}")
    if bit_width == 64:
        high, low = (_conversion.convert_element_type(_xor_all([out[i] for i in part]), dtype)
                     for part in layout.wide_out)
        return _bitwise.bitwise_or(_bitwise.shift_left(high, np.array(32, dtype)), low)
    bits = _xor_all(out)
    return bits if bit_width == 32 else _conversion.convert_element_type(bits, dtype)


def _impl(name: str, tag: str, layout: _Layout):
    return _prng.PRNGImpl(
        name, tag, (layout.n_key,), seed=functools.partial(_seed, layout),
        split=functools.partial(_split, layout), fold_in=functools.partial(_fold_in, layout),
        random_bits=functools.partial(_random_bits, layout))


threefry4x32_prng_impl = _impl("threefry4x32", "fry4", _THREEFRY4)
philox2x32_prng_impl = _impl("philox2x32", "phx2", _PHILOX2)
philox4x32_prng_impl = _impl("philox4x32", "phx4", _PHILOX4)
