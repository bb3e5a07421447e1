"""Block-invariant sampling (JAX's ``jax._src.blocked_sampler``): an array drawn block by
block, e.g. in a Pallas kernel's grid, comes out the same whatever the block shape, because
each ``tile_size`` tile is drawn with its own key, ``fold_in(global_key, tile number)``, the
tiles numbered row-major over the whole array."""
from __future__ import annotations

import math

import plax.numpy as jnp
from plax.random.keys import fold_in


def _tiles_per(block_size, tile_size, what: str) -> tuple:
    if len(block_size) != len(tile_size):
        raise ValueError(f"{what}: block_size {tuple(block_size)} and tile_size "
                         f"{tuple(tile_size)} must have the same number of dimensions")
    for b, t in zip(block_size, tile_size):
        if b % t:
            raise ValueError(f"{what}: tile_size {tuple(tile_size)} must divide block_size "
                             f"{tuple(block_size)} in every dimension")
    return tuple(b // t for b, t in zip(block_size, tile_size))


def _nested(grid: tuple, item):
    """A nested list of ``grid``'s shape, ``item(position)`` at each position."""
    def build(prefix):
        if len(prefix) == len(grid):
            return item(prefix)
        return [build(prefix + (i,)) for i in range(grid[len(prefix)])]
    return build(())


def blocked_fold_in(global_key, total_size, block_size, tile_size, block_index):
    """The keys of the tiles that make up block ``block_index`` of an array of
    ``total_size``: a nested list of ``block_size // tile_size`` keys, each
    ``fold_in(global_key, n)`` for the tile's row-major number ``n`` among all the array's
    tiles. ``block_index`` may hold traced integers (a kernel's program ids)."""
    per_block = _tiles_per(block_size, tile_size, "blocked_fold_in")
    if len(total_size) != len(per_block) or len(block_index) != len(per_block):
        raise ValueError(f"blocked_fold_in: total_size {tuple(total_size)} and block_index "
                         f"must have as many dimensions as block_size {tuple(block_size)}")
    tiles = [math.ceil(n / t) for n, t in zip(total_size, tile_size)]
    # row-major strides over the grid of tiles (the tile count, not the element count, so
    # arrays of more than 2**32 elements number their tiles without overflow)
    strides = [math.prod(tiles[d + 1:]) for d in range(len(tiles))]

    def key_of(local):
        number = 0
        for b, per, here, stride in zip(block_index, per_block, local, strides):
            number = number + (jnp.asarray(b, jnp.int32) * per + here) * stride
        return fold_in(global_key, number)
    return _nested(per_block, key_of)


def sample_block(sampler_fn, keys, block_size, tile_size, *args, **kwargs):
    """One block of samples: ``sampler_fn(key, *args, shape=tile_size, **kwargs)`` for each
    tile's key of ``keys`` (from ``blocked_fold_in``), the tiles put together."""
    per_block = _tiles_per(block_size, tile_size, "sample_block")
    tile_size = tuple(tile_size)

    def join(part, axis):
        if axis == len(per_block):
            return sampler_fn(part, *args, shape=tile_size, **kwargs)
        if len(part) != per_block[axis]:
            raise ValueError(f"sample_block: keys hold {len(part)} tiles along dimension "
                             f"{axis}, but block_size / tile_size is {per_block[axis]}")
        return jnp.concatenate([join(p, axis + 1) for p in part], axis=axis)
    return join(keys, 0)


__all__ = ["blocked_fold_in", "sample_block"]
