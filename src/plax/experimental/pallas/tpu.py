"""plax.experimental.pallas.tpu, as ``jax.experimental.pallas.tpu`` (``pltpu``): TPU memory
spaces, semaphores and DMAs, compiler parameters, the scalar-prefetch grid spec, TPU vector
operations (roll, bitcast), the kernel's PRNG, nested pipelines (emit_pipeline), for kernels
compiled by Mosaic on a TPU or run in interpret mode (``pallas_call(..., interpret=True)`` or
``interpret=InterpretParams()``) on any backend. The primitives and helpers are in
``plax.pallas`` (semaphores, dma, remote, tpu_ops, tpu_packing, pipeline, einshape,
tpu_info, interpret_mode; the Mosaic lowering in mosaic_*).
"""
from __future__ import annotations

import dataclasses
import enum
import warnings
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from plax import lax
from plax.core.avals import ShapedArray
from plax.experimental.pallas import core as pallas_core
from plax.experimental.pallas._tpu_random import (prng_random_bits, prng_seed, sample_block,
                                                  stateful_bernoulli, stateful_bits,
                                                  stateful_normal, stateful_uniform,
                                                  to_pallas_key)
from plax.experimental.pallas import when
from plax.experimental.pallas.core import GridSpec, MemoryRef, no_block_spec
from plax.pallas import memory_space as _memory_space
from plax.pallas import semaphores as _semaphores
from plax.pallas.dma import (AsyncCopyDescriptor, async_copy, async_remote_copy,
                             make_async_copy, make_async_remote_copy, sync_copy)
from plax.experimental.pallas.core_map import create_tensorcore_mesh
from plax.pallas.einshape import einshape
from plax.pallas.interpret_mode import reset_tpu_interpret_mode_state
from plax.pallas.interpret_mode import force_tpu_interpret_mode as _force
from plax.pallas.interpret_mode import set_tpu_interpret_mode as _set
from plax.pallas.pipeline import (BufferedRef, BufferedRefBase, BufferType, emit_pipeline,
                                  emit_pipeline_with_allocations)
from plax.pallas.semaphores import dma_semaphore
from plax.pallas.tpu_info import (ChipVersion, Tiling, TpuInfo, get_tpu_info,
                                  get_tpu_info_for_chip, is_tpu_device)
from plax.pallas.tpu_ops import bitcast, roll, trace_value
from plax.pallas.tpu_packing import (load, pack_elementwise, stochastic_round, store, touch,
                                     unpack_elementwise)
from plax.pallas.mosaic_lowering import LoweringException

__all__ = ["MemorySpace", "VMEM", "VMEM_SHARED", "SMEM", "CMEM", "SEMAPHORE", "HBM",
           "GridDimensionSemantics", "PARALLEL", "CORE_PARALLEL", "SUBCORE_PARALLEL",
           "ARBITRARY", "CompilerParams", "PrefetchScalarGridSpec", "SideEffectType",
           "SemaphoreType", "dma_semaphore", "AsyncCopyDescriptor", "make_async_copy",
           "async_copy", "make_async_remote_copy", "async_remote_copy", "sync_copy",
           "roll", "bitcast", "trace_value", "prng_seed", "prng_random_bits", "stateful_bits",
           "stateful_uniform", "stateful_normal", "stateful_bernoulli", "sample_block",
           "to_pallas_key", "InterpretParams", "emit_pipeline", "BufferedRef", "BufferType",
           "BufferedRefBase", "emit_pipeline_with_allocations", "run_on_first_core",
           "core_barrier",
           "ChipVersion", "Tiling", "TpuInfo", "get_tpu_info", "get_tpu_info_for_chip",
           "is_tpu_device", "pack_elementwise", "unpack_elementwise", "stochastic_round",
           "load", "store", "touch", "set_tpu_interpret_mode", "force_tpu_interpret_mode",
           "reset_tpu_interpret_mode_state", "einshape",
           "with_memory_space_constraint", "LoweringException", "create_tensorcore_mesh",
           "CoreType"]


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


class CoreType(enum.Enum):
    """The kind of core a kernel runs on: a TensorCore, or a SparseCore's scalar or vector
    subcores (plax builds TensorCore kernels only)."""

    TC = "tc"
    SC_SCALAR_SUBCORE = "sc_scalar_subcore"
    SC_VECTOR_SUBCORE = "sc_vector_subcore"


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


class SemaphoreType(enum.Enum):
    """A kind of semaphore; calling one, ``SemaphoreType.DMA((2,))``, describes scratch
    semaphores of that shape (the member itself: one semaphore)."""

    REGULAR = "regular"
    DMA = "dma"
    BARRIER = "barrier"

    @property
    def dtype(self):
        return {"regular": _semaphores.SEMAPHORE, "dma": _semaphores.DMA_SEMAPHORE,
                "barrier": _semaphores.BARRIER_SEMAPHORE}[self.value]

    def __call__(self, shape) -> MemoryRef:
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return MemoryRef(ShapedArray(shape, self.dtype), SEMAPHORE)

    def get_array_aval(self):
        return self(()).get_array_aval()

    def get_ref_aval(self):
        return self(()).get_ref_aval()


