"""Key path entries of pytrees (``SequenceKey``, ``DictKey``, ...) and ``keystr``.

They name how to reach a leaf from the root: ``tree_flatten_with_path`` pairs
each leaf with a tuple of them.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any


class _PathEntry:
    """A path entry holding one value (the field ``__match_args__`` names): equal to an entry
    of its own class with an equal value, hashed by it, immutable. (A plain class: as a
    frozen dataclass each cost half a millisecond of ``import plax``.)"""

    __slots__ = ()
    __match_args__: tuple = ()

    @property
    def _value(self):
        return getattr(self, self.__match_args__[0])

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._value == other._value

    def __hash__(self):
        return hash((self._value,))

    def __repr__(self):
        return f"{type(self).__name__}({self.__match_args__[0]}={self._value!r})"

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is "
                             f"immutable")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is "
                             f"immutable")

    def __reduce__(self):
        return type(self), (self._value,)


class SequenceKey(_PathEntry):
    """Path entry for the ``idx``-th element of a tuple or list."""

    __slots__ = ("idx",)
    __match_args__ = ("idx",)
    idx: int

    def __init__(self, idx: int):
        object.__setattr__(self, "idx", idx)

    def __str__(self):
        return f"[{self.idx!r}]"


class DictKey(_PathEntry):
    """Path entry for the value stored under ``key`` in a mapping."""

    __slots__ = ("key",)
    __match_args__ = ("key",)
    key: Hashable

    def __init__(self, key: Hashable):
        object.__setattr__(self, "key", key)

    def __str__(self):
        return f"[{self.key!r}]"


class GetAttrKey(_PathEntry):
    """Path entry for attribute ``name`` (namedtuples, dataclasses)."""

    __slots__ = ("name",)
    __match_args__ = ("name",)
    name: str

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)

    def __str__(self):
        return f".{self.name}"


class FlattenedIndexKey(_PathEntry):
    """Path entry for the ``key``-th child of a node registered without keys."""

    __slots__ = ("key",)
    __match_args__ = ("key",)
    key: int

    def __init__(self, key: int):
        object.__setattr__(self, "key", key)

    def __str__(self):
        return f"[<flat index {self.key}>]"


KeyEntry = Any
KeyPath = tuple


def _simple_key_str(entry) -> str:
    if isinstance(entry, SequenceKey):
        return str(entry.idx)
    if isinstance(entry, DictKey):
        return str(entry.key)
    if isinstance(entry, GetAttrKey):
        return entry.name
    if isinstance(entry, FlattenedIndexKey):
        return str(entry.key)
    return str(entry)


def keystr(keys, *, simple: bool = False, separator: str = "") -> str:
    """Render a key path as a string, e.g. ``"['a'][1].x"`` (or ``"a/1/x"``
    with ``simple=True, separator='/'``)."""
    to_str = _simple_key_str if simple else str
    return separator.join(to_str(k) for k in keys)
