"""plax.scipy.linalg.expm against scipy.linalg.expm (every Padé degree, scaling and squaring,
batches, upper_triangular, max_squarings) and its derivative against the Fréchet derivative;
block_diag, toeplitz and hilbert against SciPy's."""
import numpy as np
import pytest
import scipy.linalg as sla

import plax
import plax.scipy.linalg as sl
from plax.test_util import check_grads

from helpers import C64, F32, rand, x64_for, linalg_close as _close

F64 = np.dtype(np.float64)



# --- expm ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_expm_matches_scipy_across_pade_degrees(dtype):
    with x64_for(dtype):
        a = rand((4, 4), dtype) / 2.0
        # 1-norms from 1e-3 to ~40: each Padé degree, and scaling with squaring.
        scales = (1e-3, 0.05, 0.4, 1.0, 2.0, 5.0)
        batch = np.stack([s * a for s in scales]).astype(dtype)
        got = sl.expm(batch)
        assert got.dtype == dtype
        want = np.stack([sla.expm(m) for m in batch])
        tol = dict(rtol=2e-5, atol=2e-5) if dtype != F64 else dict(rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(np.asarray(got) / np.abs(want).max(axis=(1, 2), keepdims=True),
                                   want / np.abs(want).max(axis=(1, 2), keepdims=True), **tol)


def test_expm_special_inputs():
    _close(sl.expm(np.zeros((3, 3), F32)), np.eye(3))
    _close(sl.expm(np.diag([1.0, -2.0, 0.5]).astype(F32)), np.diag(np.exp([1.0, -2.0, 0.5])))
    upper = np.triu(rand((4, 4)))
    _close(sl.expm(upper, upper_triangular=True), sla.expm(upper), rtol=1e-5, atol=1e-5)
    nil = np.array([[0.0, 100.0], [0.0, 0.0]], F32)
    _close(sl.expm(nil), [[1.0, 100.0], [0.0, 1.0]])
    assert sl.expm(np.eye(2, dtype=np.int32)).dtype == F32
    # More squarings than allowed: NaN, as JAX.
    assert np.isnan(np.asarray(sl.expm(np.diag([40.0, 1.0]).astype(F32), max_squarings=2))).all()
    _close(sl.expm(np.diag([40.0, 1.0]).astype(F32) / 10, max_squarings=2),
           np.diag(np.exp([4.0, 0.1])), rtol=1e-5)


def test_expm_gradient_matches_the_frechet_derivative():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], F32)
    g = plax.grad(lambda m: sl.expm(m).sum())(a)
    # d/dA sum(expm(A)) = L(Aᵀ, ones): the top-right block of expm([[Aᵀ, E], [0, Aᵀ]]).
    block = np.block([[a.T, np.ones((2, 2))], [np.zeros((2, 2)), a.T]]).astype(np.float64)
    np.testing.assert_allclose(np.asarray(g), sla.expm(block)[:2, 2:], rtol=2e-5)
    with plax.enable_x64():
        check_grads(sl.expm, (rand((3, 3), F64) / 2,), order=1)
        check_grads(sl.expm, (3 * rand((3, 3), F64),), order=1, atol=1e-5, rtol=1e-5)


def test_expm_vmap_and_jit():
    a = rand((3, 3, 3))
    want = np.stack([sla.expm(m) for m in a])
    _close(plax.vmap(sl.expm)(a), want, rtol=2e-5, atol=2e-5)
    _close(plax.jit(sl.expm)(a), want, rtol=2e-5, atol=2e-5)


# --- constructed matrices ---------------------------------------------------------------------
def test_block_diag_toeplitz_hilbert():
    got = sl.block_diag(np.ones((2, 3), F32), np.arange(2.0, dtype=F32), 3.0,
                        np.ones((1, 1), np.int32))
    assert got.dtype == F32
    _close(got, sla.block_diag(np.ones((2, 3)), np.arange(2.0), 3.0, np.ones((1, 1))))
    assert sl.block_diag().shape == (1, 0)
    c = np.array([1.0, 2.0j, 3.0], C64)
    _close(sl.toeplitz(c), sla.toeplitz(c), C64)
    _close(sl.toeplitz(np.arange(3.0, dtype=F32), np.arange(4.0, dtype=F32) + 10),
           sla.toeplitz(np.arange(3.0), np.arange(4.0) + 10))
    batch = sl.toeplitz(np.arange(6.0, dtype=F32).reshape(2, 3), np.ones(4, F32))
    assert batch.shape == (2, 3, 4)
    _close(batch[1], sla.toeplitz(np.arange(3.0, 6.0), np.ones(4)))
    assert sl.toeplitz(np.arange(3)).dtype == np.int32
    _close(sl.hilbert(4), sla.hilbert(4))
    assert sl.hilbert(0).shape == (0, 0)
