"""plax.scipy.linalg's factorisations and solves against scipy.linalg: Cholesky (one triangle
read, as SciPy), cho_solve, solve_triangular (every trans), lu / lu_factor / lu_solve, solve
(assume_a), qr, svd, eigh, inv, det; batches, derivatives, vmap, jit and the errors for bad
input. expm and the constructed matrices: test_linalg_expm.py."""
import numpy as np
import pytest
import scipy.linalg as sla

import plax
import plax.scipy.linalg as sl
from plax.test_util import check_grads

from helpers import C64, F32, rand, spd, well_conditioned, x64_for, linalg_close as _close

F64 = np.dtype(np.float64)



# --- Cholesky ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_cholesky_and_cho_solve_match_scipy(dtype):
    with x64_for(dtype):
        a = spd((4, 4), dtype)
        b = rand((4, 2), dtype, seed=1)
        for lower in (False, True):
            _close(sl.cholesky(a, lower=lower), sla.cholesky(a, lower=lower), dtype)
            c = sl.cho_factor(a, lower=lower)
            assert isinstance(c, tuple) and c[1] is lower
            _close(sl.cho_solve(c, b), sla.cho_solve(sla.cho_factor(a, lower=lower), b), dtype)
            _close(sl.cho_solve(c, b[:, 0]), np.linalg.solve(a, b[:, 0]), dtype)


def test_cholesky_reads_one_triangle_and_batches():
    a = spd((4, 4))
    skewed = a + np.triu(np.ones((4, 4), F32), 1)
    _close(sl.cholesky(skewed, lower=True), sla.cholesky(skewed, lower=True))
    _close(sl.cholesky(skewed), sla.cholesky(skewed))
    batch = spd((2, 3, 3, 3))
    c = sl.cho_factor(batch, lower=True)
    _close(sl.cho_solve(c, np.ones((2, 3, 3), F32)), np.linalg.solve(batch, np.ones((2, 3, 3, 1)))[..., 0])
    _close(sl.cho_solve(c, np.ones((3, 2), F32)), np.linalg.solve(batch, np.ones((3, 2))))
    assert np.isnan(np.asarray(sl.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]], F32)))).any()


def test_cho_solve_gradient():
    with plax.enable_x64():
        a, b = spd((3, 3), F64), rand((3, 2), F64, seed=1)
        check_grads(lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=True), b), (a, b),
                    order=1, atol=1e-5, rtol=1e-5)
        check_grads(lambda a: sl.cholesky(a), (a,), order=1, atol=1e-5, rtol=1e-5)


# --- triangular and LU solves ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, C64])
def test_solve_triangular_matches_scipy(dtype):
    a = well_conditioned((4, 4), dtype)
    b = rand((4, 3), dtype, seed=1)
    for trans in (0, 1, 2, "N", "T", "C"):
        for lower in (False, True):
            for unit in (False, True):
                want = sla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
                _close(sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit),
                       want, dtype)
    _close(sl.solve_triangular(a, b[:, 0]), sla.solve_triangular(a, b[:, 0]), dtype)
    batch = well_conditioned((2, 4, 4), dtype)
    _close(sl.solve_triangular(batch, b, lower=True),
           np.stack([sla.solve_triangular(m, b, lower=True) for m in batch]), dtype)


def test_solve_triangular_gradient_and_vmap():
    with plax.enable_x64():
        a, b = well_conditioned((3, 3), F64), rand((3, 2), F64, seed=1)
        check_grads(lambda a, b: sl.solve_triangular(a, b, trans=1, lower=True), (a, b), order=2)
    a32, b32 = well_conditioned((4, 3, 3)), rand((4, 3), seed=1)
    _close(plax.vmap(sl.solve_triangular)(a32, b32),
           np.stack([sla.solve_triangular(m, v) for m, v in zip(a32, b32)]))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("dtype", [F32, C64])
def test_lu_matches_scipy(shape, dtype):
    a = rand(shape, dtype)
    p, l, u = sl.lu(a)
    wp, wl, wu = sla.lu(a)
    _close(p, wp, dtype)
    _close(l, wl, dtype)
    _close(u, wu, dtype)
    pl, u2 = sl.lu(a, permute_l=True)
    _close(pl, sla.lu(a, permute_l=True)[0], dtype)
    _close(u2, wu, dtype)


def test_lu_batched_and_lu_factor_solve():
    batch = rand((2, 4, 3))
    p, l, u = sl.lu(batch)
    _close(p @ l @ u, batch)
    a = well_conditioned((4, 4))
    lu, piv = sl.lu_factor(a)
    wlu, wpiv = sla.lu_factor(a)
    _close(lu, wlu)
    assert piv.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(piv), wpiv)
    b = rand((4, 2), seed=1)
    for trans in (0, 1, 2):
        _close(sl.lu_solve((lu, piv), b, trans=trans), sla.lu_solve((wlu, wpiv), b, trans=trans))
        _close(sl.lu_solve((lu, piv), b[:, 0], trans=trans),
               sla.lu_solve((wlu, wpiv), b[:, 0], trans=trans))
    c = (a + 1j * a.T).astype(C64)
    _close(sl.lu_solve(sl.lu_factor(c), b.astype(C64), trans=2),
           sla.lu_solve(sla.lu_factor(c), b, trans=2), C64)
    many = well_conditioned((3, 4, 4))
    _close(sl.lu_solve(sl.lu_factor(many), np.ones((3, 4), F32)),
           np.linalg.solve(many, np.ones((3, 4, 1)))[..., 0])


