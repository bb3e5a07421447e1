"""Mosaic lowering rules of typed PRNG keys in a kernel: the ``random_*`` primitives, the
words of ``"pallas_tpu"`` keys (``prng_split``, ``prng_join``) and the ``threefry2x32`` hash.

A key of an ordinary implementation (threefry, rbg, ...) is its uint32 data: its
implementation's functions (seed, split, fold_in, random_bits) are traced on that data and
emitted, as JAX lowers them. A ``"pallas_tpu"`` key is its words (``KeyWords``): its bits are
the hardware PRNG's, seeded with the words (``tpu.prng_set_seed_32``, then
``tpu.prng_random_bits``), and ``fold_in`` mixes data into the words
(``tpu_prng.fold_words``). A key of the stateful samplers' implementation stands for the
PRNG's current state: its bits are the next draw.
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray, physical_aval
from plax.core.rules import mosaic_lowering_rules as rules
from plax.first_order import prng
from plax.pallas import tpu_prng
from plax.pallas.mosaic_lowering import KeyWords, key_kind
from plax.pallas.mosaic_rules_arith import convert
from plax.pallas.mosaic_rules_tpu import random_bits, set_seed

__all__ = []

_U32 = ShapedArray((), np.dtype(np.uint32))


def _key_aval(ctx):
    return next(a for a in (*ctx.avals_in, *ctx.avals_out) if key_kind(a.dtype))


def _on_data(ctx, method: str, args, params):
    """The implementation's ``method`` traced on the keys' data and emitted."""
    impl = _key_aval(ctx).dtype._impl
    avals = [physical_aval(a) for a in ctx.avals_in]
    return ctx.lower_fun(getattr(impl, method), avals, args, params)


def _words(ctx, key) -> KeyWords:
    if not isinstance(key, KeyWords):
        raise ctx.error("a \"pallas_tpu\" key in a TPU kernel must be read from an SMEM "
                        "reference or made by wrap_pallas_seed")
    return key


def _words_only(ctx, what: str):
    return ctx.error(f"{what} not supported for Pallas PRNG keys (\"pallas_tpu\") in a TPU "
                     "kernel: use unwrap_pallas_seed and wrap_pallas_seed (the key's words).")


def _random_seed(ctx, seeds, *, impl):
    kind = key_kind(impl.dtype)
    if kind == "data":
        return _on_data(ctx, "seed", [seeds], {})
    if kind == "stateful" or ctx.avals_in[0].shape:
        raise ctx.error(f"a key of {impl.name} is made from one seed in a TPU kernel")
    word = convert(ctx, ctx.value(seeds), np.uint32)
    return KeyWords([word] * impl.key_shape[-1], ctx.avals_out[0])


def _random_bits(ctx, keys, *, bit_width, shape):
    kind = key_kind(ctx.avals_in[0].dtype)
    if kind == "data":
        return _on_data(ctx, "random_bits", [keys], {"bit_width": bit_width, "shape": shape})
    if bit_width != 32:
        raise ctx.error(f"the kernel PRNG draws 32-bit words only (Bit width must be 32), "
                        f"got {bit_width}")
    if ctx.avals_in[0].shape:
        raise ctx.error("the kernel PRNG draws with one key at a time; index the keys")
    if kind == "words":
        set_seed(ctx, _words(ctx, keys).words)
    bits = random_bits(ctx, ShapedArray(tuple(shape), np.dtype(np.int32)))
    return convert(ctx, bits, np.uint32)


def _random_split(ctx, keys, *, shape):
    if key_kind(ctx.avals_in[0].dtype) != "data":
        raise ctx.error("Cannot split a Pallas key. Use fold_in instead to generate new keys.")
    return _on_data(ctx, "split", [keys], {"shape": shape})


def _random_fold_in(ctx, keys, msgs):
    kind = key_kind(ctx.avals_in[0].dtype)
    if kind == "data":
        return _on_data(ctx, "fold_in", [keys, msgs], {})
    if kind != "words" or ctx.avals_in[0].shape:
        raise ctx.error("fold_in takes one \"pallas_tpu\" key in a TPU kernel")
    words = ctx.lower_fun(tpu_prng.fold_words, [_U32] * 3, [*_words(ctx, keys).words, msgs],
                          multiple_results=True)
    return KeyWords(words, ctx.avals_out[0])


def _random_wrap(ctx, base, *, impl):
    if key_kind(impl.dtype) == "words":
        raise _words_only(ctx, "wrap_key_data")
    return base  # (the data, or the stateful key's stand-in state)


def _random_unwrap(ctx, keys):
    if key_kind(ctx.avals_in[0].dtype) != "data":
        raise _words_only(ctx, "key_data")
    return keys


def _prng_split(ctx, key):
    return [convert(ctx, w, np.uint32) for w in _words(ctx, key).words]


def _prng_join(ctx, *words, impl):
    return KeyWords([convert(ctx, ctx.value(w), np.uint32) for w in words], ctx.avals_out[0])


def _threefry2x32(ctx, *args):
    return ctx.lower_fun(prng._rounds, ctx.avals_in, args, multiple_results=True)


rules[prng.random_seed_p] = _random_seed
rules[prng.random_bits_p] = _random_bits
rules[prng.random_split_p] = _random_split
rules[prng.random_fold_in_p] = _random_fold_in
rules[prng.random_wrap_p] = _random_wrap
rules[prng.random_unwrap_p] = _random_unwrap
rules[prng.random_clone_p] = lambda ctx, keys: keys
rules[tpu_prng.prng_split_p] = _prng_split
rules[tpu_prng.prng_join_p] = _prng_join
rules[prng.threefry2x32_p] = _threefry2x32
