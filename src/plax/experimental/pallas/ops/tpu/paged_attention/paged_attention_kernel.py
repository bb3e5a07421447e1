"""Paged attention for decoding, as ``paged_attention.paged_attention_kernel``.

Each sequence's keys and values live in fixed-size pages scattered through a shared cache
(``k_pages``/``v_pages`` [kv_heads, total_pages, page_size, head_dim]); ``page_indices``
[batch, pages_per_sequence] lists a sequence's pages in order. One query per sequence and
q head attends to the first ``lengths[b]`` positions, q heads sharing kv heads in groups.

The grid is (batch, kv heads, compute blocks of ``pages_per_compute_block`` pages). The page
table is prefetched into SMEM and the kernel takes the cache once per page of a block, each
operand's index map reading its page's number from the table, so the pipeline copies the
pages from HBM itself; an online softmax over the blocks keeps the row maximum, row sum and
output in VMEM. Blocks past a sequence's length are skipped and map to its last needed page
(no copy). Off a TPU the kernel runs in interpret mode.
"""
from __future__ import annotations

import functools
from typing import Literal, Sequence

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.experimental.pallas.ops.tpu.paged_attention import quantization_utils

__all__ = ["paged_attention", "DEFAULT_MASK_VALUE"]

DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)
_LANES = 128
_F32 = np.float32


def _split(pages):
    """(int8 or float pages, their scales broadcast over the last axis, or None)."""
    if isinstance(pages, quantization_utils.QuantizedTensor):
        weight, scales = pages.weight, pages.scales
        return weight, jnp.broadcast_to(scales, (*scales.shape[:-1], weight.shape[-1]))
    return pages, None


def _kernel(lengths_ref, pages_ref, q_ref, *refs, pages_per_block, page_size, mask_value,
            soft_cap, quantized):
    """Query group of (batch b, kv head h) against compute block j of its pages."""
    n = pages_per_block * (2 if quantized else 1)
    k_refs, v_refs = refs[:n], refs[n:2 * n]
    o_ref, m_sc, l_sc, acc_sc = refs[2 * n:]
    b, j = pl.program_id(0), pl.program_id(2)
    length = lengths_ref[b]
    block_start = j * pages_per_block * page_size

    @pl.when(j == 0)
    def _start():
        m_sc[...] = jnp.full(m_sc.shape, -jnp.inf, _F32)
        l_sc[...] = jnp.zeros(l_sc.shape, _F32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, _F32)

    def page(refs, t):
        if not quantized:
            return refs[t][...]
        weight, scales = refs[2 * t][...], refs[2 * t + 1][...]
        return quantization_utils.from_int8(weight, scales.astype(_F32), dtype=_F32)

    @pl.when(block_start < length)
    def _visit():
        q = q_ref[...]
        groups = q.shape[0]
        for t in range(pages_per_block):
            k, v = page(k_refs, t), page(v_refs, t)
            if k.dtype != q.dtype:
                q, k = q.astype(_F32), k.astype(_F32)
            s = lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=_F32)
            if soft_cap is not None and soft_cap != 0.0:
                s = jnp.tanh(s / soft_cap) * soft_cap
            pos = block_start + t * page_size + lax.broadcasted_iota(
                jnp.int32, (groups, page_size), 1)
            s = jnp.where(pos < length, s, mask_value)
            m_prev, l_prev = m_sc[...][:, :1], l_sc[...][:, :1]
            m_next = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
            p = jnp.exp(s - m_next)
            rescale = jnp.exp(m_prev - m_next)
            m_sc[...] = jnp.broadcast_to(m_next, m_sc.shape)
            l_sc[...] = jnp.broadcast_to(rescale * l_prev + jnp.sum(p, axis=1, keepdims=True),
                                         l_sc.shape)
            pv = lax.dot(p.astype(v.dtype), v, preferred_element_type=_F32)
            acc_sc[...] = acc_sc[...] * rescale + pv

    @pl.when(j == pl.num_programs(2) - 1)
    def _finish():
        o_ref[...] = (acc_sc[...] / l_sc[...][:, :1]).astype(o_ref.dtype)


@functools.partial(plax.jit, static_argnames=["pages_per_compute_block", "attn_logits_soft_cap",
                                              "mask_value", "megacore_mode", "inline_seq_dim"])
