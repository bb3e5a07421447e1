"""plax.experimental.pallas.mosaic_gpu, as ``jax.experimental.pallas.mosaic_gpu``: the part of
Pallas's Mosaic GPU extension that kernels written for several backends name (its compiler
parameters and ``print_layout``).

plax has no GPU backend: ``CompilerParams`` off interpret mode raises as JAX's does on a
backend without a GPU, and ``print_layout`` (a GPU instruction) fails with JAX's error.
The rest of the extension (TMA copies, barriers, WGMMA, warp specialisation) is GPU-only
and not provided.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Sequence

from plax.experimental.mosaic.gpu.core import LoweringSemantics
from plax.experimental.pallas import core as pallas_core
from plax.pallas.gpu import print_layout_p

__all__ = ["CompilerParams", "TraceScope", "LoweringSemantics", "print_layout"]


class TraceScope(enum.Enum):
    """What a profiler trace event covers: one warp or one warpgroup."""

    WARP = "warp"
    WARPGROUP = "warpgroup"


@dataclasses.dataclass(frozen=True)
class CompilerParams(pallas_core.CompilerParams):
    """Mosaic GPU compiler parameters."""

    BACKEND = "mosaic_gpu"
    _: dataclasses.KW_ONLY
    approx_math: bool = False
    dimension_semantics: Sequence[Any] | None = None
    max_concurrent_steps: int = 1
    unsafe_no_auto_barriers: bool = False
    reduction_scratch_bytes: int = 2048
    profile_space: int = 0
    profile_dir: str = ""
    profile_trace_scope: TraceScope = TraceScope.WARPGROUP
    lowering_semantics: LoweringSemantics = LoweringSemantics.Lane

    def __post_init__(self):
        if self.dimension_semantics is not None:
            object.__setattr__(self, "dimension_semantics", tuple(self.dimension_semantics))


def print_layout(fmt: str, x) -> None:
    """Prints the register layout of ``x`` while the kernel compiles (a Mosaic GPU feature:
    it lowers only for a GPU)."""
    print_layout_p.bind(x, fmt=fmt)