@dataclasses.dataclass(frozen=True, kw_only=True)
class InterpretParams:
    """Options of TPU interpret mode, passed as ``pallas_call(..., interpret=
    InterpretParams(...))``. plax runs such a kernel as ``interpret=True`` does: one program
    at a time in grid order, DMAs done when started, semaphores as counters; the options
    JAX's TPU simulator uses (race detection, DMA timing, randomised grids) do not change
    that run."""

    detect_races: bool = False
    out_of_bounds_reads: Literal["raise", "uninitialized"] = "raise"
    skip_floating_point_ops: bool = False
    uninitialized_memory: Literal["nan", "zero"] = "nan"
    num_cores_or_threads: int = 1
    vector_clock_size: int | None = None
    logging_mode: Any = None
    dma_execution_mode: Literal["eager", "on_wait"] = "on_wait"
    random_seed: int | None = None
    grid_point_recorder: Callable | None = None
    allow_hbm_allocation_in_run_scoped: bool = False
    buffer_bounds: Literal["logical", "padded"] = "logical"

    def __post_init__(self):
        if self.num_cores_or_threads < 1:
            raise ValueError("Number of cores or threads must be at least 1, but got "
                             f"{self.num_cores_or_threads}.")
        if self.vector_clock_size is not None and self.vector_clock_size < 1:
            raise ValueError("Vector clock size must be at least 1, but got "
                             f"{self.vector_clock_size}.")

    @property
    def num_cores_per_device(self) -> int:
        return self.num_cores_or_threads


def set_tpu_interpret_mode(params: InterpretParams | None = InterpretParams()) -> None:
    """Run every ``pallas_call`` traced from now on in TPU interpret mode with ``params``
    (None: each call's own ``interpret`` again)."""
    _set(params)


def force_tpu_interpret_mode(params: InterpretParams | None = InterpretParams()):
    """Context manager: every ``pallas_call`` traced within runs in TPU interpret mode with
    ``params``."""
    return _force(params)


def with_memory_space_constraint(x, memory_space):
    """``x``, typed as placed in ``memory_space`` (HBM, VMEM or SMEM; pl.ANY: no
    constraint), so that a ``pallas_call`` taking it asks XLA to place it there (inside a
    traced function only: it has no eager form)."""
    if memory_space is pallas_core.MemorySpace.ANY:
        return x
    if memory_space not in (HBM, VMEM, SMEM):
        raise NotImplementedError("with_memory_space_constraint only supports HBM, VMEM and "
                                  "SMEM.")
    return _memory_space.with_memory_space_constraint_p.bind(x, memory_space=memory_space)


def run_on_first_core(core_axis_name: str):
    """Decorator: run the function (of no arguments) only on core 0 of ``core_axis_name``."""
    if lax.axis_size(core_axis_name) == 1:
        return lambda f: f()

    def wrapped(f):
        when(lax.axis_index(core_axis_name) == 0)(f)
    return wrapped


def core_barrier(sem, *, core_axis_name: str) -> None:
    """Wait until every core of ``core_axis_name`` has reached this barrier (on ``sem``)."""
    num_cores = lax.axis_size(core_axis_name)
    if num_cores == 1:
        return
    core_id = lax.axis_index(core_axis_name)
    for i in range(num_cores):
        when(core_id != i)(lambda i=i: _semaphores.semaphore_signal(sem, 1, core_index=i))
    _semaphores.semaphore_wait(sem, num_cores - 1)


# JAX's deprecated pltpu names for what is now in pl.
_DEPRECATED = {
    "semaphore": ("pltpu.semaphore is deprecated, use pl.semaphore instead.",
                  _semaphores.semaphore),
    "DeviceIdType": ("pltpu.DeviceIdType is deprecated, use pl.DeviceIdType instead.",
                     _semaphores.DeviceIdType),
    "semaphore_read": ("pltpu.semaphore_read is deprecated, use pl.semaphore_read instead.",
                       _semaphores.semaphore_read),
    "semaphore_signal": ("pltpu.semaphore_signal is deprecated, use pl.semaphore_signal "
                         "instead.", _semaphores.semaphore_signal),
    "semaphore_wait": ("pltpu.semaphore_wait is deprecated, use pl.semaphore_wait instead.",
                       _semaphores.semaphore_wait),
    "HOST": ("pltpu.HOST is deprecated, use pl.HOST instead.", pallas_core.MemorySpace.HOST),
}


def __getattr__(name):
    if name in _DEPRECATED:
        message, value = _DEPRECATED[name]
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
