"""Splash attention (block-sparse flash attention), as
``jax.experimental.pallas.ops.tpu.splash_attention``: the kernel makers
(``splash_attention_kernel``), its masks (``splash_attention_mask``) and the masks' block-sparse
form (``splash_attention_mask_info``)."""
from plax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel import (
    BlockSizes, QKVLayout, SegmentIds, make_masked_mha_reference, make_masked_mqa_reference,
    make_splash_mha, make_splash_mha_single_device, make_splash_mqa,
    make_splash_mqa_single_device)
from plax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask import (
    CausalMask, FullMask, LocalMask, Mask, MultiHeadMask, NumpyMask, make_causal_mask,
    make_local_attention_mask, make_random_mask)

__all__ = ["BlockSizes", "CausalMask", "FullMask", "LocalMask", "Mask", "MultiHeadMask",
           "NumpyMask", "QKVLayout", "SegmentIds", "make_causal_mask",
           "make_local_attention_mask", "make_masked_mha_reference", "make_masked_mqa_reference",
           "make_random_mask", "make_splash_mha", "make_splash_mha_single_device",
           "make_splash_mqa", "make_splash_mqa_single_device"]
