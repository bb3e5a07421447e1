"""Key-reuse signatures (JAX's ``Sink``, ``Source``, ``Forward`` and ``KeyReuseSignature``):
what a primitive or jaxpr does with PRNG keys. ``Sink(i, mask)``: key input ``i`` is consumed
(where ``mask``); ``Source(j)``: key output ``j`` is fresh; ``Forward(i, j)``: key output ``j`` is
key input ``i`` itself. The checker using them is ``plax.interpreters.key_reuse``; a primitive
declares its signature in ``key_reuse_rules``."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Sink", "Source", "Forward", "KeyReuseSignature"]


def _frozen_mask(mask):
    """``mask`` as a bool or a read-only bool array with both values (all or none: a bool)."""
    if isinstance(mask, np.ndarray):
        if mask.dtype != np.bool_:
            raise TypeError(f"a key-reuse mask is a bool array, got dtype {mask.dtype}")
        if not mask.any():  # (an empty mask, from a zero-sized axis, consumes nothing)
            return False
        if mask.all():
            return True
        mask = np.array(mask, copy=True)
        mask.flags.writeable = False
        return mask
    if isinstance(mask, (bool, np.bool_)):
        return bool(mask)
    raise TypeError(f"a key-reuse mask is a bool or a bool array, got {mask!r}")


class _Mark:
    """An input consumed or an output made fresh (``idx``), in whole or where ``mask`` is
    True. Immutable and hashable."""

    __slots__ = ("idx", "mask")

    def __init__(self, idx: int, mask=True):
        if not isinstance(idx, int):
            raise TypeError(f"{type(self).__name__} takes an int index, got {idx!r}")
        object.__setattr__(self, "idx", idx)
        object.__setattr__(self, "mask", _frozen_mask(mask))

    def __setattr__(self, name, value):
        raise ValueError(f"{type(self).__name__} is immutable")

    def _mask_key(self):
        m = self.mask
        return m if isinstance(m, bool) else (m.shape, tuple(m.ravel().tolist()))

    def __eq__(self, other):
        return type(other) is type(self) and other.idx == self.idx and \
            other._mask_key() == self._mask_key()

    def __hash__(self):
        return hash((type(self), self.idx, self._mask_key()))

    def __repr__(self):
        name = type(self).__name__
        return f"{name}({self.idx})" if self.mask is True else f"{name}({self.idx}, {self.mask})"


class Sink(_Mark):
    """Key input ``idx`` is consumed (where ``mask``)."""


class Source(_Mark):
    """Key output ``idx`` is a fresh, unconsumed key."""


class Forward(NamedTuple):
    """Key output ``out_idx`` is key input ``in_idx`` itself."""

    in_idx: int
    out_idx: int

    def __repr__(self):
        return f"Forward({self.in_idx}, {self.out_idx})"


def _order(item):
    if isinstance(item, Forward):
        return (1, "", item.in_idx, item.out_idx)
    return (0, type(item).__name__, item.idx, 0)


class KeyReuseSignature:
    """What a primitive or jaxpr does with keys: a set of ``Sink``, ``Source`` and
    ``Forward`` items (order does not matter)."""

    __slots__ = ("_items",)

    def __init__(self, *items):
        self._items = frozenset(items)

    def __eq__(self, other):
        return isinstance(other, KeyReuseSignature) and other._items == self._items

    def __hash__(self):
        return hash(self._items)

    def __repr__(self):
        return "KeyReuseSignature(" + ", ".join(map(repr, sorted(self._items, key=_order))) + ")"

    sinks = property(lambda self: [i for i in self._items if isinstance(i, Sink)])
    sources = property(lambda self: [i for i in self._items if isinstance(i, Source)])
    forwards = property(lambda self: [i for i in self._items if isinstance(i, Forward)])
