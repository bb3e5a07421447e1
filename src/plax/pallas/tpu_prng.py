"""The kernel PRNG's primitives: ``prng_seed_p`` and ``prng_random_bits_p``.

A TPU core has one hardware PRNG: ``tpu.prng_set_seed_32`` seeds it and each
``tpu.prng_random_bits`` draws from it (the Mosaic rules, in ``mosaic_rules_tpu``). Off the
chip its state is an explicit value, a ``uint32[2]`` threefry key, threaded from draw to
draw, so that the order of the draws is the order of the data flow::

    state = prng_seed_p.bind(*seeds)                          # uint32[2]
    state, bits = prng_random_bits_p.bind(state, shape=s)     # uint32[2], int32[s]

Every other rule computes them with threefry; ``experimental/pallas/_tpu_random.py`` (which
may use ``plax.random``) registers those (``define``). The Mosaic rules ignore the state.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import batch_rules, impl_rules, jvp_rules, register_lowering
from plax.lowering.inline import lower_fun
from plax.transforms.jvp import jvp_flat
from plax.transforms.vmap import batch_flat

__all__ = ["prng_seed_p", "prng_random_bits_p", "INITIAL_STATE", "define"]

prng_seed_p = Primitive("prng_seed")
prng_random_bits_p = Primitive("prng_random_bits", multiple_results=True)

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


prng_seed_p.def_abstract_eval(_seed_abstract)
prng_random_bits_p.def_abstract_eval(_bits_abstract)


def define(prim, fn) -> None:
    """Every rule of ``prim`` but its abstract evaluation (and its Mosaic rule) computes
    ``fn(*operands, **params)`` (a value, or a list for a multiple-result primitive)."""
    many = prim.multiple_results

    def listed(*xs, **params):
        out = fn(*xs, **params)
        return list(out) if many else [out]

    def first(pair):
        outs, extra = pair
        return (outs, extra) if many else (outs[0], extra[0])

    impl_rules[prim] = lambda *args, **params: fn(*args, **params)
    register_lowering(prim, lower_fun(fn, multiple_results=many))
    jvp_rules[prim] = lambda primals, tangents, **params: first(jvp_flat(
        lambda *xs: listed(*xs, **params), list(primals), list(tangents), prim.name))
    batch_rules[prim] = lambda axis, vals, dims, **params: first(batch_flat(
        lambda *xs: listed(*xs, **params), list(vals), list(dims), axis, prim.name))
