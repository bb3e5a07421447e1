"""Pallas's description types: BlockSpec, GridSpec, block dimensions, memory spaces, hints."""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Callable

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.refs import AbstractRef

__all__ = ["BlockSpec", "GridSpec", "Squeezed", "squeezed", "Blocked", "Element",
           "BoundedSlice", "Indirect", "BlockDim", "RevisitMode",
           "Buffered", "CostEstimate", "CompilerParams", "MemorySpace", "MemoryRef", "ANY",
           "HOST", "no_block_spec", "NoBlockSpec"]


class _NoBlockSpec:
    """No BlockSpec given: the block is the whole array."""

    def __repr__(self):
        return "NoBlockSpec"


no_block_spec = _NoBlockSpec()
NoBlockSpec = no_block_spec


@dataclasses.dataclass(frozen=True)
class Squeezed:
    """A block dimension of size 1 left out of the kernel's reference (as ``None``)."""


squeezed = Squeezed()


@dataclasses.dataclass(frozen=True)
class Blocked:
    """A block dimension of ``block_size`` elements (the same as the int)."""

    block_size: int


@dataclasses.dataclass(frozen=True)
class Element:
    """A block dimension of ``block_size`` elements whose index map gives the element offset
    (not the block index), into the array padded by ``padding`` = (low, high) elements."""

    block_size: int
    padding: tuple = (0, 0)

    def __str__(self):
        if tuple(self.padding) == (0, 0):
            return f"Element({self.block_size})"
        return f"Element({self.block_size}, padding={tuple(self.padding)})"


@dataclasses.dataclass(frozen=True)
class BoundedSlice:
    """A block dimension whose index map gives a ``pl.ds`` of at most ``block_size``
    elements (Mosaic TPU only; plax's pallas_call refuses it)."""

    block_size: int

    def __repr__(self):
        return f"BoundedSlice({self.block_size})"


@dataclasses.dataclass(frozen=True)
class Indirect:
    """A block dimension indexed by an array of indices: a gather for inputs, a scatter for
    outputs (plax's pallas_call refuses it)."""

    block_size: int

    def __repr__(self):
        return f"Indirect({self.block_size})"


BlockDim = Element | Squeezed | Blocked | BoundedSlice | Indirect


class RevisitMode(enum.Enum):
    """How an output block visited again later is handled (``Buffered(revisit=...)``): only
    in consecutive steps (IMMEDIATE), or at any step (ANY)."""

    IMMEDIATE = "immediate"
    ANY = "any"


@dataclasses.dataclass(frozen=True)
class Buffered:
    """A pipelining hint: how many buffers a block gets (no effect in interpret mode)."""

    buffer_count: int
    use_lookahead: bool = False
    revisit: Any = None


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """What a kernel costs, for XLA's scheduler (no effect in interpret mode)."""

    flops: int
    transcendentals: int
    bytes_accessed: int
    remote_bytes_transferred: int = 0


class CompilerParams:
    """The base of the backends' compiler parameters (plax's interpret mode ignores them)."""

    BACKEND: str | None = None


@dataclasses.dataclass(frozen=True)
class MemoryRef:
    """A buffer of ``inner_aval`` in ``memory_space``: a scratch buffer's description."""

    inner_aval: Any
    memory_space: Any

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)

    def get_array_aval(self):
        return self.inner_aval

    def get_ref_aval(self) -> AbstractRef:
        return AbstractRef(self.inner_aval, memory_space=self.memory_space)


class BufferSpace:
    """What every memory-space enum shares (pl's and pltpu's): calling a member,
    ``space(shape, dtype)``, describes a buffer there; it prints as its value."""

    def __call__(self, shape, dtype) -> MemoryRef:
        return MemoryRef(ShapedArray(tuple(shape), dtypes.dtype(dtype)), self)

    def __str__(self):
        return self.value


class MemorySpace(BufferSpace, enum.Enum):
    """Where a block lives; calling one, ``ANY(shape, dtype)``, describes a buffer there."""

    ANY = "any"
    DEFAULT = "default"  # (a kernel reference whose block spec names none: the backend's)
    ERROR = "error"  # (checkify's error state; these three are SMEM on a TPU)
    INDEX = "index"  # (scalar prefetch operands)
    KEY = "key"  # (PRNG keys)
    HOST = "host"


ANY = MemorySpace.ANY
HOST = MemorySpace.HOST


@dataclasses.dataclass
class BlockSpec:
    """How an array is cut into blocks: ``block_shape`` (ints; ``None`` or ``squeezed`` for a
    dimension of one element left out of the kernel's reference; ``None`` for the whole
    array) and ``index_map`` (grid indices -> block indices; None: block 0 everywhere)."""

    block_shape: Any = None
    index_map: Callable | None = None
    pipeline_mode: Buffered | None = None
    _: dataclasses.KW_ONLY
    memory_space: Any = None


@dataclasses.dataclass(init=False)
class GridSpec:
    """The grid, the inputs' and outputs' BlockSpecs and the scratch buffers, together."""

    grid: tuple
    in_specs: Any
    out_specs: Any
    scratch_shapes: tuple

    def __init__(self, grid=(), in_specs=no_block_spec, out_specs=no_block_spec,
                 scratch_shapes=()):
        if isinstance(in_specs, list):
            in_specs = tuple(in_specs)
        if isinstance(out_specs, list):
            out_specs = tuple(out_specs)
        self.grid = (grid,) if isinstance(grid, int) else tuple(grid)
        self.in_specs, self.out_specs = in_specs, out_specs
        self.scratch_shapes = tuple(scratch_shapes)
