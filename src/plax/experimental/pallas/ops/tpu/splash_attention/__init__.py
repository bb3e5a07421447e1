"""Splash attention (block-sparse flash attention), as
``jax.experimental.pallas.ops.tpu.splash_attention``: so far its masks (the kernel, its
block sizes and mask info are not built in plax)."""
from plax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask import (
    CausalMask, FullMask, LocalMask, Mask, MultiHeadMask, NumpyMask, make_causal_mask,
    make_local_attention_mask, make_random_mask)

__all__ = ["CausalMask", "FullMask", "LocalMask", "Mask", "MultiHeadMask", "NumpyMask",
           "make_causal_mask", "make_local_attention_mask", "make_random_mask"]
