"""plax.experimental.mosaic: Mosaic TPU kernels written directly in MLIR (``as_tpu_kernel``),
as ``jax.experimental.mosaic``."""
from plax.pallas.mosaic_kernel import TpuSideEffectType, as_tpu_kernel

__all__ = ["as_tpu_kernel", "TpuSideEffectType"]
