"""Ragged paged attention (prefill and decode mixed), as
``jax.experimental.pallas.ops.tpu.ragged_paged_attention.kernel``.

The queries of ``num_seqs`` sequences lie back to back in ``q`` [tokens, q_heads, head_dim]
(sequence i's rows from ``cu_q_lens[i]`` to ``cu_q_lens[i + 1]``); their keys and values in a
paged cache ``kv_pages`` [pages, page_size, 2 * kv_heads, head_dim] (head 2h the keys of kv
head h, 2h + 1 its values), sequence i's pages listed in ``page_indices[i]``. The queries are
the last ``q_len`` positions of the ``kv_lens[i]`` the sequence has, attending causally.

The kernel's grid is (kv heads, visits, key blocks). Query rows are cut in blocks of
``num_queries_per_block`` tokens; a visit is one (query block, sequence) pair that meet (the
megablox visit lists, over sequences instead of groups), so a block straddling sequences is
visited once per sequence and each visit writes only its sequence's rows. The q heads sharing
a kv head are laid out token-major in one (tokens x group) block of rows, and the cache is
viewed as [pages, page_size, 2 * kv_heads * head_dim] (no copy) so each page's keys or
values for one kv head are a (page_size, head_dim) block that the index maps pick from the
page table in SMEM. Off a TPU the kernel runs in interpret mode.
"""
from __future__ import annotations

import functools

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.experimental.pallas.ops.tpu.megablox.gmm import make_group_metadata

__all__ = ["ragged_paged_attention", "ref_ragged_paged_attention", "static_validate_inputs",
           "dynamic_validate_inputs", "DEFAULT_MASK_VALUE"]

DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)
_LANES = 128
_F32 = np.float32


def ref_ragged_paged_attention(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                               *, sm_scale=1.0, sliding_window=None, soft_cap=None,
                               mask_value=DEFAULT_MASK_VALUE, k_scale=None, v_scale=None):
    """The attention computed sequence by sequence with jnp (concrete ``num_seqs``): the
    valid rows, ``cu_q_lens[num_seqs]`` of them."""
    static_validate_inputs(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                           sm_scale=sm_scale, sliding_window=sliding_window, soft_cap=soft_cap,
                           mask_value=mask_value, k_scale=k_scale, v_scale=v_scale)
    mask_value = DEFAULT_MASK_VALUE if mask_value is None else mask_value
    _, _, combined, head_dim = kv_pages.shape
    kv_heads = combined // 2
    group = queries.shape[1] // kv_heads
    outputs = []
    for i in range(int(num_seqs[0])):
        start, end, kv_len = int(cu_q_lens[i]), int(cu_q_lens[i + 1]), int(kv_lens[i])
        q = queries[start:end]
        pages = kv_pages[page_indices[i]]
        k = pages[:, :, 0::2].reshape(-1, kv_heads, head_dim)[:kv_len]
        v = pages[:, :, 1::2].reshape(-1, kv_heads, head_dim)[:kv_len]
        if k_scale is not None:
            k = (k.astype(jnp.float32) * k_scale).astype(q.dtype)
        if v_scale is not None:
            v = (v.astype(jnp.float32) * v_scale).astype(q.dtype)
        k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
        logits = jnp.einsum("qhd,khd->hqk", q, k, preferred_element_type=jnp.float32)
        logits = logits * sm_scale
        q_pos = (kv_len - (end - start)) + lax.broadcasted_iota(jnp.int32, logits.shape, 1)
        kv_pos = lax.broadcasted_iota(jnp.int32, logits.shape, 2)
        masked = q_pos < kv_pos
        if sliding_window is not None:
            masked = jnp.logical_or(masked, q_pos - sliding_window >= kv_pos)
        if soft_cap is not None:
            logits = soft_cap * jnp.tanh(logits / soft_cap)
        logits = logits + jnp.where(masked, mask_value, 0.0)
        weights = plax.nn.softmax(logits, axis=-1).astype(v.dtype)
        outputs.append(jnp.einsum("hqk,khd->qhd", weights, v).astype(queries.dtype))
    return jnp.concatenate(outputs, axis=0)


