"""``JAXSparse``: what every sparse array type shares (shape, size, ndim, ``.T``, repr), and
the operators a format may leave out, which raise ``NotImplementedError``."""
from __future__ import annotations

import abc
import math

from plax.core.trace import Tracer
from plax.experimental.sparse.util import canonical_shape

__all__ = ["JAXSparse"]


class JAXSparse(abc.ABC):
    """Base class of the sparse array types: a shape and buffers (``data`` first)."""

    __hash__ = None  # arrays are not hashable

    def __init__(self, args, *, shape):
        self.shape = canonical_shape(shape)

    @property
    @abc.abstractmethod
    def dtype(self):
        """The element type."""

    @property
    @abc.abstractmethod
    def nse(self) -> int:
        """The number of stored elements (per batch)."""

    @abc.abstractmethod
    def tree_flatten(self):
        """``(buffers, static description)``."""

    @classmethod
    @abc.abstractmethod
    def tree_unflatten(cls, aux_data, children):
        """The array rebuilt from its buffers and static description."""

    @abc.abstractmethod
    def transpose(self, axes=None):
        """The array with its dimensions permuted (reversed by default)."""

    @abc.abstractmethod
    def todense(self):
        """The dense array."""

    def __len__(self):
        return self.shape[0]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def T(self):
        return self.transpose()

    def _repr_details(self) -> str:
        return f", nse={self.nse}"

    def __repr__(self):
        name = type(self).__name__
        try:
            text = f"{name}({self.dtype}{list(self.shape)}{self._repr_details()})"
        except Exception:  # a half-built array (e.g. tree leaves that are not arrays)
            text = f"{name}(<invalid>)"
        data = getattr(self, "data", None)
        if isinstance(data, Tracer):
            text = f"{type(data).__name__}[{text}]"
        return text

    def block_until_ready(self):
        """Wait until every buffer is computed; returns the array."""
        for buf in self.tree_flatten()[0]:
            buf.block_until_ready()
        return self


def _not_implemented(name: str):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self)}.{name}")
    method.__name__ = name
    method.__doc__ = "Not implemented by every sparse format (raises NotImplementedError)."
    return method


# Operations a format may leave out (as in JAX, they raise rather than being abstract).
for _name in ("sum", "__neg__", "__pos__", "__matmul__", "__rmatmul__", "__mul__", "__rmul__",
              "__add__", "__radd__", "__sub__", "__rsub__", "__getitem__"):
    setattr(JAXSparse, _name, _not_implemented(_name))
del _name
