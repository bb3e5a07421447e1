"""The bytes each executable loaded from bytes came from (no jaxlib here).

XLA:CPU serialises an executable it loaded from bytes without its compiled functions
(running what it writes fails with "Function ... not found"), so serialising such an
executable hands back the bytes it was loaded from instead. The executable keeps those
bytes alive itself; the table below only points at them weakly.
"""
from __future__ import annotations

import weakref


class _Serialized:
    """The bytes an executable was loaded from, kept alive by the executable itself."""

    __slots__ = ("blob", "__weakref__")

    def __init__(self, blob: bytes):
        self.blob = blob


# id(executable) -> a weak reference to its _Serialized (the entry goes with the executable)
_loaded: dict = {}


def remember(exe, blob: bytes):
    """``exe``, remembered as loaded from ``blob``; returns ``exe``."""
    held = _Serialized(bytes(blob))
    key = id(exe)
    _loaded[key] = weakref.ref(held, lambda _, key=key: _loaded.pop(key, None))
    exe.keep_alive(held)
    return exe


def loaded_from(exe) -> bytes | None:
    """The bytes ``exe`` was loaded from, or None for an executable XLA compiled here."""
    ref = _loaded.get(id(exe))
    held = ref() if ref is not None else None
    return None if held is None else held.blob