def static_validate_inputs(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *,
                           sm_scale=None, sliding_window=None, soft_cap=None, mask_value=None,
                           k_scale=None, v_scale=None, num_kv_pages_per_block=None,
                           num_queries_per_block=None, vmem_limit_bytes=None):
    """The checks of shapes, dtypes and parameters (what tracing can know); raises
    ValueError naming the one that fails."""
    del sm_scale, mask_value
    _, q_heads, head_dim = q.shape
    _, _, combined, head_dim_k = kv_pages.shape
    if combined % 2:
        raise ValueError(f"kv_pages must hold keys and values interleaved on its head axis "
                         f"(an even size), got {combined} heads")
    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
        if scale is not None and not isinstance(scale, float):
            raise ValueError(f"{name} must be a Python float or None, got {scale!r}")
    kv_heads = combined // 2
    max_num_seqs, pages_per_seq = page_indices.shape
    if tuple(num_seqs.shape) != (1,):
        raise ValueError(f"num_seqs.shape={tuple(num_seqs.shape)} must be (1,)")
    if head_dim_k != head_dim:
        raise ValueError(f"Q head_dim {head_dim} must be the same as that of K/V {head_dim_k}.")
    if tuple(kv_lens.shape) != (max_num_seqs,):
        raise ValueError(f"Expected kv_lens.shape={tuple(kv_lens.shape)} to be "
                         f"({max_num_seqs},) where `max_num_seqs` is `page_indices.shape[0]`.")
    if tuple(cu_q_lens.shape) != (max_num_seqs + 1,):
        raise ValueError(f"Expected cu_q_lens.shape={tuple(cu_q_lens.shape)} to be "
                         f"({max_num_seqs + 1},)  where `max_num_seqs` is "
                         "`page_indices.shape[0]`.")
    if (kv_lens.dtype != jnp.int32 or page_indices.dtype != jnp.int32
            or cu_q_lens.dtype != jnp.int32):
        raise ValueError(f"The dtype of `kv_lens`, `page_indices`, and `cu_q_lens` must be "
                         f"int32. Got kv_lens.dtype={kv_lens.dtype}, page_indices.dtype="
                         f"{page_indices.dtype}, cu_q_lens.dtype={cu_q_lens.dtype}.")
    if q_heads % kv_heads:
        raise ValueError(f"num_q_heads={q_heads} must be divisible by num_kv_heads={kv_heads}")
    if sliding_window is not None and sliding_window <= 0:
        raise ValueError(f"sliding_window={sliding_window} must be positive.")
    if soft_cap is not None and soft_cap == 0.0:
        raise ValueError(f"soft_cap={soft_cap} must not be 0.0.")
    if num_kv_pages_per_block is not None and not 0 < num_kv_pages_per_block <= pages_per_seq:
        raise ValueError(f"num_kv_pages_per_block={num_kv_pages_per_block} must be in range "
                         f"(0, {pages_per_seq}].")
    if num_queries_per_block is not None and num_queries_per_block <= 0:
        raise ValueError(f"num_queries_per_block={num_queries_per_block} must be positive.")
    if vmem_limit_bytes is not None and vmem_limit_bytes <= 0:
        raise ValueError(f"vmem_limit_bytes={vmem_limit_bytes} must be positive.")


def dynamic_validate_inputs(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *,
                            sm_scale=None, sliding_window=None, soft_cap=None, mask_value=None,
                            k_scale=None, v_scale=None, num_kv_pages_per_block=None,
                            num_queries_per_block=None, vmem_limit_bytes=None):
    """``static_validate_inputs``, then the checks of the values (concrete arrays): the
    sequence count, the page table's reach, the token total, each q_len <= its kv_len."""
    static_validate_inputs(
        q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, sm_scale=sm_scale,
        sliding_window=sliding_window, soft_cap=soft_cap, mask_value=mask_value,
        k_scale=k_scale, v_scale=v_scale, num_kv_pages_per_block=num_kv_pages_per_block,
        num_queries_per_block=num_queries_per_block, vmem_limit_bytes=vmem_limit_bytes)
    tokens, page_size = q.shape[0], kv_pages.shape[1]
    max_num_seqs, pages_per_seq = page_indices.shape
    seqs = int(num_seqs[0])
    if seqs > max_num_seqs:
        raise ValueError(f"num_seqs[0]={seqs} must be less or equal to "
                         f"max_num_seqs={max_num_seqs}")
    max_kv_len = int(jnp.max(kv_lens))
    min_pages = pl.cdiv(max_kv_len, page_size)
    if pages_per_seq < min_pages:
        raise ValueError(f"pages_per_seq={pages_per_seq} must be greater or equal to "
                         f"min_pages_per_seq={min_pages} given max_kv_len={max_kv_len} and "
                         f"page_size={page_size}.")
    total = int(cu_q_lens[seqs])
    if total > tokens:
        raise ValueError(f"Total q tokens {total} must be less or equal to "
                         f"max_num_batched_tokens={tokens}.")
    for i in range(seqs):
        q_len, kv_len = int(cu_q_lens[i + 1] - cu_q_lens[i]), int(kv_lens[i])
        if q_len > kv_len:
            raise ValueError(f"q_len={q_len} must be less or equal to kv_len={kv_len} at "
                             f"sequence {i}.")