def paged_attention(q, k_pages, v_pages, lengths, page_indices, *,
                    mask_value: float = DEFAULT_MASK_VALUE,
                    attn_logits_soft_cap: float | None = None, pages_per_compute_block: int,
                    megacore_mode: Literal["kv_head", "batch"] | None = None,
                    inline_seq_dim: bool = True):
    """Attention of ``q`` [batch, q_heads, head_dim] (one query per sequence, already
    scaled) over the paged keys and values (arrays or int8 QuantizedTensors), the first
    ``lengths[b]`` positions of sequence b; the result is shaped like ``q``.
    ``megacore_mode`` ('kv_head', 'batch' or None) marks that grid axis "parallel" for a
    chip of two cores; ``inline_seq_dim`` is accepted for JAX's signature (this kernel always
    walks the sequence on its grid's last axis)."""
    del inline_seq_dim
    k_pages, k_scales = _split(k_pages)
    v_pages, v_scales = _split(v_pages)
    batch, q_heads, head_dim = q.shape
    kv_heads, _, page_size, head_dim_k = k_pages.shape
    batch_pages, pages_per_sequence = page_indices.shape
    if k_pages.shape != v_pages.shape:
        raise ValueError(f"k_pages and v_pages must have the same shape. Got {k_pages.shape} "
                         f"and {v_pages.shape}")
    if q_heads % kv_heads:
        raise ValueError(f"Number of Q heads must be divisible by number of KV heads. Got "
                         f"{q_heads} and {kv_heads}.")
    if head_dim_k != head_dim:
        raise ValueError(f"head_dim of Q must be the same as that of K/V. Got {head_dim} and "
                         f"{head_dim_k}.")
    if pages_per_sequence % pages_per_compute_block:
        raise ValueError(f"pages_per_compute_block must be divisible by pages per sequence. "
                         f"Got {pages_per_compute_block} and {pages_per_sequence}.")
    if tuple(lengths.shape) != (batch,):
        raise ValueError("`lengths` and `q` must have the same batch size")
    if batch_pages != batch:
        raise ValueError("`page_indices` and `q` must have the same batch size")
    if lengths.dtype != jnp.int32:
        raise ValueError(f"The dtype of `lengths` must be int32. Got {lengths.dtype}")
    semantics: Sequence[str] = ["arbitrary", "arbitrary", "arbitrary"]
    if megacore_mode == "kv_head":
        if kv_heads % 2:
            raise ValueError("number of KV heads must be even when megacore_mode is 'kv_head'")
        semantics[1] = "parallel"
    elif megacore_mode == "batch":
        if batch % 2:
            raise ValueError("batch size must be even when megacore_mode is 'batch'")
        semantics[0] = "parallel"
    elif megacore_mode is not None:
        raise ValueError("megacore_mode must be one of ['kv_head', 'batch', None]")

    groups = q_heads // kv_heads
    ppb = pages_per_compute_block
    block_len = ppb * page_size
    quantized = k_scales is not None

    def page_map(t):
        def index_map(b, h, j, lengths_ref, pages_ref):
            last = jnp.maximum(pl.cdiv(lengths_ref[b], block_len) - 1, 0)
            return (h, pages_ref[b, jnp.minimum(j, last) * ppb + t], 0, 0)
        return index_map

    def cache_operands(pages, scales):
        specs, operands = [], []
        for t in range(ppb):
            spec = pl.BlockSpec((None, None, page_size, head_dim), page_map(t))
            specs.append(spec)
            operands.append(pages)
            if quantized:
                specs.append(spec)
                operands.append(scales)
        return specs, operands

    k_specs, k_operands = cache_operands(k_pages, k_scales)
    v_specs, v_operands = cache_operands(v_pages, v_scales)
    q_spec = pl.BlockSpec((None, None, groups, head_dim), lambda b, h, j, *_: (b, h, 0, 0))
    kernel = functools.partial(_kernel, pages_per_block=ppb, page_size=page_size,
                               mask_value=mask_value, soft_cap=attn_logits_soft_cap,
                               quantized=quantized)
    out = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct((batch, kv_heads, groups, head_dim), q.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2, grid=(batch, kv_heads, pages_per_sequence // ppb),
            in_specs=[q_spec, *k_specs, *v_specs], out_specs=q_spec,
            scratch_shapes=[pltpu.VMEM((groups, _LANES), _F32),
                            pltpu.VMEM((groups, _LANES), _F32),
                            pltpu.VMEM((groups, head_dim), _F32)]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=tuple(semantics)),
        interpret=plax.default_backend() != "tpu", name="paged_attention")(
            lengths, page_indices.astype(jnp.int32),
            q.reshape(batch, kv_heads, groups, head_dim), *k_operands, *v_operands)
    return out.reshape(batch, q_heads, head_dim)
