"""Block-sparse mask information for splash attention, as
``splash_attention.splash_attention_mask_info``.

``process_mask`` cuts a [heads, q_seq_len, kv_seq_len] mask into blocks of ``block_shape``
and classifies each: 0 (all False: the kernels skip it), 1 (partial: its boolean block is
kept, once per distinct content, in ``partial_mask_blocks``) or 2 (all True: no mask is
applied). The integer arrays, placed in SMEM by scalar prefetch, are indexed
``[head, q_block, kv_block]``: ``block_mask`` the class, ``mask_next`` the index of the
block's partial mask, ``data_next`` the block index to fetch at that grid step. A skipped
block's ``data_next``/``mask_next`` repeat the previous visited block's along the grid's
inner axis (kv blocks for the forward and dq kernels, q blocks for ``process_mask_dkv``),
so no copy is issued for it; in the dk/dv info the q block indices count from the start
of the block's q shard (``q_seq_shards``), as each shard's kernel sees them. plax keeps the
whole grid (its arrays are not shrunk to the visited blocks) and always materialises partial
blocks (no in-kernel mask function).

``process_dynamic_mask`` does the same for a traced boolean mask (a ``jax.Array``): every
block is kept in ``partial_mask_blocks`` ([heads, q_blocks, kv_blocks, block_q, block_kv])
and ``mask_next`` indexes them (per head and q shard), so the info can be sharded with the
heads and q blocks.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import plax.numpy as jnp
from plax import lax
from plax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

__all__ = ["MaskInfo", "process_mask", "process_mask_dkv", "process_dynamic_mask",
           "process_dynamic_mask_dkv"]


class MaskInfo(NamedTuple):
    """The splash kernels' view of a mask: ``data_next``, ``mask_next`` and ``block_mask``
    (integer [heads, q_blocks, kv_blocks]), ``partial_mask_blocks`` (bool [n, block_q,
    block_kv], or None when no block is partial) and ``q_sequence`` (None: plax has no
    in-kernel mask functions)."""

    data_next: Any
    mask_next: Any
    block_mask: Any
    partial_mask_blocks: Any
    q_sequence: Any
    is_dynamic_mask: bool | None = None


def _downcast(array: np.ndarray) -> np.ndarray:
    """``array`` (non-negative int32) in the smallest of int8/int16/int32 that holds it."""
    top = int(array.max()) if array.size else 0
    for dtype in (np.int8, np.int16):
        if top <= np.iinfo(dtype).max:
            return array.astype(dtype)
    return array


def _carry_forward(visited: np.ndarray, values: np.ndarray, axis: int) -> np.ndarray:
    """``values`` where ``visited``; elsewhere the last visited value before it along
    ``axis`` (or, before the first visited one, the first visited value; 0 if none)."""
    values = np.moveaxis(values, axis, -1).copy()
    visited = np.moveaxis(visited, axis, -1)
    for index in np.ndindex(values.shape[:-1]):
        row, seen = values[index], visited[index]
        hits = np.flatnonzero(seen)
        current = row[hits[0]] if hits.size else 0
        for position in range(row.shape[0]):
            if seen[position]:
                current = row[position]
            row[position] = current
    return np.moveaxis(values, -1, axis)


def _as_multi_head(mask) -> mask_lib.MultiHeadMask:
    if isinstance(mask, mask_lib.MultiHeadMask):
        return mask
    if isinstance(mask, np.ndarray) and mask.ndim == 3:
        return mask_lib.MultiHeadMask([mask_lib.NumpyMask(m) for m in mask])
    raise ValueError(f"Expected a 3-dim mask (a MultiHeadMask or a [heads, q_seq_len, "
                     f"kv_seq_len] numpy array), instead got: {type(mask).__name__} of shape "
                     f"{getattr(mask, 'shape', None)}")


def _check_blocks(shape, block_shape, head_shards: int, q_seq_shards: int) -> None:
    heads, q_seq_len, kv_seq_len = shape
    q_block_size, kv_block_size = block_shape
    if q_seq_len % q_block_size:
        raise ValueError(f"q_block_size={q_block_size} should divide q_seq_len={q_seq_len}.")
    if kv_seq_len % kv_block_size:
        raise ValueError(f"kv_block_size={kv_block_size} should divide "
                         f"kv_seq_len={kv_seq_len}.")
    if q_seq_len % q_seq_shards:
        raise ValueError(f"q_seq_shards={q_seq_shards} should divide q_seq_len={q_seq_len}.")
    if (q_seq_len // q_seq_shards) % q_block_size:
        raise ValueError(f"q_block_size={q_block_size} should divide "
                         f"q_seq_len_per_shard={q_seq_len // q_seq_shards}.")
    if heads % head_shards:
        raise ValueError(f"head_shards={head_shards} should divide head_count={heads}.")


def _process(mask, block_shape, inner_axis: int, *, downcast_smem_data: bool,
             head_shards: int, q_seq_shards: int) -> tuple[MaskInfo, None]:
    mask = _as_multi_head(mask)
    if len(mask.shape) != 3:
        raise ValueError(f"Expected a 3-dim mask, instead got: mask.shape={mask.shape}")
    _check_blocks(mask.shape, block_shape, head_shards, q_seq_shards)
    heads, q_seq_len, kv_seq_len = mask.shape
    q_block_size, kv_block_size = block_shape
    q_blocks, kv_blocks = q_seq_len // q_block_size, kv_seq_len // kv_block_size
    block_mask = np.zeros((heads, q_blocks, kv_blocks), np.int32)
    partial_index = np.zeros_like(block_mask)
    partial_ids: dict[bytes, int] = {}
    partial_blocks: list[np.ndarray] = []
    for h, head_mask in enumerate(mask.masks):
        for i in range(q_blocks):
            rows = slice(i * q_block_size, (i + 1) * q_block_size)
            for j in range(kv_blocks):
                cols = slice(j * kv_block_size, (j + 1) * kv_block_size)
                block = np.asarray(head_mask[rows, cols], bool)
                if block.all():
                    block_mask[h, i, j] = 2
                elif block.any():
                    block_mask[h, i, j] = 1
                    key = block.tobytes()
                    if key not in partial_ids:
                        partial_ids[key] = len(partial_blocks)
                        partial_blocks.append(block)
                    partial_index[h, i, j] = partial_ids[key]
    # The dk/dv grid walks one q shard's blocks: its indices and carries stay in the shard.
    per_shard = q_blocks // q_seq_shards if inner_axis == 1 else q_blocks
    data_next = np.zeros_like(block_mask)
    mask_next = np.zeros_like(block_mask)
    for start in range(0, q_blocks, per_shard):
        rows = slice(start, start + per_shard)
        local = block_mask[:, rows]
        ids = (np.arange(per_shard)[:, None] if inner_axis == 1
               else np.arange(kv_blocks)[None, :])
        data_next[:, rows] = _carry_forward(
            local != 0, np.broadcast_to(ids, local.shape).astype(np.int32), inner_axis)
        mask_next[:, rows] = _carry_forward(local == 1, partial_index[:, rows], inner_axis)
    partial = np.stack(partial_blocks) if partial_blocks else None
    if downcast_smem_data:
        block_mask, data_next, mask_next = map(_downcast, (block_mask, data_next, mask_next))
    return MaskInfo(data_next=data_next, mask_next=mask_next if partial is not None else None,
                    block_mask=block_mask, partial_mask_blocks=partial, q_sequence=None,
                    is_dynamic_mask=False), None


def process_mask(mask, block_shape: tuple[int, int], *, downcast_smem_data: bool = True,
                 head_shards: int = 1, q_seq_shards: int = 1,
                 shrink_grid: bool = True) -> tuple[MaskInfo, None]:
    """The forward (and dq) kernel's ``MaskInfo`` of ``mask`` cut into ``block_shape``
    (block_q, block_kv) blocks, and the mask function (None in plax). ``shrink_grid`` is
    accepted; plax always keeps the whole grid."""
    del shrink_grid
    return _process(mask, tuple(block_shape), 2, downcast_smem_data=downcast_smem_data,
                    head_shards=head_shards, q_seq_shards=q_seq_shards)


def process_mask_dkv(mask, block_shape: tuple[int, int], *, downcast_smem_data: bool = True,
                     head_shards: int = 1, q_seq_shards: int = 1,
                     shrink_grid: bool = True) -> tuple[MaskInfo, None]:
    """The dk/dv kernel's ``MaskInfo``: as ``process_mask``, but its grid walks q blocks
    innermost, so ``data_next`` holds q block indices carried along the q axis."""
    del shrink_grid
    return _process(mask, tuple(block_shape), 1, downcast_smem_data=downcast_smem_data,
                    head_shards=head_shards, q_seq_shards=q_seq_shards)


def _carry_forward_traced(visited, values, axis: int):
    """``_carry_forward`` in jnp ops (for traced masks): a running maximum of the visited
    positions along ``axis`` picks each entry's source (the first visited one before any,
    position 0 when none is)."""
    positions = lax.broadcasted_iota(jnp.int32, values.shape, axis)
    last = lax.cummax(jnp.where(visited, positions, -1), axis=axis)
    first = jnp.min(jnp.where(visited, positions, values.shape[axis]), axis=axis,
                    keepdims=True)
    source = jnp.where(last >= 0, last, jnp.where(first < values.shape[axis], first, 0))
    return jnp.take_along_axis(values, source, axis=axis)


def _process_dynamic(mask, block_shape, is_dkv: bool, *, downcast_smem_data: bool,
                     head_shards: int, q_seq_shards: int) -> tuple[MaskInfo, None]:
    if len(mask.shape) != 3:
        raise ValueError(f"Expected a 3-dim mask, instead got: {mask.shape}.")
    if mask.dtype != jnp.bool_:
        raise ValueError(f"Expected a bool mask, instead got: {mask.dtype}.")
    block_shape = tuple(block_shape)
    _check_blocks(mask.shape, block_shape, head_shards, q_seq_shards)
    heads, q_seq_len, kv_seq_len = mask.shape
    bq, bkv = block_shape
    q_blocks, kv_blocks = q_seq_len // bq, kv_seq_len // bkv
    blocks = mask.reshape(heads, q_blocks, bq, kv_blocks, bkv).swapaxes(2, 3)
    full, some = jnp.all(blocks, axis=(-2, -1)), jnp.any(blocks, axis=(-2, -1))
    block_mask = jnp.where(full, 2, jnp.where(some, 1, 0)).astype(jnp.int32)
    # per (head shard, q shard) tile: indices local to the tile, carried along the inner axis
    hs, qs = heads // head_shards, q_blocks // q_seq_shards
    tiles = block_mask.reshape(head_shards, hs, q_seq_shards, qs, kv_blocks).swapaxes(1, 2)
    local_flat = jnp.arange(hs * qs * kv_blocks, dtype=jnp.int32).reshape(hs, qs, kv_blocks)
    ids = lax.broadcasted_iota(jnp.int32, (hs, qs, kv_blocks), 1 if is_dkv else 2)
    inner = 3 if is_dkv else 4  # the tiles' q or kv block axis (after the two shard axes)

    def untile(x):
        return x.swapaxes(1, 2).reshape(heads, q_blocks, kv_blocks)
    data_next = untile(_carry_forward_traced(tiles != 0, jnp.broadcast_to(ids, tiles.shape),
                                             inner))
    mask_next = untile(_carry_forward_traced(tiles == 1, jnp.broadcast_to(local_flat,
                                                                          tiles.shape), inner))
    if downcast_smem_data:
        block_mask = block_mask.astype(jnp.int8)
        data_next = data_next.astype(_small_type(qs if is_dkv else kv_blocks))
        mask_next = mask_next.astype(_small_type(hs * qs * kv_blocks))
    return MaskInfo(data_next=data_next, mask_next=mask_next, block_mask=block_mask,
                    partial_mask_blocks=blocks, q_sequence=None, is_dynamic_mask=True), None


def _small_type(top: int):
    for dtype in (np.int8, np.int16):
        if top <= np.iinfo(dtype).max:
            return dtype
    return np.int32


def process_dynamic_mask(mask, block_shape: tuple[int, int], *,
                         downcast_smem_data: bool = True, head_shards: int = 1,
                         q_seq_shards: int = 1, shrink_grid: bool = True):
    """The forward (and dq) ``MaskInfo`` of a traced bool [heads, q_seq_len, kv_seq_len]
    mask, and None (no mask function); ``shrink_grid`` is ignored, as in JAX."""
    del shrink_grid
    return _process_dynamic(mask, block_shape, False, downcast_smem_data=downcast_smem_data,
                            head_shards=head_shards, q_seq_shards=q_seq_shards)


def process_dynamic_mask_dkv(mask, block_shape: tuple[int, int], *,
                             downcast_smem_data: bool = True, head_shards: int = 1,
                             q_seq_shards: int = 1, shrink_grid: bool = True):
    """The dk/dv kernel's ``MaskInfo`` of a traced mask (q block indices carried along q,
    local to each q shard)."""
    del shrink_grid
    return _process_dynamic(mask, block_shape, True, downcast_smem_data=downcast_smem_data,
                            head_shards=head_shards, q_seq_shards=q_seq_shards)
