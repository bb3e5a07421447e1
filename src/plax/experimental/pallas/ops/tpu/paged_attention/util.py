"""The reference of paged attention, as ``paged_attention.util``."""
from __future__ import annotations

import numpy as np

import plax
import plax.numpy as jnp
from plax.experimental.pallas.ops.tpu.paged_attention import quantization_utils

__all__ = ["MASK_VALUE", "grouped_query_attention_reference"]

MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)


def grouped_query_attention_reference(queries, k_pages, v_pages, seq_lens, soft_cap=None,
                                      debug=False):
    """Attention of one query per sequence: ``queries`` [batch, q_heads, d] over contiguous
    keys and values [batch, kv_heads, max_seq_len, d] (int8 QuantizedTensors allowed), the
    first ``seq_lens[b]`` positions of each; q heads share kv heads in groups. ``soft_cap``
    caps the logits as ``tanh(x / cap) * cap``."""
    if isinstance(k_pages, quantization_utils.QuantizedTensor):
        k_pages = quantization_utils.unquantize_from_int8(k_pages, dtype=jnp.float32)
    if isinstance(v_pages, quantization_utils.QuantizedTensor):
        v_pages = quantization_utils.unquantize_from_int8(v_pages, dtype=jnp.float32)
    batch, q_heads, d = queries.shape
    _, kv_heads, max_len, d_k = k_pages.shape
    if k_pages.shape != v_pages.shape or d_k != d or q_heads % kv_heads:
        raise ValueError(f"grouped_query_attention_reference: queries {queries.shape}, keys "
                         f"{k_pages.shape} and values {v_pages.shape} do not fit together")
    q = queries.reshape(batch, kv_heads, q_heads // kv_heads, d).astype(jnp.float32)
    qk = jnp.einsum("bhgd,bhtd->bhgt", q, k_pages.astype(jnp.float32))
    if soft_cap is not None and soft_cap != 0.0:
        qk = jnp.tanh(qk / soft_cap) * soft_cap
    valid = jnp.arange(max_len)[None] < seq_lens[:, None]
    qk = qk + jnp.where(valid, 0.0, MASK_VALUE)[:, None, None, :]
    if debug:
        plax.debug.print("masked logits: {qk}", qk=qk)
    probs = plax.nn.softmax(qk, axis=-1).astype(v_pages.dtype)
    out = jnp.einsum("bhgt,bhtd->bhgd", probs, v_pages)
    return out.reshape(batch, q_heads, d)
