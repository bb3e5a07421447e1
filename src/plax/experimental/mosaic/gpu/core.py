"""plax.experimental.mosaic.gpu.core, as ``jax.experimental.mosaic.gpu.core``: the shared
memory bound Mosaic GPU kernels are compiled against, and the lowering semantics."""
from __future__ import annotations

import contextlib
import enum

__all__ = ["LoweringSemantics", "artificial_shared_memory_limit"]

# The shared memory (bytes) a Mosaic GPU kernel may use, when lowered to fit a smaller GPU
# than the one at hand (None: the device's own). plax lowers no kernel for a GPU, so no
# kernel ever exceeds it.
_SMEM_SIZE_BOUND: int | None = None


class LoweringSemantics(enum.Enum):
    """How a Mosaic GPU kernel's values map to threads: per lane, or per warpgroup."""

    Lane = 1
    Warpgroup = 2


@contextlib.contextmanager
def artificial_shared_memory_limit(limit):
    """Within the context, Mosaic GPU kernels must fit in ``limit`` bytes of shared memory."""
    global _SMEM_SIZE_BOUND
    previous, _SMEM_SIZE_BOUND = _SMEM_SIZE_BOUND, limit
    try:
        yield
    finally:
        _SMEM_SIZE_BOUND = previous
