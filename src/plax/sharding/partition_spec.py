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
        for a in entry:
            if isinstance(a, (tuple, list)):
                raise ValueError("A tuple inside PartitionSpec cannot contain a nested tuple. "
                                 f"Got partition: {entry!r} and the nested tuple: {a!r}")
        if not all(isinstance(a, str) for a in entry):
            raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a tuple of "
                            f"mesh axis names; got {entry!r}.")
        if not entry:
            return None  # () means not split
        return tuple(entry) if len(entry) != 1 else entry[0]  # ('a',) means 'a'

    raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a tuple of mesh "
                    f"axis names; got {entry!r}.")


def _check_axis_set(axes, what: str) -> frozenset:
    if not isinstance(axes, (set, frozenset)):
        raise TypeError(f"{what} argument of PartitionSpec should of type `frozenset` or `set`. "
                        f"Got type {axes!r}")
    if None in axes:
        raise ValueError(f"{what} cannot contain None. All elements in {what} should refer to "
                         "the mesh axes.")
    return frozenset(axes)


def _set_text(axes) -> str:
    return "{" + ", ".join(repr(a) for a in sorted(axes, key=str)) + "}"


# Specs are interned: building the same spec twice gives the same object (as JAX).
_interned: dict = {}
_MAX_INTERNED = 8192


class PartitionSpec(tuple):
    """A tuple, one entry per array dimension: ``None`` (not split), a mesh axis name, or a
    tuple of mesh axis names (split over their product, the first axis major).

    Trailing dimensions that the spec does not mention are not split.
    ``P.UNCONSTRAINED`` leaves a dimension's layout to the compiler. ``unreduced`` and
    ``reduced`` name Explicit mesh axes the value is a partial sum over (``unreduced``) or
    replicated over with an unreduced transpose (``reduced``).
    """

    UNCONSTRAINED = UNCONSTRAINED
    unreduced = reduced = frozenset()

    def __init_subclass__(cls, **kwargs):
        raise TypeError("Subclassing `jax.P` is prohibited.")

    def __new__(cls, *partitions, unreduced=frozenset(), reduced=frozenset()):
        entries = tuple(_check_entry(p) for p in partitions)
        unreduced = _check_axis_set(unreduced, "unreduced")
        reduced = _check_axis_set(reduced, "reduced")
        key = (entries, unreduced, reduced)
        spec = _interned.get(key)
        if spec is not None:
            return spec
        if unreduced or reduced:
            named = {a for e in entries for a in _entry_axes(e)}
            for what, axes in (("unreduced", unreduced), ("reduced", reduced)):
                if named & axes:
                    raise ValueError(f"partitions cannot overlap with {what} axes passed to "
                                     f"PartitionSpec. Got partitions: {entries!r} and {what} "
                                     f"axes: {axes!r}")
            if unreduced & reduced:
                raise ValueError("`unreduced` and `reduced` argument to PartitionSpec cannot "
                                 f"overlap. Got unreduced: {unreduced!r} and reduced: "
                                 f"{reduced!r}")
        spec = tuple.__new__(cls, entries)
        spec.unreduced, spec.reduced = unreduced, reduced
        if len(_interned) >= _MAX_INTERNED:
            _interned.clear()
        _interned[key] = spec
        return spec

    @property
    def partitions(self) -> tuple:
        """The per-dimension entries as a plain tuple."""
        return tuple(self)

    def _extras_text(self) -> str:
        extras = [f"{what}={_set_text(axes)}" for what, axes in
                  (("unreduced", self.unreduced), ("reduced", self.reduced)) if axes]
        return ", ".join(extras)

    def __repr__(self):
        entries = ", ".join(repr(p) for p in self)
        extras = self._extras_text()
        if extras:
            return f"P({entries}{', ' if entries else ''}{extras})"
        return f"P({entries}{',' if len(self) == 1 else ''})"

    __str__ = __repr__

    def __reduce__(self):
        return (_rebuild, (tuple(self), self.unreduced, self.reduced))

    def __eq__(self, other):
        if isinstance(other, PartitionSpec):
            return (tuple(self) == tuple(other) and self.unreduced == other.unreduced
                    and self.reduced == other.reduced)
        if isinstance(other, tuple):
            return not (self.unreduced or self.reduced) and tuple(self) == other
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):  # specs that differ only by trailing Nones hash alike
        return hash((_normalized(self), self.unreduced, self.reduced))

    def __add__(self, other):
        if isinstance(other, PartitionSpec):
            return PartitionSpec(*self, *other, unreduced=self.unreduced | other.unreduced,
                                 reduced=self.reduced | other.reduced)
        if isinstance(other, tuple):
            if self.unreduced or self.reduced:
                raise TypeError(f"other {other!r} cannot be of instance `tuple` when self "
                                f"{self!r} has unreduced in `__add__` of PartitionSpec.")
            return PartitionSpec(*self, *other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, tuple):
            if self.unreduced or self.reduced:
                raise TypeError(f"other {other!r} cannot be of instance `tuple` when self "
                                f"{self!r} has unreduced in `__radd__` of PartitionSpec.")
            return PartitionSpec(*other, *self)
        return NotImplemented

    def update(self, **changes) -> "PartitionSpec":
        """A copy with some of ``partitions=``, ``unreduced=``, ``reduced=`` replaced."""
        unknown = sorted(set(changes) - {"partitions", "unreduced", "reduced"})
        if unknown:
            raise TypeError(f"PartitionSpec.update got unexpected keyword argument(s) {unknown}.")
        return PartitionSpec(*changes.get("partitions", tuple(self)),
                             unreduced=changes.get("unreduced", self.unreduced),
                             reduced=changes.get("reduced", self.reduced))

    def _normalized_spec_for_aval(self, ndim: int) -> "PartitionSpec":
        """This spec padded with None to ``ndim`` entries."""
        return self.update(partitions=tuple(self) + (None,) * (ndim - len(self)))

    def axes_of(self, dim: int) -> tuple:
        """The mesh axes dimension ``dim`` is split over (empty: not split)."""
        if dim >= len(self):
            return ()
        return _entry_axes(self[dim])

    def mesh_axes(self) -> list:
        """Every mesh axis the spec names, in order of appearance."""
        return [a for d in range(len(self)) for a in self.axes_of(d)]


def _entry_axes(entry) -> tuple:
    if entry is None or entry is UNCONSTRAINED:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def _rebuild(partitions, unreduced, reduced) -> PartitionSpec:
    return PartitionSpec(*partitions, unreduced=unreduced, reduced=reduced)


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
