"""plax.experimental.pallas.ops.tpu.megablox (JAX's names and signatures): the grouped
matmuls gmm and tgmm in interpret mode on the CPU, against numpy, and gmm's gradient."""
import importlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental.pallas.ops.tpu import megablox

kernels = importlib.import_module("plax.experimental.pallas.ops.tpu.megablox.gmm")
SIZES = np.array([20, 0, 70, 30], np.int32)  # 120 of 128 rows; a group straddles tiles
OFFSETS = np.concatenate([[0], np.cumsum(SIZES)])
TILING = (32, 64, 128)


def _normal(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _gmm_reference(lhs, rhs, start=0, existing=None):
    out = np.zeros((lhs.shape[0], rhs.shape[-1]), np.float32) if existing is None \
        else existing.copy()
    for local, g in enumerate(range(start, start + rhs.shape[0])):
        rows = slice(OFFSETS[g], OFFSETS[g + 1])
        out[rows] = lhs[rows] @ rhs[local]
    return out


GMM = [  # rhs groups (from, to), group_offset, existing_out, transpose_rhs, dtype
    ((0, 4), None, False, False, np.float32),
    ((1, 3), 1, True, False, np.float32),
    ((0, 4), None, False, True, jnp.bfloat16),
]


@pytest.mark.parametrize("groups,offset,existing,transpose,dtype", GMM)
def test_gmm_matches_numpy(groups, offset, existing, transpose, dtype):
    lhs, rhs = _normal((128, 64), 0), _normal((4, 64, 128), 1)[slice(*groups)]
    lhs, rhs = lhs.astype(dtype).astype(np.float32), rhs.astype(dtype).astype(np.float32)
    out = _normal((128, 128), 2) if existing else None
    got = kernels.gmm(lhs.astype(dtype), (rhs.swapaxes(1, 2) if transpose else rhs).astype(dtype),
                      jnp.asarray(SIZES), tiling=TILING,
                      group_offset=None if offset is None else jnp.int32(offset),
                      existing_out=out, transpose_rhs=transpose)
    want = _gmm_reference(lhs, rhs, offset or 0, out)
    tol = 1e-4 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)


def test_tgmm_matches_numpy():
    lhs, rhs = _normal((64, 128), 3), _normal((128, 128), 4)
    got = kernels.tgmm(lhs, rhs, jnp.asarray(SIZES), tiling=TILING,
                       group_offset=jnp.int32(1), num_actual_groups=3)
    want = np.stack([lhs[:, OFFSETS[g]:OFFSETS[g + 1]] @ rhs[OFFSETS[g]:OFFSETS[g + 1]]
                     for g in range(1, 4)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    assert not np.asarray(got)[0].any()  # group 1 is empty


def test_gmm_gradient_matches_the_dense_computation():
    lhs, rhs = _normal((128, 64), 5), _normal((4, 64, 128), 6)
    group_of_row = np.minimum(np.searchsorted(OFFSETS[1:], np.arange(128), side="right"), 3)
    valid = (np.arange(128) < OFFSETS[-1])[:, None]

    def dense(lhs, rhs):
        out = jnp.einsum("mk,mkn->mn", lhs, rhs[group_of_row])
        return jnp.sum(jnp.sin(jnp.where(valid, out, 0.0)))

    def grouped(lhs, rhs):
        return jnp.sum(jnp.sin(megablox.gmm(lhs, rhs, jnp.asarray(SIZES), jnp.float32,
                                            TILING)))
    got = plax.jit(plax.grad(grouped, (0, 1)))(lhs, rhs)
    want = plax.jit(plax.grad(dense, (0, 1)))(lhs, rhs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


def test_group_metadata_lists_the_visits():
    (offsets, group_ids, tiles), num_tiles = plax.jit(lambda sizes: kernels.make_group_metadata(
        group_sizes=sizes, m=128, tm=32, start_group=0, num_nonzero_groups=4,
        visit_empty_groups=False))(SIZES)
    # group 0: tile 0; group 2 (rows 20..89): tiles 0-2; group 3 (rows 90..119): tiles 2-3
    assert int(num_tiles) == 6
    np.testing.assert_array_equal(np.asarray(offsets), OFFSETS)
    np.testing.assert_array_equal(np.asarray(group_ids)[:6], [0, 2, 2, 2, 3, 3])
    np.testing.assert_array_equal(np.asarray(tiles)[:6], [0, 0, 1, 2, 2, 3])


def test_argument_errors():
    lhs, rhs = _normal((128, 64), 0), _normal((4, 64, 128), 1)
    with pytest.raises(ValueError, match="Expected 32-bit integer 'group_sizes'"):
        kernels.gmm(lhs, rhs, jnp.asarray(SIZES, jnp.int16))
    with pytest.raises(ValueError, match="Expected 3-tensor for 'rhs' but got 2-tensor"):
        kernels.gmm(lhs, rhs[0], jnp.asarray(SIZES))
    with pytest.raises(ValueError, match="No tuned tiling found for"):
        kernels.gmm(lhs, rhs, jnp.asarray(SIZES), tiling=lambda m, k, n: None)
    with pytest.raises(ValueError, match="Expected bfloat16 or float32 array"):
        kernels.gmm(lhs.astype(np.int32), rhs, jnp.asarray(SIZES))
