"""plax.experimental.pallas, as ``jax.experimental.pallas``: kernels over a grid of blocks.

In interpret mode (``pallas_call(..., interpret=True)``), on every backend, the grid is a loop
of ordinary lax ops (``plax.higher_order.pallas_call``). Otherwise, on a TPU, the kernel is
compiled by Mosaic (``plax.pallas.mosaic_call``: a ``tpu_custom_call``, as JAX lowers it);
compiling for GPUs (Triton, Mosaic GPU) is not built. ``pallas.tpu`` (pltpu) has the TPU
memory spaces, CompilerParams and PrefetchScalarGridSpec; ``pallas.triton`` and
``pallas.mosaic_gpu`` the GPU extensions' names.
"""
from __future__ import annotations

import numpy as np

from plax.core.refs import Slice
from plax.core.trace import Tracer
from plax.experimental.pallas.call import pallas_call
from plax.experimental.pallas.core import (ANY, HOST, BlockDim, Blocked, BlockSpec,
                                           BoundedSlice, Buffered, CompilerParams, CostEstimate,
                                           Element, GridSpec, Indirect, MemoryRef, MemorySpace,
                                           RevisitMode, Squeezed, no_block_spec, squeezed)
from plax.experimental.pallas.cost_estimate import estimate_cost
from plax.experimental.pallas.helpers import (align_to, broadcast_to, debug_check, debug_print,
                                              empty, empty_like, empty_ref_like,
                                              enable_debug_checks, enable_poison_buffers,
                                              loop, lower_as_mlir,
                                              reciprocal, run_scoped, select_ref,
                                              strides_from_shape, with_scoped)
from plax.higher_order.cond import cond
from plax.higher_order.pallas_call import num_programs, pallas_call_p, program_id
from plax.higher_order.run_state import run_state
from plax.pallas import mosaic_call as _mosaic_call  # noqa: F401 (pallas_call's TPU lowering)
from plax.experimental.pallas.core_map import core_map, kernel
from plax.pallas.multiple_of import multiple_of_p
from plax.pallas.tpu_ops import delay
from plax.pallas.semaphores import (DeviceIdType, semaphore, semaphore_read, semaphore_signal,
                                    semaphore_wait)
from plax.ref import ds

__all__ = ["pallas_call", "pallas_call_p", "BlockSpec", "GridSpec", "Blocked", "Element",
           "Squeezed", "squeezed", "no_block_spec", "Buffered", "CostEstimate",
           "CompilerParams", "MemorySpace", "MemoryRef", "ANY", "HOST", "program_id",
           "num_programs", "cdiv", "ds", "dslice", "Slice", "when", "multiple_of",
           "run_state", "next_power_of_2", "BlockDim", "BoundedSlice", "Indirect",
           "RevisitMode", "align_to", "broadcast_to", "debug_check", "debug_print", "empty",
           "empty_like", "empty_ref_like", "enable_debug_checks", "enable_poison_buffers",
           "delay", "loop", "lower_as_mlir",
           "reciprocal", "run_scoped", "select_ref", "strides_from_shape", "with_scoped",
           "estimate_cost",
           "DeviceIdType", "semaphore", "semaphore_read", "semaphore_signal", "semaphore_wait",
           "core_map", "kernel"]

dslice = ds


def cdiv(a, b):
    """``a / b`` rounded up (ints, or integer arrays)."""
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        return -(-int(a) // int(b))
    return (a + b - 1) // b


def next_power_of_2(x: int) -> int:
    """The least power of 2 at least ``x`` (a non-negative int)."""
    if x < 0:
        raise ValueError("`next_power_of_2` requires a non-negative integer.")
    return 1 if x == 0 else 1 << (int(x) - 1).bit_length()


def multiple_of(x, values):
    """A hint that ``x`` (an integer) is a multiple of ``values`` (an int or ints): ``x``
    itself, which a kernel compiled for TPU tells Mosaic (``tpu.assume_multiple``)."""
    values = (values,) if isinstance(values, (int, np.integer)) else tuple(values)
    if not isinstance(x, Tracer):
        return x
    return multiple_of_p.bind(x, values=tuple(int(v) for v in values))


def when(condition):
    """Decorator: run the function (of no arguments, returning nothing) where ``condition``
    holds; a traced condition becomes a ``cond``."""
    def decorate(f):
        if not isinstance(condition, Tracer):
            if bool(np.asarray(condition)):
                f()
            return None

        def run():
            f()
        cond(condition, run, lambda: None)
        return None
    return decorate
