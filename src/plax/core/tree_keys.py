"""Key path entries of pytrees (``SequenceKey``, ``DictKey``, ...) and ``keystr``.

They name how to reach a leaf from the root: ``tree_flatten_with_path`` pairs
each leaf with a tuple of them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any



@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """Path entry for the ``idx``-th element of a tuple or list."""

    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """Path entry for the value stored under ``key`` in a mapping."""

    key: Hashable

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """Path entry for attribute ``name`` (namedtuples, dataclasses)."""

    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """Path entry for the ``key``-th child of a node registered without keys."""

    key: int

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
