"""Layout and Format: how an array's elements sit in device memory, and with what sharding.

``plax.experimental.layout`` is their public home; they live here, below the API, so that
``device_put`` can take a ``Format``.
"""
from __future__ import annotations


class Layout:
    """A dimension order, most major first (``Layout.AUTO``: let the compiler choose)."""

    AUTO: "Layout"

    def __init__(self, major_to_minor: tuple = (), _tiling=None,
                 _sub_byte_element_size_in_bits: int = 0):
        self.major_to_minor = tuple(int(d) for d in major_to_minor)
        self._tiling = None if _tiling is None else tuple(tuple(t) for t in _tiling)
        self._sub_byte_element_size_in_bits = int(_sub_byte_element_size_in_bits)

    def _key(self):
        return (self.major_to_minor, self._tiling, self._sub_byte_element_size_in_bits)

    def __eq__(self, other):
        return isinstance(other, Layout) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        if self is Layout.AUTO:
            return "AUTO"
        extra = f", _tiling={self._tiling}" if self._tiling else ""
        return f"Layout(major_to_minor={self.major_to_minor}{extra})"


Layout.AUTO = Layout.__new__(Layout)
Layout.AUTO.major_to_minor, Layout.AUTO._tiling = None, None
Layout.AUTO._sub_byte_element_size_in_bits = 0


class Format:
    """A layout (or None: the default) and a sharding (or None) for an array."""

    __slots__ = ("layout", "sharding")

    def __init__(self, layout: Layout | None = None, sharding=None):
        if layout is not None and not isinstance(layout, Layout):
            raise TypeError(f"Format: layout must be a Layout or None, got {layout!r}")
        self.layout = layout
        self.sharding = sharding

    def __eq__(self, other):
        return isinstance(other, Format) and (self.layout, self.sharding) == (
            other.layout, other.sharding)

    def __hash__(self):
        return hash((self.layout, self.sharding))

    def __repr__(self):
        return f"Format(layout={self.layout!r}, sharding={self.sharding!r})"


def default_layout(ndim: int) -> Layout:
    """The layout XLA gives an ndim array by default: row-major (major to minor 0..ndim-1)."""
    return Layout(tuple(range(ndim)))
