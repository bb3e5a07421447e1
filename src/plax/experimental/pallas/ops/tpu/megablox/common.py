"""Helpers of the grouped-matmul kernels, as ``megablox.common``: what the attached chip is
and which input dtype its matmuls take."""
from __future__ import annotations

import re

import plax
import plax.numpy as jnp

__all__ = ["is_tpu", "tpu_kind", "tpu_generation", "supports_bfloat16_matmul",
           "assert_is_supported_dtype", "select_input_dtype"]

# "TPU v5 lite", "TPU v4", and the newer "TPU7x"
_TPU_KIND = re.compile(r"TPU( v)?(\d+)")


def is_tpu() -> bool:
    """Whether the first device is a TPU."""
    return "TPU" in plax.devices()[0].device_kind


def tpu_kind() -> str:
    """The first device's kind string."""
    return plax.devices()[0].device_kind


def tpu_generation() -> int:
    """The attached TPU's generation number."""
    found = _TPU_KIND.match(tpu_kind())
    if found:
        return int(found[2])
    raise NotImplementedError(f"only TPU devices are supported (the device is {tpu_kind()!r})")


def supports_bfloat16_matmul() -> bool:
    """Whether matmuls take bf16 inputs here (every backend but TPUs before v4)."""
    return not is_tpu() or tpu_generation() >= 4


def assert_is_supported_dtype(dtype) -> None:
    """Raise unless ``dtype`` is bf16 or f32."""
    if dtype != jnp.bfloat16 and dtype != jnp.float32:
        raise ValueError(f"Expected bfloat16 or float32 array but got {dtype}.")


def select_input_dtype(lhs, rhs):
    """bf16 when both operands are and the chip multiplies bf16, else f32."""
    if supports_bfloat16_matmul() and lhs.dtype == jnp.bfloat16 and rhs.dtype == jnp.bfloat16:
        return jnp.bfloat16
    return jnp.float32
