"""pltpu's kernel PRNG in interpret mode: ``prng_seed``, ``prng_random_bits`` and the
stateful samplers.

A TPU core has one hardware PRNG, seeded by ``prng_seed`` and advanced by each draw. Here
its state is a threefry key (two uint32 words) held in a reference box made for the kernel
being traced, so draws inside loops and branches thread it as any reference is threaded.
The bits are deterministic per seed and differ from the chip's; their shapes, dtypes and
ranges are the chip's. The state starts from seed 0 in every program of the grid (seed it
with ``prng_seed(seed, pl.program_id(0))`` for bits that differ per program).
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax import random
from plax.higher_order import pallas_call as _kernel
from plax.random import blocked
from plax.ref import Ref, new_ref

__all__ = ["prng_seed", "prng_random_bits", "stateful_bits", "stateful_uniform",
           "stateful_normal", "stateful_bernoulli", "sample_block"]

# (the kernel being traced, as its grid entry) -> the reference box of its PRNG state
_states: dict = {}


def _kernel_entry(what: str):
    if not _kernel._grids:
        raise ValueError(f"{what} can only be called inside a pallas_call kernel.")
    return _kernel._grids[-1]


def _state(what: str) -> Ref:
    entry = _kernel_entry(what)
    for key in [k for k, (e, _) in _states.items() if not any(e is g for g in _kernel._grids)]:
        del _states[key]  # (kernels whose tracing ended)
    hit = _states.get(id(entry))
    if hit is None:
        box = new_ref(random.key_data(random.PRNGKey(0)))
        _states[id(entry)] = (entry, box)
        return box
    return hit[1]


def _scalar_seed(seed):
    seed = jnp.asarray(seed)
    if seed.shape != ():
        raise ValueError(f"prng_seed: each seed must be a scalar, got shape {seed.shape}.")
    if not jnp.issubdtype(seed.dtype, np.integer):
        raise TypeError(f"prng_seed: seeds must be integers, got {seed.dtype}.")
    return seed.astype(jnp.uint32)


def prng_seed(*seeds) -> None:
    """Seed the kernel's PRNG with one or more integer scalars (several are mixed)."""
    if not seeds:
        raise ValueError("prng_seed: at least one seed is needed.")
    key = random.PRNGKey(_scalar_seed(seeds[0]))
    for s in seeds[1:]:
        key = random.fold_in(key, _scalar_seed(s))
    box = _state("prng_seed")
    box[...] = random.key_data(key)


def _next_key(what: str):
    """A fresh key from the kernel's PRNG state, which advances."""
    box = _state(what)
    key = random.wrap_key_data(box[...], impl="threefry2x32")
    key, use = random.split(key)
    box[...] = random.key_data(key)
    return use


def prng_random_bits(shape):
    """An int32 array of ``shape`` of random bits from the kernel's PRNG."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    bits = random.bits(_next_key("prng_random_bits"), shape, jnp.uint32)
    return lax.bitcast_convert_type(bits, jnp.int32)


def _stateful(sampler, name: str):
    def sample(*args, **kwargs):
        return sampler(_next_key(name), *args, **kwargs)
    sample.__name__ = name
    sample.__doc__ = (f"``jax.random.{sampler.__name__}`` drawing its key from the kernel's "
                      "PRNG (seeded by ``prng_seed``), without a key argument.")
    return sample


stateful_bits = _stateful(random.bits, "stateful_bits")
stateful_uniform = _stateful(random.uniform, "stateful_uniform")
stateful_normal = _stateful(random.normal, "stateful_normal")
stateful_bernoulli = _stateful(random.bernoulli, "stateful_bernoulli")


def sample_block(sampler_fn, global_key, block_size, tile_size, total_size,
                 block_index=None, **kwargs):
    """The ``block_size`` block at ``block_index`` (default: the program's position) of
    samples of a ``total_size`` array, the same whatever the block shape (a multiple of
    ``tile_size``): each tile's key is folded from ``global_key`` by the tile's number."""
    if len(block_size) != len(tile_size):
        raise ValueError(f"block_size ({len(block_size)}) and tile_size ({len(tile_size)}) "
                         "must have the same length.")
    if block_index is None:
        block_index = tuple(_kernel.program_id(a) for a in range(len(block_size)))
    keys = blocked.blocked_fold_in(global_key, total_size, block_size, tile_size,
                                   block_index)
    return blocked.sample_block(sampler_fn, keys, block_size, tile_size, **kwargs)

