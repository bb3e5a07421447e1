"""Paged attention for decoding, as ``jax.experimental.pallas.ops.tpu.paged_attention``."""
from plax.experimental.pallas.ops.tpu.paged_attention.paged_attention_kernel import (
    paged_attention as paged_attention)

__all__ = ["paged_attention"]
