"""The kernel PRNG's primitives: ``prng_seed_p`` and ``prng_random_bits_p``.

A TPU core has one hardware PRNG: ``tpu.prng_set_seed_32`` seeds it and each
``tpu.prng_random_bits`` draws from it (the Mosaic rules, in ``mosaic_rules_tpu``). Off the
chip its state is an explicit value, a ``uint32[2]`` threefry key, threaded from draw to
draw, so that the order of the draws is the order of the data flow::

    state = prng_seed_p.bind(*seeds)                          # uint32[2]
    state, bits = prng_random_bits_p.bind(state, shape=s)     # uint32[2], int32[s]

Every other rule computes them with threefry; ``experimental/pallas/_tpu_random.py`` (which
may use ``plax.random``) registers those (``define``). The Mosaic rules ignore the state.

Typed keys of the ``"pallas_tpu"`` implementation (``key_shape`` (1, N)) live in a kernel as
N scalar words: ``prng_split_p`` gives a key's words, ``prng_join_p`` makes a key of them.
``KERNEL_IMPLS`` names, per implementation name, how the Mosaic rules treat its keys:
``"words"`` (the scalars) or ``"stateful"`` (the hardware PRNG's current state, whose bits
are drawn without seeding); keys of other implementations are their uint32 data.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import batch_rules, impl_rules, jvp_rules, register_lowering
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.higher_order.pallas_call import in_kernel_lowering
from plax.lowering.inline import lower_fun
from plax.transforms.jvp import jvp_flat
from plax.transforms.vmap import batch_flat

__all__ = ["prng_seed_p", "prng_random_bits_p", "prng_split_p", "prng_join_p",
           "INITIAL_STATE", "KERNEL_IMPLS", "define", "fold_words"]

prng_seed_p = Primitive("prng_seed")
prng_random_bits_p = Primitive("prng_random_bits", multiple_results=True)
prng_split_p = Primitive("prng_split", multiple_results=True)
prng_join_p = Primitive("prng_join")

KERNEL_IMPLS: dict = {}  # implementation name -> "words" | "stateful" (filled by _tpu_random)

_STATE = ShapedArray((2,), np.dtype(np.uint32))
INITIAL_STATE = np.zeros((2,), np.uint32)  # (the key data of threefry's seed 0)


def _seed_abstract(*seeds):
    if not seeds:
        raise ValueError("prng_seed: at least one seed is needed.")
    for s in seeds:
        if s.shape != () or not dtypes.issubdtype(s.dtype, np.integer):
            raise ValueError(f"prng_seed: each seed must be an integer scalar, got "
                             f"{s.str_short()}.")
    return _STATE


def _bits_abstract(state, *, shape):
    if state.shape != (2,) or state.dtype != np.uint32:
        raise ValueError(f"prng_random_bits: the state must be uint32[2], got "
                         f"{state.str_short()}.")
    return [_STATE, ShapedArray(tuple(shape), np.dtype(np.int32))]


def _word_count(impl) -> int:
    shape = tuple(impl.key_shape)
    if len(shape) != 2 or shape[0] != 1:
        raise ValueError(f"Key shape must be (1, N), got {shape}")
    return shape[1]


def _split_abstract(key):
    impl = getattr(key.dtype, "_impl", None)
    if impl is None or key.shape != ():
        raise ValueError(f"unwrap_pallas_seed takes one typed PRNG key, got {key.str_short()}.")
    return [ShapedArray((), np.dtype(np.uint32))] * _word_count(impl)


def _join_abstract(*words, impl):
    n = _word_count(impl)
    if len(words) != n:
        raise ValueError(f"Number of seeds must match key shape, got {len(words)} != {n}.")
    for w in words:
        if w.shape != () or not dtypes.issubdtype(w.dtype, np.integer):
            raise ValueError(f"wrap_pallas_seed: each seed must be an integer scalar, got "
                             f"{w.str_short()}.")
    return ShapedArray((), impl.dtype)


prng_seed_p.def_abstract_eval(_seed_abstract)
prng_random_bits_p.def_abstract_eval(_bits_abstract)
prng_split_p.def_abstract_eval(_split_abstract)
prng_join_p.def_abstract_eval(_join_abstract)


_FOLD_ROTATION = 13  # (the first rotation of threefry's rounds)


def fold_words(w0, w1, data):
    """A ``"pallas_tpu"`` key's two uint32 words with ``data`` mixed in: added to the second
    word, then one threefry round."""
    w1 = _arith.add(w1, data)
    w0 = _arith.add(w0, w1)
    rotated = _bitwise.bitwise_or(_bitwise.shift_left(w1, np.uint32(_FOLD_ROTATION)),
                                  _bitwise.shift_right_logical(w1, np.uint32(32 - _FOLD_ROTATION)))
    return [w0, _bitwise.bitwise_xor(rotated, w0)]


def define(prim, fn, kernel_only: bool = False) -> None:
    """Every rule of ``prim`` but its abstract evaluation (and its Mosaic rule) computes
    ``fn(*operands, **params)`` (a value, or a list for a multiple-result primitive).
    ``kernel_only``: it lowers only inside a kernel (as JAX, which has no XLA rule for it)."""
    many = prim.multiple_results
    lowering = lower_fun(fn, multiple_results=many)

    def listed(*xs, **params):
        out = fn(*xs, **params)
        return list(out) if many else [out]

    def first(pair):
        outs, extra = pair
        return (outs, extra) if many else (outs[0], extra[0])

    def lower(ctx, *args, **params):
        if kernel_only and not in_kernel_lowering():
            raise NotImplementedError(
                f"MLIR translation rule for primitive '{prim.name}' not found for platform "
                f"{ctx.platform}: it runs only inside a Pallas kernel (a key of the "
                "\"pallas_tpu\" implementation draws bits only there).")
        return lowering(ctx, *args, **params)

    impl_rules[prim] = lambda *args, **params: fn(*args, **params)
    register_lowering(prim, lower)
    jvp_rules[prim] = lambda primals, tangents, **params: first(jvp_flat(
        lambda *xs: listed(*xs, **params), list(primals), list(tangents), prim.name))
    batch_rules[prim] = lambda axis, vals, dims, **params: first(batch_flat(
        lambda *xs: listed(*xs, **params), list(vals), list(dims), axis, prim.name))
