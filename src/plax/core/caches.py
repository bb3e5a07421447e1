"""Caches: one weak-keyed helper, and the registry ``plax.clear_caches()`` walks.

Every cache in plax is made here (``WeakKeyCache`` for values derived from a
jaxpr or a function, ``BoundedCache`` for values keyed by plain data), so that
clearing them all is one loop and none of them keeps a dead user function or
jaxpr alive.
"""
from __future__ import annotations

import weakref

_registry: list = []


def register_cache(cache):
    """Add ``cache`` (anything with ``clear()``) to what ``clear_all()`` clears."""
    _registry.append(cache)
    return cache


def clear_all() -> None:
    """Empty every registered cache."""
    for cache in _registry:
        cache.clear()


def registered_caches() -> list:
    return list(_registry)


class WeakKeyCache:
    """``(owner, key) -> value``, holding ``owner`` (a jaxpr, a function) only weakly.

    An entry disappears with its owner. ``key`` is any hashable describing the
    variant (masks, avals, axis data).
    """

    __slots__ = ("name", "_entries")

    def __init__(self, name: str):
        self.name = name
        self._entries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        register_cache(self)

    def get(self, owner, key):
        per_owner = self._entries.get(owner)
        return None if per_owner is None else per_owner.get(key)

    def put(self, owner, key, value):
        per_owner = self._entries.get(owner)
        if per_owner is None:
            per_owner = self._entries[owner] = {}
        per_owner[key] = value
        return value

    def variants(self, owner) -> list:
        """The keys cached for ``owner``, oldest first."""
        return list(self._entries.get(owner, ()))

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return sum(len(v) for v in list(self._entries.values()))

    def __repr__(self):
        return f"WeakKeyCache({self.name!r}, {len(self)} entries)"


class BoundedCache:
    """``key -> value`` for plain-data keys, forgetting the oldest entries beyond ``maxsize``
    (first in, first out: a lookup costs one dict access)."""

    __slots__ = ("name", "maxsize", "_entries", "get")

    def __init__(self, name: str, maxsize: int = 4096):
        self.name = name
        self.maxsize = maxsize
        self._entries: dict = {}
        self.get = self._entries.get
        register_cache(self)

    def put(self, key, value):
        entries = self._entries
        if len(entries) >= self.maxsize and key not in entries:
            try:  # (another thread may evict the same oldest entry first)
                entries.pop(next(iter(entries)), None)
            except (StopIteration, RuntimeError):
                pass
        entries[key] = value
        return value

    def __contains__(self, key) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()

    def values(self) -> list:
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self):
        return f"BoundedCache({self.name!r}, {len(self)} entries)"
