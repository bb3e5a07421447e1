"""pltpu's kernel PRNG: ``prng_seed``, ``prng_random_bits``, the stateful samplers and the
``"pallas_tpu"`` keys (``to_pallas_key``).

A TPU core has one hardware PRNG, seeded by ``prng_seed`` and advanced by each draw. Off the
chip its state is a threefry key (two uint32 words) held in a reference box made for the
kernel being traced, so draws inside loops and branches thread it as any reference is
threaded. The bits are deterministic per seed and differ from the chip's; their shapes,
dtypes and ranges are the chip's. The state starts from seed 0 in every program of the grid
(seed it with ``prng_seed(seed, pl.program_id(0))`` for bits that differ per program).

A ``"pallas_tpu"`` key (data ``uint32[1, 2]``) is a seed of that PRNG: ``jax.random``'s
samplers given one seed the PRNG with its words and draw (inside a kernel only, as in JAX);
``fold_in`` mixes data into the words with one threefry round; it cannot be split. The
stateful samplers pass ``jax.random``'s samplers a key of an internal implementation whose
bits are the PRNG's next draw.
"""
from __future__ import annotations

import functools

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax import random
from plax.api.vmap import vmap
from plax.higher_order import pallas_call as _kernel
from plax.pallas import tpu_prng
from plax.random import blocked
from plax.random.keys import _resolve_impl, impl_from_key_functions, is_typed, register_impl
from plax.ref import Ref, new_ref

__all__ = ["prng_seed", "prng_random_bits", "stateful_bits", "stateful_uniform",
           "stateful_normal", "stateful_bernoulli", "sample_block", "to_pallas_key",
           "unwrap_pallas_seed", "wrap_pallas_seed", "is_pallas_impl", "set_seed",
           "tpu_key_impl", "tpu_internal_stateful_impl"]

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
        box = new_ref(lax.full((2,), 0, jnp.uint32))  # (seed 0's key, computed in the kernel)
        _states[id(entry)] = (entry, box)
        return box
    return hit[1]


def _scalar_seed(seed):
    if is_typed(seed):
        raise TypeError("prng_seed: a typed key seeds the kernel's PRNG only as the one seed, "
                        "and only a \"pallas_tpu\" key (pltpu.to_pallas_key); got "
                        f"{seed.aval.str_short()}.")
    seed = jnp.asarray(seed)
    if seed.shape != ():
        raise ValueError(f"prng_seed: each seed must be a scalar, got shape {seed.shape}.")
    if not jnp.issubdtype(seed.dtype, np.integer):
        raise TypeError(f"prng_seed: seeds must be integers, got {seed.dtype}.")
    return seed.astype(jnp.uint32)


def _seeded_state(*seeds):
    key = random.key(seeds[0], impl="threefry2x32")
    for s in seeds[1:]:
        key = random.fold_in(key, s)
    return random.key_data(key)


def _draw(state, *, shape):
    key, use = random.split(random.wrap_key_data(state, impl="threefry2x32"))
    bits = random.bits(use, shape, jnp.uint32)
    return [random.key_data(key), lax.bitcast_convert_type(bits, jnp.int32)]


def _words_of(data):
    """The words of a ``"pallas_tpu"`` key's data (``uint32[1, N]``)."""
    return [data[0, i] for i in range(data.shape[-1])]


def _split_words(key):
    return _words_of(random.key_data(key))


def _join_words(*words, impl):
    data = jnp.stack([jnp.asarray(w).astype(jnp.uint32) for w in words])
    return random.wrap_key_data(data.reshape(1, len(words)), impl=impl)


tpu_prng.define(tpu_prng.prng_seed_p, _seeded_state, kernel_only=True)
tpu_prng.define(tpu_prng.prng_random_bits_p, _draw, kernel_only=True)
tpu_prng.define(tpu_prng.prng_split_p, _split_words)
tpu_prng.define(tpu_prng.prng_join_p, _join_words)


def unwrap_pallas_seed(seed):
    """The uint32 scalar words of a ``"pallas_tpu"`` key."""
    return tpu_prng.prng_split_p.bind(seed)


def wrap_pallas_seed(*seeds, impl):
    """A key of ``impl`` (``"pallas_tpu"``) whose words are the integer scalars ``seeds``."""
    impl = _resolve_impl(impl)
    return tpu_prng.prng_join_p.bind(*[jnp.asarray(s).astype(jnp.uint32) for s in seeds],
                                     impl=impl)


