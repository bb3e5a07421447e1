"""Grouped matmul kernels, as ``jax.experimental.pallas.ops.tpu.megablox.gmm``.

The rows of ``lhs`` [m, k] fall into consecutive groups (``group_sizes``). ``gmm`` multiplies
each group's rows by that group's matrix ``rhs[g]`` [k, n]; ``tgmm`` gives, per group, the
product ``lhs[:, rows].T``-style ``lhs[:, rows] @ rhs[rows, :]`` of ``lhs`` [k, m] and
``rhs`` [m, n] (gmm's weight gradient).

Both kernels walk *visits*: one per (group, m tile) pair that meet, in row order, so a tile
straddling a group boundary is visited once per group, and each visit masks the rows outside
its group. The visits are computed with jnp (``make_group_metadata``) and prefetched into
SMEM, where the index maps read them; the grid has a static upper bound of visits and the
steps past the real count do nothing (their blocks are the last real visit's, so no copy).
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Optional

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax.experimental.pallas.ops.tpu.megablox import common

__all__ = ["gmm", "tgmm", "make_group_metadata", "GroupMetadata", "LutFn", "partial"]

# (group_offsets [num_groups + 1], group_ids [visits], m_tile_ids [visits])
GroupMetadata = Any
# (m, k, n) -> (tm, tk, tn), or None where no tiling is known
LutFn = Callable[[int, int, int], Optional[tuple[int, int, int]]]
_F32 = np.float32


def _tiles(what: str, size: int, tile: int) -> int:
    if size % tile:
        raise ValueError(f"{what}: the tile {tile} must divide the dimension {size} (pass a "
                         "tiling whose sizes divide m, k and n)")
    return size // tile


def make_group_metadata(*, group_sizes, m: int, tm: int, start_group, num_nonzero_groups: int,
                        visit_empty_groups: bool = True):
    """The visits of the groups ``start_group .. start_group + num_nonzero_groups - 1`` over
    the ``m // tm`` row tiles: ``((group_offsets, group_ids, m_tile_ids), num_tiles)``.

    ``group_offsets[g]`` is group g's first row (``group_offsets[-1]`` the rows' total);
    visit ``i`` works on group ``group_ids[i]`` in row tile ``m_tile_ids[i]`` (arrays of
    ``m // tm + number of groups`` entries, those from ``num_tiles`` on repeating the last
    visit). ``visit_empty_groups`` gives an empty group one visit (tgmm writes its zeros)."""
    num_groups = group_sizes.shape[0]
    tiles_m = _tiles("m", m, tm)
    ends = jnp.cumsum(group_sizes.astype(jnp.int32))
    offsets = jnp.concatenate([jnp.zeros((1,), jnp.int32), ends])
    starts = offsets[:-1]
    first_tile = jnp.minimum(starts // tm, tiles_m - 1)
    last_tile = jnp.maximum((ends - 1) // tm, first_tile)
    groups = jnp.arange(num_groups, dtype=jnp.int32)
    chosen = jnp.logical_and(groups >= start_group, groups < start_group + num_nonzero_groups)
    empty_visits = 1 if visit_empty_groups else 0
    visits = jnp.where(group_sizes > 0, last_tile - first_tile + 1, empty_visits)
    visits = jnp.where(chosen, visits, 0)
    visit_ends = jnp.cumsum(visits)
    num_tiles = visit_ends[-1]
    slots = tiles_m + num_groups
    index = jnp.minimum(jnp.arange(slots, dtype=jnp.int32), jnp.maximum(num_tiles - 1, 0))
    group_ids = jnp.sum((visit_ends[None, :] <= index[:, None]).astype(jnp.int32), axis=1)
    group_ids = jnp.minimum(group_ids, num_groups - 1)
    m_tile_ids = first_tile[group_ids] + index - (visit_ends - visits)[group_ids]
    m_tile_ids = jnp.clip(m_tile_ids, 0, tiles_m - 1)
    return (offsets, group_ids, m_tile_ids), num_tiles


def _rows_in_group(offsets_ref, group, tile, tm, shape, axis):
    """Where the rows of row tile ``tile`` (along ``axis`` of ``shape``) are in ``group``."""
    rows = tile * tm + lax.broadcasted_iota(jnp.int32, shape, axis)
    return jnp.logical_and(rows >= offsets_ref[group], rows < offsets_ref[group + 1])


def _validate(lhs, rhs, group_sizes, rhs_dims):
    if lhs.ndim != 2:
        raise ValueError(f"Expected 2-tensor for 'lhs' but got {lhs.ndim}-tensor.")
    common.assert_is_supported_dtype(lhs.dtype)
    if rhs.ndim != rhs_dims:
        raise ValueError(f"Expected {rhs_dims}-tensor for 'rhs' but got {rhs.ndim}-tensor.")
    common.assert_is_supported_dtype(rhs.dtype)
    if group_sizes.dtype != jnp.int32:
        raise ValueError(f"Expected 32-bit integer 'group_sizes' but got {group_sizes.dtype}.")


def _tiling(lhs, rhs, tiling, dims):
    """The input dtype and the tile sizes (a LutFn looked up, each cut down to its dim)."""
    if callable(tiling):
        tiling = tiling(*dims)
    if tiling is None:
        raise ValueError(f"No tuned tiling found for (m, k, n) = {tuple(dims)}")
    tm, tk, tn = (min(t, d) for t, d in zip(tiling, dims))
    return common.select_input_dtype(lhs, rhs), (tm, tk, tn)


def _start_group(group_offset):
    if group_offset is None:
        return jnp.zeros((1,), jnp.int32)
    if jnp.shape(group_offset):
        raise ValueError(f"group_offset must be a ()-shaped array. Got: "
                         f"{jnp.shape(group_offset)}.")
    return jnp.asarray(group_offset, jnp.int32)[None]


@partial(plax.jit, static_argnames=["preferred_element_type", "tiling", "transpose_rhs",
                                    "interpret"])
def gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
        tiling: tuple[int, int, int] | LutFn | None = (128, 128, 128), group_offset=None,
        existing_out=None, transpose_rhs: bool = False, interpret: bool = False):
    """``out[rows of g] = lhs[rows of g] @ rhs[g - group_offset]`` for the groups
    ``group_offset .. group_offset + rhs.shape[0] - 1`` of ``group_sizes``: ``lhs`` [m, k],
    ``rhs`` [groups, k, n] ([groups, n, k] with ``transpose_rhs``), the result [m, n] in
    ``preferred_element_type``. Other rows are 0, or ``existing_out``'s where it is given.
    ``tiling`` is (tm, tk, tn) or a function of (m, k, n) giving it. Off a TPU the kernel
    runs in interpret mode whatever ``interpret`` says."""
    if existing_out is not None and existing_out.dtype != preferred_element_type:
        raise ValueError("Existing output dtype must match preferred_element_type.")
    start = _start_group(group_offset)
    _validate(lhs, rhs, group_sizes, 3)
    m, k = lhs.shape
    n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    input_dtype, (tm, tk, tn) = _tiling(lhs, rhs, tiling, (m, k, n))
    tiles_k, tiles_n = _tiles("k", k, tk), _tiles("n", n, tn)
    local_groups = rhs.shape[0]
    (offsets, group_ids, m_tile_ids), num_tiles = make_group_metadata(
        group_sizes=group_sizes, m=m, tm=tm, start_group=start[0],
        num_nonzero_groups=local_groups, visit_empty_groups=False)

    def lhs_map(j, v, kk, offsets, groups, tiles, start, count):
        return (tiles[v], kk)

    def rhs_map(j, v, kk, offsets, groups, tiles, start, count):
        g = groups[v] - start[0]
        return (g, j, kk) if transpose_rhs else (g, kk, j)

    def out_map(j, v, kk, offsets, groups, tiles, start, count):
        return (tiles[v], j)

    rhs_block = (None, tn, tk) if transpose_rhs else (None, tk, tn)
    in_specs = [pl.BlockSpec((tm, tk), lhs_map), pl.BlockSpec(rhs_block, rhs_map)]
    operands = [lhs.astype(input_dtype), rhs.astype(input_dtype)]
    aliases = {}
    if existing_out is not None:
        in_specs.append(pl.BlockSpec((tm, tn), out_map))
        operands.append(existing_out)
        aliases = {7: 0}  # (after the five prefetched arrays, lhs and rhs)
    contract = (((1,), (1,)), ((), ())) if transpose_rhs else (((1,), (0,)), ((), ()))
    has_existing = existing_out is not None

    def kernel(offsets_ref, groups_ref, tiles_ref, start_ref, count_ref, lhs_ref, rhs_ref,
               *refs):
        existing_ref, out_ref, acc_ref = refs if has_existing else (None, *refs)
        v, kk = pl.program_id(1), pl.program_id(2)
        active = v < count_ref[0]

        @pl.when(kk == 0)
        def _zero():
            acc_ref[...] = jnp.zeros(acc_ref.shape, _F32)

        @pl.when(active)
        def _accumulate():
            acc_ref[...] += lax.dot_general(lhs_ref[...], rhs_ref[...], contract,
                                            preferred_element_type=_F32)

        @pl.when(jnp.logical_and(active, kk == tiles_k - 1))
        def _store():
            tile = tiles_ref[v]
            first = jnp.logical_or(v == 0, tiles_ref[jnp.maximum(v - 1, 0)] != tile)
            mine = _rows_in_group(offsets_ref, groups_ref[v], tile, tm, (tm, tn), 0)
            if has_existing:
                base = existing_ref[...].astype(_F32)
            else:
                base = jnp.zeros((tm, tn), _F32)
            before = jnp.where(first, base, out_ref[...].astype(_F32))
            out_ref[...] = jnp.where(mine, acc_ref[...], before).astype(out_ref.dtype)

    out = pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct((m, n), preferred_element_type),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=5, grid=(tiles_n, m // tm + group_sizes.shape[0], tiles_k),
            in_specs=in_specs, out_specs=pl.BlockSpec((tm, tn), out_map),
            scratch_shapes=[pltpu.VMEM((tm, tn), _F32)]),
        input_output_aliases=aliases,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")),
        interpret=interpret or plax.default_backend() != "tpu", name="gmm")(
            offsets, group_ids, m_tile_ids, start, num_tiles[None], *operands)
    if existing_out is None:  # (row tiles no visit reached hold nothing written)
        rows = lax.broadcasted_iota(jnp.int32, (m, 1), 0)
        valid = jnp.logical_and(rows >= offsets[start[0]],
                                rows < offsets[start[0] + local_groups])
        out = jnp.where(valid, out, jnp.zeros((), out.dtype))
    return out


@partial(plax.jit, static_argnames=["preferred_element_type", "tiling", "num_actual_groups",
                                    "interpret"])
def tgmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
         tiling: tuple[int, int, int] | LutFn | None = (128, 128, 128), group_offset=None,
         num_actual_groups: int | None = None, existing_out=None, interpret: bool = False):
    """``out[g - group_offset] = lhs[:, rows of g] @ rhs[rows of g, :]`` for
    ``num_actual_groups`` groups (default all) from ``group_offset``: ``lhs`` [k, m],
    ``rhs`` [m, n], the result [groups, k, n] (an empty group's is 0), plus
    ``existing_out`` where it is given. Off a TPU the kernel runs in interpret mode."""
    start = _start_group(group_offset)
    _validate(lhs, rhs, group_sizes, 2)
    k, m = lhs.shape
    n = rhs.shape[1]
    input_dtype, (tm, tk, tn) = _tiling(lhs, rhs, tiling, (m, k, n))
    tiles_k, tiles_n = _tiles("k", k, tk), _tiles("n", n, tn)
    groups = num_actual_groups if num_actual_groups is not None else group_sizes.shape[0]
    (offsets, group_ids, m_tile_ids), num_tiles = make_group_metadata(
        group_sizes=group_sizes, m=m, tm=tm, start_group=start[0], num_nonzero_groups=groups,
        visit_empty_groups=True)
    slots = m // tm + group_sizes.shape[0]

    def lhs_map(i, j, v, offsets, groups, tiles, start, count):
        return (i, tiles[v])

    def rhs_map(i, j, v, offsets, groups, tiles, start, count):
        return (tiles[v], j)

    def out_map(i, j, v, offsets, groups, tiles, start, count):
        return (groups[v] - start[0], i, j)

    in_specs = [pl.BlockSpec((tk, tm), lhs_map), pl.BlockSpec((tm, tn), rhs_map)]
    operands = [lhs.astype(input_dtype), rhs.astype(input_dtype)]
    has_existing = existing_out is not None
    if has_existing:
        in_specs.append(pl.BlockSpec((None, tk, tn), out_map))
        operands.append(existing_out)

    def kernel(offsets_ref, groups_ref, tiles_ref, start_ref, count_ref, lhs_ref, rhs_ref,
               *refs):
        existing_ref, out_ref, acc_ref = refs if has_existing else (None, *refs)
        v = pl.program_id(2)
        count = count_ref[0]
        active = v < count
        group = groups_ref[v]
        first = jnp.logical_or(v == 0, groups_ref[jnp.maximum(v - 1, 0)] != group)
        last = jnp.logical_or(v == count - 1,
                              groups_ref[jnp.minimum(v + 1, slots - 1)] != group)

        @pl.when(first)
        def _zero():
            acc_ref[...] = jnp.zeros(acc_ref.shape, _F32)

        @pl.when(active)
        def _accumulate():
            tile = tiles_ref[v]
            cols = _rows_in_group(offsets_ref, group, tile, tm, (tk, tm), 1)
            rows = _rows_in_group(offsets_ref, group, tile, tm, (tm, tn), 0)
            x = jnp.where(cols, lhs_ref[...], jnp.zeros((), lhs_ref.dtype))
            y = jnp.where(rows, rhs_ref[...], jnp.zeros((), rhs_ref.dtype))
            acc_ref[...] += lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                            preferred_element_type=_F32)

        @pl.when(jnp.logical_and(active, last))
        def _store():
            total = acc_ref[...]
            if has_existing:
                total = total + existing_ref[...].astype(_F32)
            out_ref[...] = total.astype(out_ref.dtype)

    return pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct((groups, k, n), preferred_element_type),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=5, grid=(tiles_k, tiles_n, slots), in_specs=in_specs,
            out_specs=pl.BlockSpec((None, tk, tn), out_map),
            scratch_shapes=[pltpu.VMEM((tk, tn), _F32)]),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        interpret=interpret or plax.default_backend() != "tpu", name="tgmm")(
            offsets, group_ids, m_tile_ids, start, num_tiles[None], *operands)
