"""Grouped matrix multiplication (mixture-of-experts layers), as
``jax.experimental.pallas.ops.tpu.megablox``: ``gmm`` (differentiable) here, the kernels
``gmm`` and ``tgmm`` in ``megablox.gmm``."""
from plax.experimental.pallas.ops.tpu.megablox.ops import gmm as gmm

__all__ = ["gmm"]
