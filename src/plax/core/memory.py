"""``plax.memory``: the memory spaces an array can live in (JAX's ``jax.memory.Space``).

``Space.Device`` is a device's own memory, ``Space.Host`` host memory reachable from it
(JAX's ``'pinned_host'`` memory kind), ``Space.Any`` no preference. plax keeps every array
in device memory (on CPU the two are one), so no plax type carries another space yet.
"""
from __future__ import annotations

import enum
import types

__all__ = ["MemorySpace", "memory"]


class MemorySpace(enum.Enum):
    """Where an array's memory is: on the device, on the host, or anywhere."""

    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self):
        return f"MemorySpace.{self.name}"

    __hash__ = object.__hash__  # by identity, as JAX's


memory = types.SimpleNamespace(Space=MemorySpace)
