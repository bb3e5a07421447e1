"""``JAXSparse``: what every sparse array type shares (shape, size, ndim, ``.T``, repr), and
the operators a format may leave out, which raise ``NotImplementedError``; ``StoredBuffers``,
the base of the formats that keep their buffers as named attributes, and ``BatchedSparse``,
what BCOO and BCSR share (layout from the buffers' ranks, the SparseInfo pytree)."""
from __future__ import annotations

import abc
import math

from plax import numpy as jnp
from plax.core.trace import Tracer, get_aval
from plax.experimental.sparse.util import SparseInfo, canonical_shape
from plax.transforms.vmap import BatchTracer

__all__ = ["JAXSparse", "StoredBuffers", "BatchedSparse", "check_sparse", "buffer_shape",
           "mapped_dim"]


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


class StoredBuffers(JAXSparse):
    """A sparse format whose buffers are the attributes named in ``_buffer_names`` (``data``
    first, then the index buffers); ``_noun`` names a value in messages."""
    _buffer_names: tuple = ("data",)
    _noun = "array"

    @property
    def _bufs(self) -> tuple:
        return tuple(getattr(self, name) for name in self._buffer_names)

    def _set_bufs(self, bufs):
        for name, buf in zip(self._buffer_names, bufs):
            setattr(self, name, buf)

    @property
    def dtype(self):
        return self.data.dtype


def check_sparse(x, cls, name: str, arg: str = "mat"):
    """``name``'s check that its argument ``arg`` is a ``cls`` value."""
    if not isinstance(x, cls):
        raise TypeError(f"{name}: {arg} must be a {cls.__name__} {cls._noun}, got "
                        f"{type(x).__name__}.")


def buffer_shape(x):
    """A pytree leaf's shape as a tuple; None for a leaf that is not an array (vmap's axis
    specs are unflattened as sparse arrays too)."""
    shape = getattr(x, "shape", None)
    return tuple(shape) if isinstance(shape, tuple) else None


def mapped_dim(*bufs):
    """The dimension vmap maps the buffers over, when they are its per-example values."""
    return next((x.batch_dim for x in bufs
                 if isinstance(x, BatchTracer) and x.batch_dim is not None), None)


class BatchedSparse(StoredBuffers):
    """What BCOO and BCSR share: leading batch dimensions, an index buffer shaped ``batch +
    (nse,)`` and ``_index_dims - 1`` more, data shaped ``batch + (nse,) + dense``, the flags
    ``indices_sorted``/``unique_indices``, and a pytree whose static part is a SparseInfo.
    A format gives ``_validate(*buffers, shape)`` and ``_shape_for_buffers(shape, *buffers)``
    (the shape vmap's per-example or batched buffers give)."""
    _index_dims: int
    _args_text: str  # how the format's constructor error describes ``args``

    def __init__(self, args, *, shape, indices_sorted: bool = False,
                 unique_indices: bool = False):
        names = self._buffer_names
        try:
            bufs = tuple(args)
        except TypeError:
            bufs = None
        if bufs is None or len(bufs) != len(names):
            raise TypeError(f"{type(self).__name__} expects args=({', '.join(names)}), "
                            f"{self._args_text}, got {type(args).__name__}.")
        self._set_bufs(map(jnp.asarray, bufs))
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices
        super().__init__(args, shape=shape)
        self._validate(*map(get_aval, self._bufs), self.shape)

    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - self._index_dims

    @property
    def nse(self) -> int:
        return self.indices.shape[self.n_batch]

    @property
    def n_dense(self) -> int:
        return self.data.ndim - 1 - self.n_batch

    def _repr_details(self) -> str:
        out = f", nse={self.nse}"
        if self.n_batch:
            out += f", n_batch={self.n_batch}"
        if self.n_dense:
            out += f", n_dense={self.n_dense}"
        return out

    def tree_flatten(self):
        return self._bufs, self._info

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        if not isinstance(aux_data, SparseInfo):
            raise ValueError(f"{cls.__name__}.tree_unflatten: invalid aux_data={aux_data!r}")
        obj = object.__new__(cls)
        obj._set_bufs(children)
        obj.shape = cls._shape_for_buffers(tuple(aux_data.shape), *children)
        obj.indices_sorted = aux_data.indices_sorted
        obj.unique_indices = aux_data.unique_indices
        return obj
