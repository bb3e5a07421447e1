"""plax.experimental.mosaic, as ``jax.experimental.mosaic``: Mosaic TPU kernels written
directly in MLIR (``as_tpu_kernel``), and Mosaic's GPU package (``gpu``), as far as Pallas's
tests and multi-backend kernels name it."""
from plax.pallas.mosaic_kernel import TpuSideEffectType, as_tpu_kernel

__all__ = ["as_tpu_kernel", "TpuSideEffectType"]
