"""Ragged paged attention (prefill and decode in one batch), as
``jax.experimental.pallas.ops.tpu.ragged_paged_attention``."""
from plax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel

dynamic_validate_inputs = kernel.dynamic_validate_inputs
ragged_paged_attention = kernel.ragged_paged_attention
ref_ragged_paged_attention = kernel.ref_ragged_paged_attention
static_validate_inputs = kernel.static_validate_inputs

__all__ = ["kernel", "dynamic_validate_inputs", "ragged_paged_attention",
           "ref_ragged_paged_attention", "static_validate_inputs"]
