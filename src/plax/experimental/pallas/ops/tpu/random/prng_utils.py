"""Index arithmetic shared by the PRNG kernels: where a block's elements sit in the flat
(row-major) order of the whole array, which is the counter each element hashes."""
from __future__ import annotations

from collections.abc import Sequence

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

__all__ = ["Shape", "blocked_iota", "compute_scalar_offset", "round_up"]

Shape = Sequence[int]


def round_up(x, y):
    """``x`` rounded up to a multiple of ``y``."""
    return -(-x // y) * y


def _row_major_strides(shape: Shape) -> list[int]:
    strides, step = [], 1
    for dim in reversed(tuple(shape)):
        strides.append(step)
        step *= dim
    return strides[::-1]


def blocked_iota(block_shape: Shape, total_shape: Shape):
    """A ``block_shape`` uint32 array holding each element's flat offset from the block's
    first element, in the row-major order of an array of ``total_shape`` (whose trailing
    dimensions the block's dimensions are)."""
    block_shape = tuple(block_shape)
    strides = _row_major_strides(total_shape)[len(tuple(total_shape)) - len(block_shape):]
    out = jnp.zeros(block_shape, jnp.uint32)
    for dim, stride in enumerate(strides):
        out = out + lax.broadcasted_iota(jnp.uint32, block_shape, dim) * jnp.uint32(stride)
    return out


def compute_scalar_offset(iteration_index, total_size: Shape, block_size: Shape):
    """The flat (row-major, in an array of ``total_size``) index of the first element of the
    block at ``iteration_index`` (one block index per dimension, blocks of ``block_size``)."""
    strides = _row_major_strides(total_size)
    offset = 0
    for index, block, stride in zip(iteration_index, block_size, strides):
        offset = offset + index * (block * stride)
    return offset


def _check_blocked_shape(shape: tuple, block_size: tuple) -> None:
    total = 1
    for dim in shape:
        total *= dim
    if total > 0xFFFFFFFF:
        raise ValueError(f"Shape too large: {total} > {0xFFFFFFFF} (each element's counter is "
                         "one uint32 word).")
    if len(shape) < 2 or shape[-2] % block_size[-2] or shape[-1] % block_size[-1]:
        raise ValueError(f"Shape dimension {shape[-2:]} must be divisible by {block_size}: "
                         "pad the shape (the *_count functions do).")


def _hash_counters_call(hash_block, key, shape: Shape, unpadded_shape: Shape,
                        block_size: tuple, offset=0, fuse_output: bool = True):
    """Runs ``hash_block(k1, k2, counters) -> (word1, word2)`` over an array of ``shape``
    (a multiple of ``block_size`` in its last two dimensions) in a kernel, one block per
    grid step; each element's counter is its flat index in ``unpadded_shape`` plus
    ``offset``. The two words are xor-ed (``fuse_output``) or returned stacked first."""
    shape, block_size = tuple(shape), tuple(block_size)
    _check_blocked_shape(shape, block_size)
    grid = shape[:-2] + (shape[-2] // block_size[0], shape[-1] // block_size[1])
    block_shape = (1,) * (len(shape) - 2) + block_size
    offset = jnp.asarray(offset, jnp.uint32)
    if offset.ndim != 0:
        raise ValueError(f"Offset must be scalar, got {offset.shape}")

    def kernel(offset_ref, key_ref, out_ref):
        ids = tuple(pl.program_id(i) for i in range(len(grid)))
        start = compute_scalar_offset(ids, unpadded_shape, block_shape)
        counters = (blocked_iota(block_size, unpadded_shape) + start.astype(jnp.uint32)
                    + offset_ref[0])
        word1, word2 = hash_block(key_ref[0, 0], key_ref[0, 1], counters)
        if fuse_output:
            out_ref[...] = (word1 ^ word2).reshape(out_ref.shape)
        else:
            out_ref[0, ...] = word1.reshape(out_ref.shape[1:])
            out_ref[1, ...] = word2.reshape(out_ref.shape[1:])

    if fuse_output:
        out_shape, out_spec = shape, pl.BlockSpec(block_shape, lambda *ids: ids)
    else:
        out_shape = (2,) + shape
        out_spec = pl.BlockSpec((2,) + block_shape, lambda *ids: (0, *ids))
    smem = pl.BlockSpec(memory_space=pltpu.SMEM)
    return pl.pallas_call(
        kernel, out_shape=plax.ShapeDtypeStruct(out_shape, jnp.uint32), grid=grid,
        in_specs=[smem, smem], out_specs=out_spec,
        interpret=plax.default_backend() != "tpu",
    )(offset.reshape((1,)), jnp.asarray(key, jnp.uint32).reshape((1, 2)))


def _padded_to_blocks(run, shape: Shape, block_size: tuple):
    """``run(padded_shape, unpadded_shape)`` for any ``shape``: 0D and 1D shapes taken as
    rows of a 2D one, the last two dimensions padded to ``block_size`` and the padding
    sliced off the result (whose leading dimensions ``run`` may add)."""
    shape = tuple(shape)
    if len(shape) < 2:
        out = _padded_to_blocks(run, (1,) * (2 - len(shape)) + shape, block_size)
        return out[..., 0, 0] if not shape else out[..., 0, :]
    padded = shape[:-2] + (round_up(shape[-2], block_size[0]),
                           round_up(shape[-1], block_size[1]))
    out = run(padded, shape)
    if padded != shape:
        out = out[..., :shape[-2], :shape[-1]]
    return out
