"""int8 quantization of KV-cache pages (a scale per vector of the last axis), as
``paged_attention.quantization_utils``."""
from __future__ import annotations

from typing import NamedTuple

import plax
import plax.numpy as jnp

__all__ = ["MAX_INT8", "P", "QuantizedTensor", "to_int8", "from_int8",
           "get_quantization_scales", "quantize_to_int8", "unquantize_from_int8"]

P = plax.sharding.PartitionSpec
MAX_INT8 = 127.5


class QuantizedTensor(NamedTuple):
    """An int8 ``weight`` and the ``scales`` (max |x| over its last axis) it came with."""

    weight: jnp.ndarray
    scales: jnp.ndarray


def to_int8(x, h):
    """``x`` in units of ``h / MAX_INT8``, rounded to int8."""
    return jnp.int8(jnp.rint(x * (MAX_INT8 / h)))


def from_int8(x, h, dtype=jnp.bfloat16):
    """The floats ``to_int8`` quantized (``x * h / MAX_INT8``) in ``dtype``."""
    return x.astype(dtype) * h / MAX_INT8


def get_quantization_scales(x):
    """The largest magnitude along the last axis (kept, size 1)."""
    return jnp.max(jnp.abs(x), axis=-1, keepdims=True)


def quantize_to_int8(x) -> QuantizedTensor:
    """``x`` as an int8 QuantizedTensor."""
    scales = get_quantization_scales(x)
    return QuantizedTensor(weight=to_int8(x, scales), scales=scales)


def unquantize_from_int8(x: QuantizedTensor, dtype=jnp.bfloat16):
    """A QuantizedTensor back in ``dtype``."""
    return from_int8(x.weight, x.scales, dtype)
