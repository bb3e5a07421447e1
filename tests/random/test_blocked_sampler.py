"""Block-invariant sampling (jax._src.blocked_sampler, plax.random.blocked): each tile is
drawn with fold_in(key, its row-major tile number), so any block shape gives the same array."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.random.blocked import blocked_fold_in, sample_block

KEY = plax.random.key(0)


def _draw(total, block, tile):
    grid = [-(-n // b) for n, b in zip(total, block)]
    rows = []
    for i in range(grid[0]):
        keys = [blocked_fold_in(KEY, total, block, tile, (i, j)) for j in range(grid[1])]
        rows.append(jnp.concatenate([sample_block(plax.random.uniform, k, block, tile)
                                     for k in keys], axis=1))
    return np.asarray(jnp.concatenate(rows, axis=0))[:total[0], :total[1]]


def test_tile_keys_are_fold_ins_of_row_major_tile_numbers():
    # a 16x512 array in 8x128 tiles: 2x4 tiles; block (1, 0) of 16x256 blocks (2x2 tiles
    # each) starts at tile row 2, column 0
    keys = blocked_fold_in(KEY, (16, 512), (16, 256), (8, 128), (1, 0))
    numbers = [[8, 9], [12, 13]]
    for row, want_row in zip(keys, numbers):
        for k, n in zip(row, want_row):
            np.testing.assert_array_equal(plax.random.key_data(k),
                                          plax.random.key_data(plax.random.fold_in(KEY, n)))


@pytest.mark.parametrize("block_a,block_b", [((8, 128), (16, 256)), ((16, 128), (8, 256))])
def test_the_array_does_not_depend_on_the_block_shape(block_a, block_b):
    a, b = _draw((24, 300), block_a, (8, 128)), _draw((24, 300), block_b, (8, 128))
    assert a.shape == (24, 300) and len(np.unique(a)) > 7000
    np.testing.assert_array_equal(a, b)
    # each tile is uniform(fold_in(key, n), tile_size)
    first = plax.random.uniform(plax.random.fold_in(KEY, 1), (8, 128))
    np.testing.assert_array_equal(a[:8, 128:256], first)


def test_traced_block_indices_and_sampler_arguments():
    f = plax.jit(lambda i, j: sample_block(
        plax.random.normal, blocked_fold_in(KEY, (16, 16), (8, 8), (4, 8), (i, j)), (8, 8),
        (4, 8), dtype=jnp.float32))
    got = f(1, 1)
    want = jnp.concatenate([plax.random.normal(plax.random.fold_in(KEY, n), (4, 8))
                            for n in (5, 7)], axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_tile_that_does_not_divide_the_block_is_refused():
    with pytest.raises(ValueError, match=r"tile_size \(3, 8\) must divide block_size"):
        blocked_fold_in(KEY, (16, 16), (8, 8), (3, 8), (0, 0))
