"""plax.numpy.linalg's factorisations against numpy.linalg: cholesky (upper=,
symmetrize_input), qr (every mode), svd (incl. hermitian), svdvals, eigh/eigvalsh, eig/eigvals;
JAX's result types, non-PD input as JAX (NaN), derivatives, vmap, jit and errors."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads

from helpers import C64, F32, linalg_tol, rand, spd, x64_for, linalg_close as _close

L = jnp.linalg
F64 = np.dtype(np.float64)



# --- cholesky ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_cholesky_matches_numpy(dtype):
    with x64_for(dtype):
        a = spd((2, 3, 4, 4), dtype)
        low = L.cholesky(a)
        assert low.dtype == dtype
        _close(low, np.linalg.cholesky(a), dtype)
        _close(L.cholesky(a, upper=True), np.linalg.cholesky(a, upper=True), dtype)


def test_cholesky_symmetrize_input_and_non_positive_definite():
    a = spd((3, 3), F32)
    skewed = a + np.triu(np.ones((3, 3), F32), 1)  # the upper triangle disagrees
    _close(L.cholesky(skewed), np.linalg.cholesky((skewed + skewed.T) / 2), F32)
    _close(L.cholesky(skewed, symmetrize_input=False), np.linalg.cholesky(a), F32)
    out = np.asarray(L.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]], F32)))
    assert np.isnan(out[1, 1]) and out[0, 1] == 0.0


def test_cholesky_gradient_and_vmap():
    with plax.enable_x64():
        a = spd((3, 3), F64)
        check_grads(lambda x: L.cholesky(x), (a,), order=2, atol=1e-5, rtol=1e-5)
    a32 = spd((4, 3, 3), F32)
    _close(plax.vmap(L.cholesky)(a32), np.linalg.cholesky(a32), F32)


# --- qr, svd, eigh, eig ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 4, 4)])
@pytest.mark.parametrize("dtype", [F32, C64])
def test_qr_modes_match_numpy(shape, dtype):
    a = rand(shape, dtype)
    for mode in ("reduced", "complete"):
        q, r = res = L.qr(a, mode=mode)
        assert type(res).__name__ == "QRResult" and res._fields == ("Q", "R")
        wq, wr = np.linalg.qr(a, mode=mode)
        assert q.shape == wq.shape and r.shape == wr.shape
        _close(q @ r, a, dtype)
        np.testing.assert_allclose(np.abs(np.asarray(r)), np.abs(wr), **linalg_tol(dtype))
    r = L.qr(a, mode="r")
    assert isinstance(r, plax.Array) and r.shape == np.linalg.qr(a, mode="r").shape
    if len(shape) == 2:
        h, tau = L.qr(a, mode="raw")
        wh, wtau = np.linalg.qr(a, mode="raw")  # LAPACK's own factors: the same numbers
        _close(h, wh, dtype)
        _close(tau, wtau, dtype)


def test_qr_errors():
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode 'foo'"):
        L.qr(np.ones((2, 2), F32), mode="foo")
    with pytest.raises(TypeError, match="Input 0 to qr must have rank at least 2"):
        L.qr(np.ones(3, F32))


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 3, 5)])
@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_svd_matches_numpy(shape, dtype):
    with x64_for(dtype):
        a = rand(shape, dtype)
        res = L.svd(a, full_matrices=False)
        assert type(res).__name__ == "SVDResult" and res._fields == ("U", "S", "Vh")
        u, s, vh = res
        _close(s, np.linalg.svd(a, compute_uv=False), dtype)
        _close((u * s.astype(dtype)[..., None, :]) @ vh, a, dtype)
        assert L.svd(a).U.shape == np.linalg.svd(a)[0].shape
        _close(L.svdvals(a), np.linalg.svdvals(a), dtype)


def test_svd_hermitian():
    a = np.array([[2.0, 1.0], [1.0, -3.0]], F32)
    u, s, vh = L.svd(a, hermitian=True)
    _close(s, np.linalg.svd(a, compute_uv=False), F32)
    _close((u * s[None, :]) @ vh, a, F32)
    _close(L.svd(a, hermitian=True, compute_uv=False), np.linalg.svd(a, compute_uv=False), F32)


@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_eigh_and_eigvalsh_match_numpy(dtype):
    with x64_for(dtype):
        a = spd((2, 3, 4, 4), dtype) - 4 * np.eye(4, dtype=dtype)
        res = L.eigh(a)
        assert type(res).__name__ == "EighResult" and res._fields == ("eigenvalues",
                                                                     "eigenvectors")
        w, v = res
        assert w.dtype == np.finfo(dtype).dtype and v.dtype == dtype
        _close(w, np.linalg.eigvalsh(a), dtype)
        _close(v @ (w.astype(dtype)[..., None] * np.conj(np.swapaxes(np.asarray(v), -1, -2))),
               a, dtype)
        _close(L.eigvalsh(a), np.linalg.eigvalsh(a), dtype)
        # Only one triangle is read without symmetrisation.
        low = np.tril(np.asarray(a))
        _close(L.eigh(low, UPLO="L", symmetrize_input=False).eigenvalues,
               np.linalg.eigvalsh(a), dtype)
        _close(L.eigvalsh(np.triu(np.asarray(a)), UPLO="U", symmetrize_input=False),
               np.linalg.eigvalsh(a), dtype)


def test_eigh_errors():
    with pytest.raises(ValueError, match="UPLO must be one of None, 'L', or 'U', got X"):
        L.eigh(np.eye(2, dtype=F32), UPLO="X")
    with pytest.raises(ValueError, match="UPLO must be one of None, 'L', or 'U'"):
        L.eigvalsh(np.eye(2, dtype=F32), UPLO="X")


def test_eig_and_eigvals():
    a = rand((2, 3, 3), F32)
    res = L.eig(a)
    assert type(res).__name__ == "EigResult"
    w, v = res
    assert w.dtype == C64 and v.dtype == C64
    _close(a.astype(C64) @ v, np.asarray(v) * np.asarray(w)[..., None, :], C64)
    want = np.sort_complex(np.linalg.eigvals(a))
    _close(jnp.sort_complex(L.eigvals(a)), want, C64)
    rot = L.eigvals(np.array([[0.0, 1.0], [-1.0, 0.0]], F32))
    np.testing.assert_allclose(np.sort_complex(np.asarray(rot)), [-1j, 1j], atol=1e-6)
    with pytest.raises(ValueError, match="The input to eig must be a square matrix"):
        L.eig(np.ones((2, 3), F32))


def test_decompositions_under_jit_and_vmap():
    a = spd((3, 4, 4), F32)
    w = plax.jit(lambda x: L.eigh(x).eigenvalues)(a)
    _close(w, np.linalg.eigvalsh(a), F32)
    _close(plax.vmap(L.svdvals)(a), np.linalg.svd(a, compute_uv=False), F32)
    _close(plax.vmap(lambda x: L.qr(x).R.diagonal() ** 2)(a),
           np.abs(np.diagonal(np.linalg.qr(a)[1], axis1=-2, axis2=-1)) ** 2, F32)


def test_qr_raw_under_vmap_and_lax_geqrf():
    a = rand((3, 5, 4))
    h, tau = plax.vmap(lambda m: L.qr(m, mode="raw"))(a)
    for i in range(3):
        wh, wtau = np.linalg.qr(a[i], mode="raw")
        np.testing.assert_allclose(np.asarray(h[i]), wh, **linalg_tol(F32))
        np.testing.assert_allclose(np.asarray(tau[i]), wtau, **linalg_tol(F32))
    factors, taus = plax.lax.linalg.geqrf(a)
    assert factors.shape == (3, 5, 4) and taus.shape == (3, 4)
    np.testing.assert_allclose(np.asarray(factors), np.swapaxes(np.asarray(h), -1, -2),
                               **linalg_tol(F32))
    with pytest.raises(NotImplementedError, match="geqrf is not differentiable"):
        plax.grad(lambda m: plax.lax.linalg.geqrf(m)[1].sum())(a[0])
