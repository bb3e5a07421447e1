"""Attention masks for splash attention, as ``splash_attention.splash_attention_mask``.

A mask is a lazy boolean [q_seq_len, kv_seq_len] array (True: the query may attend to the
key), sliced with ``mask[q_slice, kv_slice]`` into a numpy array; ``|`` and ``&`` combine
masks of one shape, and ``MultiHeadMask`` stacks one per head ([heads, q, kv]). The
computable masks (causal, local, chunked causal) evaluate a predicate of the query and key
positions on the slice asked for, never the whole matrix. The ``make_*`` functions build
dense numpy masks.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Mask", "LogicalOr", "LogicalAnd", "MultiHeadMask", "CausalMask",
           "ChunkedCausalMask", "LocalMask", "NumpyMask", "FullMask", "make_causal_mask",
           "make_local_attention_mask", "make_chunk_attention_mask", "make_random_mask"]


# --- dense masks --------------------------------------------------------------------------
def _positions(shape):
    q_len, kv_len = shape
    return (np.arange(q_len, dtype=np.int32)[:, None], np.arange(kv_len, dtype=np.int32)[None])


def make_causal_mask(shape: tuple[int, int], offset: int = 0) -> np.ndarray:
    """Query i sees keys 0 .. i + offset (a negative offset leaves the first rows empty)."""
    q, kv = _positions(shape)
    return q + offset >= kv


def make_local_attention_mask(shape: tuple[int, int], window_size: tuple[int | None, int | None],
                              *, offset: int = 0) -> np.ndarray:
    """Query i sees keys from i + offset - left to i + offset + right, ``window_size = (left,
    right)``, a side of None unbounded."""
    q, kv = _positions(shape)
    return _local(q, kv, window_size, offset)


def _local(q, kv, window_size, offset):
    left, right = window_size
    mask = np.ones((q.shape[0], kv.shape[1]), np.bool_)
    if left is not None:
        mask = mask & (q + offset - left <= kv)
    if right is not None:
        mask = mask & (q + offset + right >= kv)
    return mask


def make_chunk_attention_mask(shape: tuple[int, int], chunk_size: int) -> np.ndarray:
    """Causal within chunks of ``chunk_size`` positions, nothing across chunks."""
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    q, kv = _positions(shape)
    return (q // chunk_size == kv // chunk_size) & (q >= kv)


def make_random_mask(shape: tuple[int, int], sparsity: float, seed: int) -> np.ndarray:
    """Each element True with probability ``1 - sparsity`` (numpy's global generator, seeded
    with ``seed``)."""
    np.random.seed(seed)
    return np.random.binomial(n=1, p=1.0 - sparsity, size=shape).astype(np.bool_)


# --- lazy masks ---------------------------------------------------------------------------
class Mask:
    """A lazy [q_seq_len, kv_seq_len] boolean mask: ``shape``, ``mask[q_slice, kv_slice]``."""

    @property
    def shape(self) -> tuple[int, ...]:
        raise NotImplementedError(f"{type(self).__name__} does not define shape")

    def __getitem__(self, idx) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} cannot be sliced")

    def __bool__(self) -> bool:
        raise NotImplementedError("Conversion to bool is unsupported. Could be caused by using "
                                  "logical instead of bitwise operations on masks (use | "
                                  "and &).")

    def _same_shape(self, other):
        if self.shape != other.shape:
            raise ValueError(f"Invalid shape for other: {other.shape}, expected: {self.shape}")

    def __or__(self, other: Mask) -> Mask:
        self._same_shape(other)
        return LogicalOr(self, other)

    def __and__(self, other: Mask) -> Mask:
        self._same_shape(other)
        return LogicalAnd(self, other)


class _Combined(Mask):
    def __init__(self, left: Mask, right: Mask):
        if left.shape != right.shape:
            raise ValueError("Masks must have the same shape")
        self.left, self.right = left, right

    @property
    def shape(self):
        return self.left.shape

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.left == other.left and self.right == other.right

    def __hash__(self):
        return hash((type(self), self.left, self.right))


class LogicalOr(_Combined):
    """Where either mask is True."""

    def __getitem__(self, idx):
        return self.left[idx] | self.right[idx]


class LogicalAnd(_Combined):
    """Where both masks are True."""

    def __getitem__(self, idx):
        return self.left[idx] & self.right[idx]


@dataclasses.dataclass
class MultiHeadMask(Mask):
    """One mask per head, of one shape: a [heads, q_seq_len, kv_seq_len] mask, sliced with
    a head index or slice first."""

    masks: Sequence[Mask]

    def __post_init__(self):
        if not self.masks:
            raise ValueError("Unsupported empty tuple of masks")
        if not all(isinstance(m, Mask) for m in self.masks):
            raise ValueError("masks should be of type Mask")
        if any(isinstance(m, MultiHeadMask) for m in self.masks):
            raise ValueError("Nesting MultiHeadMasks is not supported")
        for m in self.masks[1:]:
            if m.shape != self.masks[0].shape:
                raise ValueError(f"Unexpected mask shape, got: {m.shape}, expected: "
                                 f"{self.masks[0].shape}")

    @property
    def shape(self):
        return (len(self.masks), *self.masks[0].shape)

    def __getitem__(self, idx):
        if not isinstance(idx, tuple) or len(idx) != 3:
            raise NotImplementedError(f"Unsupported slice: {idx}")
        heads, rest = idx[0], idx[1:]
        if isinstance(heads, (int, np.integer)):
            return self.masks[heads][rest]
        return np.stack([m[rest] for m in self.masks[heads]])

    def __eq__(self, other):
        if not isinstance(other, MultiHeadMask):
            return NotImplemented
        return tuple(self.masks) == tuple(other.masks)

    def __hash__(self):
        return hash((MultiHeadMask, *(hash(m) for m in self.masks)))


def _span(s, size: int) -> slice:
    """A contiguous slice made explicit (start and stop filled in)."""
    if not isinstance(s, slice) or s.step not in (None, 1):
        raise NotImplementedError(f"Unsupported slice: {s} (masks take contiguous slices)")
    start = 0 if s.start is None else s.start
    stop = size if s.stop is None else s.stop
    if not 0 <= start <= stop <= size:
        raise IndexError(f"slice {s} out of range for a mask dimension of {size}")
    return slice(start, stop)


class _ComputableMask(Mask):
    """A mask given by ``mask_function(q_ids [n, 1], kv_ids [1, m]) -> bool [n, m]``;
    ``q_sequence`` holds the query positions (shard_count: the query sequence is split in
    shard_count**2 even pieces)."""

    def __init__(self, shape: tuple[int, int], mask_function: Callable[..., Any],
                 shard_count: int = 1):
        self._shape = tuple(shape)
        self.mask_function = mask_function
        if self._shape[0] % (shard_count * shard_count):
            raise ValueError(f"Shard count squared ({shard_count * shard_count}) must divide Q "
                             f"seq_len ({self._shape[0]}) evenly.")
        self.q_sequence = np.arange(self._shape[0], dtype=np.int32)

    @property
    def shape(self):
        return self._shape

    def __getitem__(self, idx):
        if not isinstance(idx, tuple) or len(idx) != 2:
            raise NotImplementedError(f"Unsupported slice: {idx}")
        rows, cols = _span(idx[0], self._shape[0]), _span(idx[1], self._shape[1])
        q_ids = self.q_sequence[rows][:, None]
        kv_ids = np.arange(cols.start, cols.stop, dtype=np.int32)[None]
        return self.mask_function(q_ids, kv_ids)

    def _key(self):
        raise NotImplementedError(f"{type(self).__name__} defines no equality")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key() and np.array_equal(self.q_sequence,
                                                               other.q_sequence)

    def __hash__(self):
        return hash((type(self), self._key(), self.q_sequence.tobytes()))


class CausalMask(_ComputableMask):
    """Query i sees keys 0 .. i + offset."""

    def __init__(self, shape: tuple[int, int], offset: int = 0, shard_count: int = 1):
        self.offset = offset
        super().__init__(shape, lambda q, kv: q + self.offset >= kv, shard_count)

    def _key(self):
        return (self.shape, self.offset)


class ChunkedCausalMask(_ComputableMask):
    """Causal within chunks of ``chunk_size`` positions, nothing across chunks."""

    def __init__(self, shape: tuple[int, int], chunk_size: int, shard_count: int = 1):
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self.chunk_size = chunk_size
        super().__init__(
            shape, lambda q, kv: (q // self.chunk_size == kv // self.chunk_size) & (q >= kv),
            shard_count)

    def _key(self):
        return (self.shape, self.chunk_size)


class LocalMask(_ComputableMask):
    """Query i sees keys i + offset - left .. i + offset + right (``window_size = (left,
    right)``, a side of None unbounded)."""

    def __init__(self, shape: tuple[int, int], window_size: tuple[int | None, int | None],
                 offset: int, shard_count: int = 1):
        self.window_size = tuple(window_size)
        self.offset = offset
        super().__init__(shape, lambda q, kv: _local(q, kv, self.window_size, self.offset),
                         shard_count)

    def _key(self):
        return (self.shape, self.window_size, self.offset)


@dataclasses.dataclass
class NumpyMask(Mask):
    """A mask held as a dense 2D boolean numpy array."""

    array: np.ndarray

    def __post_init__(self):
        if self.array.ndim != 2:
            raise ValueError("Expected a 2-dim array")
        if self.array.dtype != np.bool_:
            raise ValueError("Mask must be a boolean array")

    @property
    def shape(self):
        return self.array.shape

    def __getitem__(self, idx):
        return self.array[idx]

    def __eq__(self, other):
        if not isinstance(other, NumpyMask):
            return NotImplemented
        return np.array_equal(self.array, other.array)

    def __hash__(self):
        return hash((NumpyMask, self.array.shape, self.array.tobytes()))


@dataclasses.dataclass(frozen=True)
class FullMask(Mask):
    """Every query sees every key."""

    _shape: tuple[int, int]

    def __post_init__(self):
        if not isinstance(self._shape, tuple):
            raise ValueError(f"Unsupported shape type: {type(self._shape)}")

    @property
    def shape(self):
        return self._shape

    def __getitem__(self, idx):
        if not isinstance(idx, tuple) or len(idx) != 2:
            raise NotImplementedError(f"Unsupported slice: {idx}")
        rows, cols = _span(idx[0], self._shape[0]), _span(idx[1], self._shape[1])
        return np.ones((rows.stop - rows.start, cols.stop - cols.start), np.bool_)
