"""``plax.experimental.random``: a stateful random generator, as ``jax.experimental.random``.

``stateful_rng(seed)`` returns a ``StatefulPRNG``: a typed PRNG key and a counter held in a
``plax.Ref``. Each draw folds the counter into the key and increments it, so repeated
draws differ, also inside ``jit`` (the counter is a reference, carried in and out) and under
``vmap`` of a ``split`` generator. The draws are those of ``plax.random`` on the key
``fold_in(base_key, counter)``, as JAX's are. Like any reference it cannot be returned
from a transformed function or carried through a loop.
"""
from __future__ import annotations

import dataclasses
import operator

import numpy as np

from plax import random as _random
from plax import ref as _ref
from plax.core import dtypes
from plax.core.trace import EvalTrace, current_trace
from plax.tree_util import register_dataclass

__all__ = ["StatefulPRNG", "stateful_rng"]


def _size(size, *args) -> tuple:
    """A draw's shape: ``size`` as a tuple, else the broadcast shape of ``args``."""
    if size is None:
        return tuple(np.broadcast_shapes(*(np.shape(a) for a in args)))
    if isinstance(size, (int, np.integer)):
        return (operator.index(size),)
    return tuple(operator.index(s) for s in size)


@register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class StatefulPRNG:
    """A random generator updating its own state (make one with ``stateful_rng``).

    ``_base_key`` is a typed PRNG key; ``_counter`` an integer ``Ref`` counting the keys
    drawn so far."""

    _base_key: object
    _counter: object

    def __post_init__(self):
        key_dtype = getattr(self._base_key, "dtype", None)
        if key_dtype is None or not dtypes.issubdtype(key_dtype, dtypes.prng_key):
            raise ValueError(f"Expected base_key to be a typed PRNG key; got {self._base_key}")
        if not _is_ref(self._counter):
            raise ValueError(f"Expected counter to be a scalar integer ref; got "
                             f"{self._counter}")

    def key(self, shape=()):
        """A new key (or ``shape`` of them), each draw a different one."""
        if self._base_key.shape:
            raise ValueError("cannot operate on split stateful generator: vmap over it "
                             "first (each example then holds one key)")
        key = _random.fold_in(self._base_key, _ref.get(self._counter))
        _ref.addupdate(self._counter, ..., 1)
        shape = _size(shape)
        return _random.split(key, shape) if shape else key

    def random(self, size=None, dtype=float):
        """Floats uniform in [0, 1)."""
        return _random.uniform(self.key(), shape=_size(size), dtype=dtype)

    def uniform(self, low=0, high=1, size=None, *, dtype=float):
        """Floats uniform in [low, high)."""
        return _random.uniform(self.key(), _size(size, low, high), minval=low, maxval=high,
                               dtype=dtype)

    def normal(self, loc=0, scale=1, size=None, *, dtype=float):
        """Normally distributed floats of mean ``loc`` and deviation ``scale``."""
        import plax.numpy as jnp
        norm = _random.normal(self.key(), _size(size, loc, scale), dtype)
        return (jnp.asarray(loc) + jnp.asarray(scale) * norm).astype(dtype)

    def integers(self, low, high=None, size=None, *, dtype=int):
        """Integers uniform in [low, high) ([0, low) when ``high`` is None)."""
        if high is None:
            low, high = 0, low
        return _random.randint(self.key(), _size(size, low, high), minval=low, maxval=high,
                               dtype=dtype)

    def split(self, num) -> "StatefulPRNG":
        """One generator holding ``num`` independent ones (its key has shape ``num``), to
        be mapped over with ``vmap``."""
        import plax.numpy as jnp
        return StatefulPRNG(self.key(num), _ref.new_ref(jnp.zeros(num, dtype=int)))

    def spawn(self, n_children: int) -> list:
        """``n_children`` independent generators, as a list."""
        return [type(self)(k, _ref.new_ref(0)) for k in self.key(n_children)]


def _is_ref(x) -> bool:
    if isinstance(x, _ref.Ref):
        return True
    aval = getattr(x, "aval", None)
    return isinstance(aval, _ref.AbstractRef)


def stateful_rng(seed=None, *, impl=None) -> StatefulPRNG:
    """A ``StatefulPRNG`` seeded with ``seed`` (an integer; at top level it may be omitted,
    and NumPy's entropy seeds it), on PRNG implementation ``impl`` (default: the
    default's)."""
    if seed is None:
        if not isinstance(current_trace(), EvalTrace):
            raise TypeError("When used within transformed code, jax.experimental.random."
                            "stateful_rng() requires an explicit seed to be set.")
        seed = np.int64(np.random.SeedSequence().entropy & np.iinfo(np.int64).max)
    return StatefulPRNG(_random.key(seed, impl=impl), _ref.new_ref(0))