def _kernel(cu_ref, kv_lens_ref, pages_ref, seqs_ref, tiles_ref, count_ref, q_ref, *refs,
            pages_per_block, page_size, block_q, group, sm_scale, sliding_window, soft_cap,
            mask_value, k_scale, v_scale):
    """Visit v (sequence s, query block tile) of kv head h against key block j."""
    k_refs, v_refs = refs[:pages_per_block], refs[pages_per_block:2 * pages_per_block]
    o_ref, m_sc, l_sc, acc_sc = refs[2 * pages_per_block:]
    v_index, j = pl.program_id(1), pl.program_id(2)
    active = v_index < count_ref[0]
    s, tile = seqs_ref[v_index], tiles_ref[v_index]
    q_start, q_end, kv_len = cu_ref[s], cu_ref[s + 1], kv_lens_ref[s]
    block_start = j * pages_per_block * page_size
    rows = block_q * group
    token = tile * block_q + lax.broadcasted_iota(jnp.int32, (rows, 1), 0) // group

    @pl.when(j == 0)
    def _start():
        m_sc[...] = jnp.full(m_sc.shape, -jnp.inf, _F32)
        l_sc[...] = jnp.zeros(l_sc.shape, _F32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, _F32)

    @pl.when(jnp.logical_and(active, block_start < kv_len))
    def _visit():
        q = q_ref[...]
        q_pos = kv_len - (q_end - q_start) + (token - q_start)
        for t in range(pages_per_block):
            k, v = k_refs[t][...], v_refs[t][...]
            if k_scale is not None:
                k = (k.astype(_F32) * k_scale).astype(q.dtype)
            if v_scale is not None:
                v = (v.astype(_F32) * v_scale).astype(q.dtype)
            logits = lax.dot_general(q, k.astype(q.dtype), (((1,), (1,)), ((), ())),
                                     preferred_element_type=_F32) * sm_scale
            if soft_cap is not None:
                logits = soft_cap * jnp.tanh(logits / soft_cap)
            kv_pos = block_start + t * page_size + lax.broadcasted_iota(
                jnp.int32, (rows, page_size), 1)
            valid = jnp.logical_and(kv_pos <= q_pos, kv_pos < kv_len)
            if sliding_window is not None:
                valid = jnp.logical_and(valid, q_pos - sliding_window < kv_pos)
            logits = jnp.where(valid, logits, mask_value)
            m_prev, l_prev = m_sc[...][:, :1], l_sc[...][:, :1]
            m_next = jnp.maximum(m_prev, jnp.max(logits, axis=1, keepdims=True))
            p = jnp.exp(logits - m_next)
            rescale = jnp.exp(m_prev - m_next)
            m_sc[...] = jnp.broadcast_to(m_next, m_sc.shape)
            l_sc[...] = jnp.broadcast_to(rescale * l_prev + jnp.sum(p, axis=1, keepdims=True),
                                         l_sc.shape)
            acc_sc[...] = acc_sc[...] * rescale + lax.dot(
                p.astype(v.dtype), v, preferred_element_type=_F32)

    @pl.when(jnp.logical_and(active, j == pl.num_programs(2) - 1))
    def _store():
        first = jnp.logical_or(v_index == 0, tiles_ref[jnp.maximum(v_index - 1, 0)] != tile)
        mine = jnp.logical_and(token >= q_start, token < q_end)
        before = jnp.where(first, jnp.zeros(o_ref.shape, _F32), o_ref[...].astype(_F32))
        out = acc_sc[...] / l_sc[...][:, :1]
        o_ref[...] = jnp.where(mine, out, before).astype(o_ref.dtype)


@functools.partial(plax.jit, static_argnames=[
    "sm_scale", "sliding_window", "soft_cap", "mask_value", "k_scale", "v_scale",
    "num_kv_pages_per_block", "num_queries_per_block", "vmem_limit_bytes"])
def ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *,
                           sm_scale: float = 1.0, sliding_window: int | None = None,
                           soft_cap: float | None = None,
                           mask_value: float | None = DEFAULT_MASK_VALUE,
                           k_scale: float | None = None, v_scale: float | None = None,
                           num_kv_pages_per_block: int | None = None,
                           num_queries_per_block: int | None = None,
                           vmem_limit_bytes: int | None = None):
    """Causal attention of the ragged batch of queries ``q`` over each sequence's paged keys
    and values (see the module's docstring); the result is shaped like ``q`` (rows past
    ``cu_q_lens[num_seqs]`` are 0). ``sm_scale`` scales the logits, ``soft_cap`` caps them
    (``cap * tanh(x / cap)``), ``sliding_window`` limits how far back a query sees,
    ``k_scale``/``v_scale`` rescale a quantized cache."""
    static_validate_inputs(
        q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, sm_scale=sm_scale,
        sliding_window=sliding_window, soft_cap=soft_cap, mask_value=mask_value,
        k_scale=k_scale, v_scale=v_scale, num_kv_pages_per_block=num_kv_pages_per_block,
        num_queries_per_block=num_queries_per_block, vmem_limit_bytes=vmem_limit_bytes)
    mask_value = DEFAULT_MASK_VALUE if mask_value is None else mask_value
    tokens, q_heads, head_dim = q.shape
    num_pages, page_size, combined, _ = kv_pages.shape
    kv_heads, max_num_seqs, pages_per_seq = combined // 2, *page_indices.shape
    group = q_heads // kv_heads
    ppb = num_kv_pages_per_block or min(pages_per_seq, 8)
    block_q = num_queries_per_block or min(tokens, 32)
    padded = pl.cdiv(tokens, block_q) * block_q
    kv_blocks = pl.cdiv(pages_per_seq, ppb)

    # each sequence's query count, 0 past num_seqs: the "groups" of the visit lists
    seq_ids = jnp.arange(max_num_seqs, dtype=jnp.int32)
    q_lens = jnp.where(seq_ids < num_seqs[0], cu_q_lens[1:] - cu_q_lens[:-1], 0)
    (_, seq_of_visit, tile_of_visit), visits = make_group_metadata(
        group_sizes=q_lens, m=padded, tm=block_q, start_group=jnp.int32(0),
        num_nonzero_groups=max_num_seqs, visit_empty_groups=False)
    slots = padded // block_q + max_num_seqs

    # [tokens, q_heads, d] -> [kv_heads, tokens * group, d]: a kv head's q heads token-major
    q_rows = jnp.pad(q, ((0, padded - tokens), (0, 0), (0, 0)))
    q_rows = q_rows.reshape(padded, kv_heads, group, head_dim).transpose(1, 0, 2, 3)
    q_rows = q_rows.reshape(kv_heads, padded * group, head_dim)
    cache = kv_pages.reshape(num_pages, page_size, combined * head_dim)

    def page_map(t, which):
        def index_map(h, v, j, cu, kv_lens, pages, seqs, tiles, count):
            s = seqs[v]
            last = jnp.maximum(pl.cdiv(kv_lens[s], ppb * page_size) - 1, 0)
            position = jnp.minimum(jnp.minimum(j, last) * ppb + t, pages_per_seq - 1)
            return (pages[s, position], 0, 2 * h + which)
        return index_map

    cache_specs = [pl.BlockSpec((None, page_size, head_dim), page_map(t, which))
                   for which in (0, 1) for t in range(ppb)]
    rows_spec = pl.BlockSpec((None, block_q * group, head_dim),
                             lambda h, v, j, cu, kv_lens, pages, seqs, tiles, count: (
                                 h, tiles[v], 0))
    kernel = functools.partial(
        _kernel, pages_per_block=ppb, page_size=page_size, block_q=block_q, group=group,
        sm_scale=sm_scale, sliding_window=sliding_window, soft_cap=soft_cap,
        mask_value=mask_value, k_scale=k_scale, v_scale=v_scale)
    out = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct(q_rows.shape, q.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=6, grid=(kv_heads, slots, kv_blocks),
            in_specs=[rows_spec, *cache_specs], out_specs=rows_spec,
            scratch_shapes=[pltpu.VMEM((block_q * group, _LANES), _F32),
                            pltpu.VMEM((block_q * group, _LANES), _F32),
                            pltpu.VMEM((block_q * group, head_dim), _F32)]),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("arbitrary", "arbitrary", "arbitrary"),
            vmem_limit_bytes=vmem_limit_bytes),
        interpret=plax.default_backend() != "tpu", name="ragged_paged_attention")(
            cu_q_lens, kv_lens, page_indices, seq_of_visit, tile_of_visit, visits[None],
            q_rows, *([cache] * (2 * ppb)))
    out = out.reshape(kv_heads, padded, group, head_dim).transpose(1, 0, 2, 3)
    out = out.reshape(padded, q_heads, head_dim)[:tokens]
    # rows past the last sequence's queries (and tiles no visit reached) hold nothing
    valid = jnp.arange(tokens, dtype=jnp.int32)[:, None, None] < cu_q_lens[num_seqs[0]]
    return jnp.where(valid, out, jnp.zeros((), out.dtype))