def prng_seed(*seeds) -> None:
    """Seed the kernel's PRNG with one or more integer scalars (several are mixed), or with
    a ``"pallas_tpu"`` key's words."""
    if not seeds:
        raise ValueError("prng_seed: at least one seed is needed.")
    if len(seeds) == 1 and is_typed(seeds[0]) and \
            tpu_prng.KERNEL_IMPLS.get(seeds[0].aval.dtype._impl.name) == "words":
        seeds = unwrap_pallas_seed(seeds[0])
    state = tpu_prng.prng_seed_p.bind(*[_scalar_seed(s) for s in seeds])
    _state("prng_seed")[...] = state


set_seed = prng_seed


def prng_random_bits(shape):
    """An int32 array of ``shape`` of random bits from the kernel's PRNG."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    box = _state("prng_random_bits")
    state, bits = tpu_prng.prng_random_bits_p.bind(box[...], shape=shape)
    box[...] = state
    return bits


# --- "pallas_tpu" keys ----------------------------------------------------------------------
def _pallas_seed(seed):
    return jnp.broadcast_to(jnp.asarray(seed).astype(jnp.uint32), (1, 2))


def _pallas_split(key, shape):
    raise NotImplementedError("Cannot split a Pallas key. Use fold_in instead to generate new "
                              "keys.")


def _bit_width_32(bit_width) -> None:
    if bit_width != 32:
        raise ValueError(f"Bit width must be 32, got {bit_width}.")


def _pallas_bits(key, bit_width, shape):
    _bit_width_32(bit_width)
    state = tpu_prng.prng_seed_p.bind(*_words_of(key))
    _, bits = tpu_prng.prng_random_bits_p.bind(state, shape=tuple(shape))
    return lax.bitcast_convert_type(bits, jnp.uint32)


def _pallas_fold_in(key, data):
    return jnp.stack(tpu_prng.fold_words(*_words_of(key), data)).reshape(1, 2)


tpu_key_impl = impl_from_key_functions("pallas_tpu", "pl", (1, 2), _pallas_seed,
                                       _pallas_split, _pallas_bits, _pallas_fold_in)


def _stateful_bits(state, bit_width, shape):
    _bit_width_32(bit_width)
    _, bits = tpu_prng.prng_random_bits_p.bind(state, shape=tuple(shape))
    return lax.bitcast_convert_type(bits, jnp.uint32)


def _stateful_only(*args):
    raise NotImplementedError("The kernel PRNG's stateful key is only drawn from.")


tpu_internal_stateful_impl = impl_from_key_functions(
    "_pallas_internal_stateful", "_pl_stateful", (2,), _stateful_only, _stateful_only,
    _stateful_bits, _stateful_only)

for _impl, _kind in ((tpu_key_impl, "words"), (tpu_internal_stateful_impl, "stateful")):
    register_impl(_impl)
    tpu_prng.KERNEL_IMPLS[_impl.name] = _kind


def is_pallas_impl(impl) -> bool:
    """Whether ``impl`` is one of the kernel PRNG's implementations."""
    return getattr(impl, "name", None) in tpu_prng.KERNEL_IMPLS


def to_pallas_key(key):
    """A ``"pallas_tpu"`` key drawn from ``key`` (a typed or legacy key, or an array of
    them: one Pallas key each)."""
    draw = functools.partial(random.bits, shape=tpu_key_impl.key_shape, dtype=jnp.uint32)
    batched = np.ndim(key) > (0 if is_typed(key) else 1)
    data = vmap(draw)(key) if batched else draw(key)
    return random.wrap_key_data(data, impl=tpu_key_impl)


def _stateful(sampler, name: str):
    def sample(*args, **kwargs):
        box = _state(name)
        state = box[...]
        out = sampler(random.wrap_key_data(state, impl=tpu_internal_stateful_impl),
                      *args, **kwargs)
        # the draw advanced the PRNG (on the chip, by itself; here, by the same step)
        box[...] = tpu_prng.prng_random_bits_p.bind(state, shape=(1, 1))[0]
        return out
    sample.__name__ = name
    sample.__doc__ = (f"``jax.random.{sampler.__name__}`` drawing its bits from the kernel's "
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

