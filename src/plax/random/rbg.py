"""The 'rbg' and 'unsafe_rbg' PRNG implementations: keys of four uint32 words whose bits come
from XLA's RngBitGenerator (``lax.rng_bit_generator``, its default algorithm), laid out as JAX lays them out.

Both seed a key as two copies of the Threefry seed words (``[hi, lo, hi, lo]``) and draw
bits with one ``rng_bit_generator`` per key. They differ in how keys are derived:
'rbg' splits and folds each half of the key with Threefry (so derived keys are as good as
Threefry's), 'unsafe_rbg' takes them from the generator itself (every tenth of ``10 * n``
generated rows for a split; the key xor the last of ten rows generated from the datum's
seed for ``fold_in``), which is cheaper and carries no guarantee.

The functions act on key data ``batch + (4,)``, mapped over the batch with ``vmap`` as JAX
maps them; JAX batches the generator by running it once, from the first key, for the whole
batch, and so does plax (a vmapped draw from a batch of rbg keys is JAX's, bit for bit).
"""
from __future__ import annotations

import math

import numpy as np

from plax.core.trace import get_aval
from plax.first_order import bitwise as _bitwise
from plax.first_order import prng as _prng
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.api.vmap import vmap
from plax.first_order.rng_bit_generator import RandomAlgorithm, rng_bit_generator_p
from plax.random import threefry

__all__ = ["rbg_prng_impl", "unsafe_rbg_prng_impl"]

U32 = np.dtype(np.uint32)
_BITS_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _generate(key, shape, dtype):
    """Bits of ``shape`` and ``dtype`` from one uint32[4] key with the platform's default
    algorithm (the next key is dropped)."""
    return rng_bit_generator_p.bind(key, shape=tuple(shape), dtype=np.dtype(dtype),
                                    algorithm=RandomAlgorithm.RNG_DEFAULT, out_sharding=None)[1]


def _per_key(fn, keys, *data):
    """``fn(key, *datum)`` mapped (``vmap``, as JAX maps its implementations) over the keys
    ``batch + (4,)`` and data of shape ``batch``: ``batch + out_shape``."""
    batch = get_aval(keys).shape[:-1]
    if not batch:
        return fn(keys, *data)
    n = math.prod(batch)
    flat = [_shapes.reshape(keys, (n, 4))] + [_shapes.reshape(x, (n,)) for x in data]
    out = vmap(fn)(*flat)
    return _shapes.reshape(out, batch + get_aval(out).shape[1:])


# --- the implementations, on key data ----------------------------------------------------------
def rbg_seed(seeds):
    """Key data from integer seeds: the Threefry seed words twice (``batch + (4,)``)."""
    half = threefry.threefry_seed(seeds)
    return _shapes.concatenate([half, half], get_aval(half).ndim - 1)


def _halves(keys):
    """Key data ``batch + (4,)`` as two Threefry keys: ``batch + (2, 2)``."""
    batch = get_aval(keys).shape[:-1]
    return _shapes.reshape(keys, batch + (2, 2)), batch


def rbg_split(keys, shape):
    """Each half of each key split with Threefry: ``batch + shape + (4,)``."""
    shape = tuple(shape)
    halves, batch = _halves(keys)
    out = threefry.threefry_split(halves, shape)  # batch + (2,) + shape + (2,)
    b, s = len(batch), len(shape)
    perm = tuple(range(b)) + tuple(range(b + 1, b + 1 + s)) + (b, b + 1 + s)
    return _shapes.reshape(_shapes.transpose(out, perm), batch + shape + (4,))


def rbg_fold_in(keys, data):
    """Each half of each key folded with its datum by Threefry: ``batch + (4,)``."""
    halves, batch = _halves(keys)
    both = _shapes.broadcast_in_dim(data, batch + (2,), tuple(range(len(batch))))
    return _shapes.reshape(threefry.threefry_fold_in(halves, both), batch + (4,))


def rbg_random_bits(keys, bit_width: int, shape):
    """Unsigned bits of ``bit_width`` from the generator, one run per key: ``batch + shape``."""
    if bit_width not in _BITS_DTYPES:
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    dtype = _BITS_DTYPES[bit_width]
    return _per_key(lambda k: _generate(k, shape, dtype), keys)


def _unsafe_split_one(key, shape):
    n = math.prod(shape)
    rows = _generate(key, (10 * n, 4), U32)
    return _shapes.reshape(_slicing.slice(rows, (0, 0), (10 * n, 4), (10, 1)), shape + (4,))


def unsafe_rbg_split(keys, shape):
    """Keys taken from the generator: every tenth of ``10 * n`` generated rows."""
    return _per_key(lambda k: _unsafe_split_one(k, tuple(shape)), keys)


def _unsafe_fold_in_one(key, datum):
    rows = _generate(rbg_seed(datum), (10, 4), U32)
    return _bitwise.bitwise_xor(key, _shapes.reshape(_slicing.slice_in_dim(rows, 9, 10), (4,)))


def unsafe_rbg_fold_in(keys, data):
    """The key xor the last of ten rows generated from the datum's seed."""
    return _per_key(_unsafe_fold_in_one, keys, data)


rbg_prng_impl = _prng.PRNGImpl("rbg", "rbg", (4,), seed=rbg_seed, split=rbg_split,
                               fold_in=rbg_fold_in, random_bits=rbg_random_bits)
unsafe_rbg_prng_impl = _prng.PRNGImpl(
    "unsafe_rbg", "urbg", (4,), seed=rbg_seed, split=unsafe_rbg_split,
    fold_in=unsafe_rbg_fold_in, random_bits=rbg_random_bits)
