"""plax.experimental.pallas.tpu, as ``jax.experimental.pallas.tpu`` (``pltpu``): TPU memory
spaces, compiler parameters and the scalar-prefetch grid spec, for kernels compiled by Mosaic
on a TPU or run in interpret mode (``pallas_call(..., interpret=True)``) on any backend.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping, Sequence

from plax.experimental.pallas import core as pallas_core
from plax.experimental.pallas.core import GridSpec, no_block_spec
from plax.pallas.mosaic_lowering import LoweringException

__all__ = ["MemorySpace", "VMEM", "VMEM_SHARED", "SMEM", "CMEM", "SEMAPHORE", "HBM",
           "GridDimensionSemantics", "PARALLEL", "CORE_PARALLEL", "SUBCORE_PARALLEL",
           "ARBITRARY", "CompilerParams", "PrefetchScalarGridSpec", "SideEffectType",
           "LoweringException"]


class MemorySpace(pallas_core.BufferSpace, enum.Enum):
    """A TPU memory; calling one, ``VMEM(shape, dtype)``, describes a (scratch) buffer there."""

    VMEM = "vmem"
    VMEM_SHARED = "vmem_shared"
    SMEM = "smem"
    CMEM = "cmem"
    SEMAPHORE = "semaphore_mem"
    HBM = "hbm"


VMEM = MemorySpace.VMEM
VMEM_SHARED = MemorySpace.VMEM_SHARED
SMEM = MemorySpace.SMEM
CMEM = MemorySpace.CMEM
SEMAPHORE = MemorySpace.SEMAPHORE
HBM = MemorySpace.HBM


class GridDimensionSemantics(enum.Enum):
    """How a grid axis may be split across cores (a hint; interpret mode runs it in order)."""

    PARALLEL = "parallel"
    CORE_PARALLEL = "core_parallel"
    SUBCORE_PARALLEL = "subcore_parallel"
    ARBITRARY = "arbitrary"


PARALLEL = GridDimensionSemantics.PARALLEL
CORE_PARALLEL = GridDimensionSemantics.CORE_PARALLEL
SUBCORE_PARALLEL = GridDimensionSemantics.SUBCORE_PARALLEL
ARBITRARY = GridDimensionSemantics.ARBITRARY


class SideEffectType(enum.Enum):
    """What side effects a kernel has, for ``CompilerParams(has_side_effects=...)``."""

    PURE = 0
    DATAFLOW_SIDE_EFFECTING = 1
    SIDE_EFFECTING = 2


@dataclasses.dataclass(frozen=True)
class CompilerParams(pallas_core.CompilerParams):
    """Mosaic TPU compiler parameters for ``pallas_call(compiler_params=...)``: written into
    the ``tpu_custom_call`` on a TPU, ignored in interpret mode."""

    BACKEND = "mosaic_tpu"
    dimension_semantics: Sequence[Any] | None = None
    allow_input_fusion: Sequence[bool] | None = None
    vmem_limit_bytes: int | None = None
    collective_id: int | None = None
    has_side_effects: Any = False
    flags: Mapping[str, Any] | None = None
    internal_scratch_in_bytes: int | None = None
    serialization_format: int = 1
    disable_bounds_checks: bool = False
    disable_semaphore_checks: bool = False
    skip_device_barrier: bool = False
    allow_collective_id_without_custom_barrier: bool = False
    shape_invariant_numerics: bool = True
    use_tc_tiling_on_sc: bool | None = None
    needs_layout_passes: bool = True
    fuse_transposed_lhs_in_matmul: bool = False

    def __post_init__(self):
        for name in ("dimension_semantics", "allow_input_fusion"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))


@dataclasses.dataclass(init=False)
class PrefetchScalarGridSpec(GridSpec):
    """A GridSpec whose first ``num_scalar_prefetch`` operands are scalar-prefetch arrays:
    every index map receives them (as SMEM references) after the grid indices, and the
    kernel receives them first, before the inputs' block references."""

    num_scalar_prefetch: int

    def __init__(self, num_scalar_prefetch: int, grid=(), in_specs=no_block_spec,
                 out_specs=no_block_spec, scratch_shapes=()):
        super().__init__(grid, in_specs, out_specs, scratch_shapes)
        if int(num_scalar_prefetch) < 0:
            raise ValueError(f"num_scalar_prefetch must be non-negative, got "
                             f"{num_scalar_prefetch}.")
        self.num_scalar_prefetch = int(num_scalar_prefetch)

    # (where pallas_call puts the scalar-prefetch references)
    prefetch_memory_space = SMEM