def test_lu_solve_gradient():
    with plax.enable_x64():
        a, b = well_conditioned((3, 3), F64), rand((3,), F64, seed=1)
        check_grads(lambda a, b: sl.lu_solve(sl.lu_factor(a), b, trans=1), (a, b), order=1)
        check_grads(lambda a: sl.lu(a)[2], (a,), order=1)


@pytest.mark.parametrize("assume_a", ["gen", "sym", "her", "pos"])
def test_solve_matches_scipy(assume_a):
    a, b = spd((4, 4)), rand((4, 2), seed=1)
    for lower in (False, True):
        _close(sl.solve(a, b, assume_a=assume_a, lower=lower),
               sla.solve(a, b, assume_a=assume_a, lower=lower))
    batch = spd((2, 3, 3))
    _close(sl.solve(batch, np.ones((2, 3), F32), assume_a="pos"),
           np.linalg.solve(batch, np.ones((2, 3, 1)))[..., 0])


def test_solve_pos_reads_one_triangle_like_scipy():
    a = spd((3, 3)) + np.triu(np.ones((3, 3), F32), 1)
    b = np.arange(3.0, dtype=F32)
    for lower in (False, True):
        _close(sl.solve(a, b, assume_a="pos", lower=lower),
               sla.solve(a, b, assume_a="pos", lower=lower))


def test_inv_det_qr_svd_eigh():
    a = rand((4, 3))
    sq = well_conditioned((4, 4))
    _close(sl.inv(sq), sla.inv(sq))
    _close(sl.det(sq), sla.det(sq))
    q, r = sl.qr(a)
    assert q.shape == (4, 4) and r.shape == (4, 3)
    _close(q @ r, a)
    q, r = sl.qr(a, mode="economic")
    assert q.shape == (4, 3) and r.shape == (3, 3)
    out = sl.qr(a, mode="r")
    assert isinstance(out, tuple) and len(out) == 1 and out[0].shape == (4, 3)
    q, r, p = sl.qr(a, pivoting=True)
    _close(q @ r, a[:, np.asarray(p)])
    np.testing.assert_array_equal(np.asarray(p), sla.qr(a, pivoting=True)[2])
    r, p = sl.qr(a, mode="r", pivoting=True)
    assert r.shape == (4, 3) and p.shape == (3,)
    u, s, vh = sl.svd(a)
    assert u.shape == (4, 4) and vh.shape == (3, 3)
    _close(s, sla.svd(a, compute_uv=False))
    _close(sl.svd(a, compute_uv=False, lapack_driver="gesvd"), sla.svd(a, compute_uv=False))
    assert sl.svd(a, full_matrices=False)[0].shape == (4, 3)
    h = spd((4, 4))
    w, v = sl.eigh(h)
    _close(w, sla.eigh(h, eigvals_only=True))
    _close(v @ np.diag(np.asarray(w)) @ np.asarray(v).T, h)
    _close(sl.eigh(h, eigvals_only=True, lower=False), sla.eigh(h, eigvals_only=True))


def test_errors():
    with pytest.raises(ValueError, match="Invalid 'trans' value 3"):
        sl.solve_triangular(np.eye(3, dtype=F32), np.ones(3, F32), trans=3)
    with pytest.raises(ValueError, match="core dimension 'n'"):
        sl.solve_triangular(np.eye(3, dtype=F32), np.ones(4, F32))
    with pytest.raises(ValueError, match="core dimension 'n'"):
        sl.cho_solve((np.eye(3, dtype=F32), True), np.ones(4, F32))
    with pytest.raises(ValueError, match="'trans' value must be 0, 1, or 2, got 3"):
        sl.lu_solve(sl.lu_factor(np.eye(3, dtype=F32)), np.ones(3, F32), trans=3)
    with pytest.raises(ValueError, match="Expected assume_a to be one of"):
        sl.solve(np.eye(3, dtype=F32), np.ones(3, F32), assume_a="foo")
    with pytest.raises(ValueError, match="The input to cholesky must be a square matrix"):
        sl.cho_factor(np.ones((4, 3), F32))
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode 'raw'"):
        sl.qr(np.ones((4, 3), F32), mode="raw")
    with pytest.raises(ValueError, match="lapack_driver must be 'gesdd' or 'gesvd'"):
        sl.svd(np.ones((3, 3), F32), lapack_driver="foo")
    with pytest.raises(NotImplementedError, match="Only the b=None case of eigh is implemented"):
        sl.eigh(np.eye(3, dtype=F32), np.eye(3, dtype=F32))
    with pytest.raises(NotImplementedError, match="Only the eigvals=None case"):
        sl.eigh(np.eye(3, dtype=F32), eigvals=(0, 1))
    with pytest.raises(ValueError, match=r"Expected A to be a \(batched\) square matrix"):
        sl.expm(np.ones((2, 3), F32))
    with pytest.raises(ValueError, match="block_diag must have at most 2 dimensions"):
        sl.block_diag(np.ones((2, 2, 2)))
