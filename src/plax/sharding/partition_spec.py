"""PartitionSpec: which mesh axes each dimension of an array is split over."""
from __future__ import annotations

__all__ = ["PartitionSpec", "P", "UNCONSTRAINED"]


class _Unconstrained:
    """``P.UNCONSTRAINED``: a dimension whose layout the compiler chooses."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "UNCONSTRAINED"

    def __reduce__(self):
        return (_Unconstrained, ())


UNCONSTRAINED = _Unconstrained()


def _check_entry(entry):
    if entry is None or entry is UNCONSTRAINED or isinstance(entry, str):
        return entry
    if isinstance(entry, (tuple, list)):
        if not all(isinstance(a, str) for a in entry):
            raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a tuple of "
                            f"mesh axis names; got {entry!r}.")
        return tuple(entry) if len(entry) != 1 else entry[0]  # ('a',) means 'a'

    raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a tuple of mesh "
                    f"axis names; got {entry!r}.")


class PartitionSpec(tuple):
    """A tuple, one entry per array dimension: ``None`` (not split), a mesh axis name, or a
    tuple of mesh axis names (split over their product, the first axis major).

    Trailing dimensions that the spec does not mention are not split.
    ``P.UNCONSTRAINED`` leaves a dimension's layout to the compiler.
    """

    UNCONSTRAINED = UNCONSTRAINED

    def __new__(cls, *partitions):
        return tuple.__new__(cls, tuple(_check_entry(p) for p in partitions))

    def __repr__(self):
        return f"P({', '.join(repr(p) for p in self)}{',' if len(self) == 1 else ''})"

    def __reduce__(self):
        return (PartitionSpec, tuple(self))

    def __eq__(self, other):
        if isinstance(other, PartitionSpec) or isinstance(other, tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):  # specs that differ only by trailing Nones hash alike
        return hash(_normalized(self))

    def axes_of(self, dim: int) -> tuple:
        """The mesh axes dimension ``dim`` is split over (empty: not split)."""
        if dim >= len(self):
            return ()
        entry = self[dim]
        if entry is None or entry is UNCONSTRAINED:
            return ()
        return (entry,) if isinstance(entry, str) else tuple(entry)

    def mesh_axes(self) -> list:
        """Every mesh axis the spec names, in order of appearance."""
        return [a for d in range(len(self)) for a in self.axes_of(d)]


def _normalized(spec) -> tuple:
    """The spec without trailing Nones (what a layout depends on)."""
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


P = PartitionSpec


class _InferType:
    """``shard_map(in_specs=Infer)``: each argument's spec is read from its sharding in types."""

    def __repr__(self):
        return "Infer"


Infer = _InferType()
