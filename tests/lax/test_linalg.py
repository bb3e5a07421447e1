"""lax.linalg factorisations and solves on jaxlib's LAPACK kernels: values against
NumPy/SciPy, derivatives against numerical ones, vmap, NaN results where JAX gives them,
and the errors for bad input."""
import numpy as np
import pytest
import scipy.linalg as sl

import plax
from plax import lax
from plax.test_util import check_grads

L = lax.linalg
RNG = np.random.default_rng(0)


def _rand(shape, dtype=np.float64):
    x = RNG.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.normal(size=shape)
    return x.astype(dtype)


def _spd(n, batch=(), dtype=np.float64):
    a = _rand(batch + (n, n), dtype)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if np.dtype(dtype) in (np.float32, np.complex64) else \
        dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_cholesky_matches_numpy(dtype, batch):
    a = _spd(4, batch, dtype).astype(dtype)
    np.testing.assert_allclose(L.cholesky(a), np.linalg.cholesky(a), **_tol(dtype))


def test_cholesky_float64_grads_vmap_and_failure():
    with plax.enable_x64():
        a = _spd(3)
        np.testing.assert_allclose(L.cholesky(a), np.linalg.cholesky(a), **_tol(np.float64))
        check_grads(L.cholesky, (a,), 2)
        check_grads(L.cholesky, (_spd(3, dtype=np.complex128),), 1)
        stacked = np.stack([a, 2 * a])
        np.testing.assert_allclose(plax.vmap(L.cholesky)(stacked), np.linalg.cholesky(stacked),
                                   **_tol(np.float64))
    # Not positive definite: NaN in the factor (lower triangle), zeros above, no exception.
    out = np.asarray(L.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)))
    assert np.isnan(out[np.tril_indices(2)]).all() and out[0, 1] == 0
    assert L.cholesky(np.zeros((0, 0), np.float32)).shape == (0, 0)


@pytest.mark.parametrize("left_side, lower, transpose_a, conjugate_a, unit_diagonal", [
    (True, True, False, False, False), (False, True, True, False, False),
    (True, False, True, True, True), (False, False, False, True, False)])
def test_triangular_solve_matches_scipy_and_differentiates(left_side, lower, transpose_a,
                                                           conjugate_a, unit_diagonal):
    with plax.enable_x64():
        a = _rand((4, 4), np.complex128) + 4 * np.eye(4)
        b = _rand((4, 2) if left_side else (2, 4), np.complex128)
        kw = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
        x = L.triangular_solve(a, b, **kw)
        tri = np.tril(a) if lower else np.triu(a)
        if unit_diagonal:
            np.fill_diagonal(tri, 1)
        op = tri.T if transpose_a else tri
        op = np.conj(op) if conjugate_a else op
        expect = np.linalg.solve(op, b) if left_side else np.linalg.solve(op.T, b.T).T
        np.testing.assert_allclose(x, expect, rtol=1e-10)
        check_grads(lambda a, b: L.triangular_solve(a, b, **kw), (a.real.copy(), b.real.copy()),
                    2)


def test_triangular_solve_vector_batched_and_errors():
    a = np.tril(_rand((2, 3, 3), np.float32)) + 3 * np.eye(3, dtype=np.float32)
    b = _rand((2, 3, 5), np.float32)
    x = plax.vmap(lambda a, b: L.triangular_solve(a, b, left_side=True, lower=True))(a, b)
    np.testing.assert_allclose(x, np.linalg.solve(np.tril(a), b), rtol=1e-4, atol=1e-5)
    v = L.triangular_solve(a[0], b[0, :, 0], left_side=True, lower=True)
    np.testing.assert_allclose(v, np.linalg.solve(np.tril(a[0]), b[0, :, 0]), rtol=1e-4)
    with pytest.raises(TypeError, match="same number of batch dimensions"):
        L.triangular_solve(a[0], b, left_side=True, lower=True)
    with pytest.raises(ValueError, match="Incompatible shapes for arguments to triangular_solve"):
        L.triangular_solve(a[0], np.ones((4, 2), np.float32), left_side=True)
    with pytest.raises(ValueError, match="square"):
        L.triangular_solve(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
def test_lu_reconstructs_and_differentiates(shape):
    with plax.enable_x64():
        a = _rand(shape)
        factors, pivots, perm = (np.asarray(v) for v in L.lu(a))
        m, n = shape[-2:]
        k = min(m, n)
        low = np.tril(factors[..., :, :k], -1) + np.eye(m, k)
        up = np.triu(factors[..., :k, :])
        np.testing.assert_allclose(np.take_along_axis(a, perm[..., None], -2), low @ up,
                                   rtol=1e-10, atol=1e-12)
        if len(shape) == 2:  # the same pivots as SciPy's getrf
            np.testing.assert_array_equal(pivots, sl.lu_factor(a)[1] if m == n else pivots)
        assert pivots.dtype == np.int32 and perm.dtype == np.int32
        check_grads(lambda a: L.lu(a)[0], (a,), 1)


def test_lu_singular_complex_vmap_and_permutation():
    out, pivots, perm = L.lu(np.array([[1.0, 2.0], [2.0, 4.0]], np.float32))
    np.testing.assert_allclose(out, [[2, 4], [0.5, 0]])  # finite, as JAX: U is singular
    np.testing.assert_array_equal(perm, [1, 0])
    c = _rand((3, 3), np.complex64)
    f, _, p = L.lu(c)
    low, up = np.tril(np.asarray(f), -1) + np.eye(3), np.triu(np.asarray(f))
    np.testing.assert_allclose(c[np.asarray(p)], low @ up, rtol=1e-5, atol=1e-5)
    batch = _rand((2, 3, 3), np.float32)
    np.testing.assert_array_equal(plax.vmap(L.lu)(batch)[2], L.lu(batch)[2])
    np.testing.assert_array_equal(L.lu_pivots_to_permutation(np.array([2, 2, 2], np.int32), 4),
                                  [2, 0, 1, 3])
    with pytest.raises(ValueError, match="rank >= 2"):
        L.lu(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="floating-point or complex"):
        L.lu(np.ones((3, 3), np.int32))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 4, 3)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_qr_matches_numpy_and_differentiates(shape, full_matrices):
    with plax.enable_x64():
        a = _rand(shape)
        q, r = L.qr(a, full_matrices=full_matrices)
        qn, rn = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
        assert q.shape == qn.shape and r.shape == rn.shape
        np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-12)
        np.testing.assert_allclose(np.abs(r), np.abs(rn), atol=1e-12)
        check_grads(lambda a: L.qr(a, full_matrices=full_matrices), (a,), 1)


def test_qr_complex_pivoting_empty_and_householder():
    with plax.enable_x64():
        c = _rand((4, 3), np.complex128)
        check_grads(lambda a: L.qr(a, full_matrices=True), (c,), 1)
        for shape in [(5, 3), (3, 5)]:
            a = _rand(shape)
            q, r, p = L.qr(a, pivoting=True, full_matrices=False)
            _, _, p_ref = sl.qr(a, pivoting=True, mode="economic")
            np.testing.assert_array_equal(p, p_ref)
            np.testing.assert_allclose(a[:, np.asarray(p)], np.asarray(q) @ np.asarray(r),
                                       atol=1e-12)
            check_grads(lambda a: L.qr(a, pivoting=True, full_matrices=False)[:2], (a,), 1)
        raw, tau = sl.qr(_rand((4, 3)), mode="raw")[0]
        np.testing.assert_allclose(L.householder_product(raw, tau),
                                   sl.lapack.dorgqr(raw, tau)[0], atol=1e-12)
    q, r = L.qr(np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(q, np.eye(3))
    assert r.shape == (3, 0)
    batch = _rand((2, 3, 3), np.float32)
    np.testing.assert_allclose(plax.vmap(lambda a: L.qr(a)[1])(batch),
                               np.stack([L.qr(m)[1] for m in batch]), atol=1e-5)
    with pytest.raises(TypeError, match="must have rank at least 2"):
        L.qr(np.ones(3, np.float32))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_take_along_matches_numpy_and_differentiates(axis):
    """The gather the factorisations permute rows and columns with (linalg/common.py)."""
    from plax.lax.linalg.common import take_along
    x = _rand((2, 3, 4), np.float32)
    index = np.argsort(RNG.normal(size=x.shape), axis=axis).astype(np.int32)
    out = take_along(plax.numpy.asarray(x), index, axis)
    np.testing.assert_array_equal(np.asarray(out), np.take_along_axis(x, index, axis))
    check_grads(lambda a: take_along(a, index, axis), (x,), 2, eps=1e-2)


def test_tridiagonal_solve():
    with plax.enable_x64():
        m = 5
        dl, d, du = _rand((3, 2, m))
        d = d + 4
        dl[:, 0] = 0
        du[:, -1] = 0
        b = _rand((2, m, 3))
        t = np.stack([np.diag(d[k]) + np.diag(dl[k, 1:], -1) + np.diag(du[k, :-1], 1)
                      for k in range(2)])
        np.testing.assert_allclose(L.tridiagonal_solve(dl, d, du, b), np.linalg.solve(t, b),
                                   rtol=1e-10)
        check_grads(L.tridiagonal_solve, (dl, d, du, b), 1)
        mapped = plax.vmap(L.tridiagonal_solve, (0, 0, 0, None))(dl, d, du, b[0])
        np.testing.assert_allclose(mapped, np.linalg.solve(t, b[0]), rtol=1e-10)
    singular = L.tridiagonal_solve(*np.zeros((3, 2), np.float32), np.ones((2, 1), np.float32))
    assert np.isnan(np.asarray(singular)).all()
    with pytest.raises(TypeError, match="must have rank at least 2"):
        L.tridiagonal_solve(*np.ones((3, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="dl must have shape"):
        L.tridiagonal_solve(np.ones(2, np.float32), *np.ones((2, 3), np.float32),
                            np.ones((3, 1), np.float32))


def test_under_jit_the_kernels_compile_once_per_shape():
    a = _spd(4, (), np.float32).astype(np.float32)
    f = plax.jit(lambda a, b: L.triangular_solve(L.cholesky(a), b, left_side=True, lower=True))
    b = np.ones((4, 1), np.float32)
    np.testing.assert_allclose(f(a, b), np.linalg.solve(np.linalg.cholesky(a), b), rtol=1e-4)
    text = f.lower(a, b).as_text()
    assert "lapack_spotrf_ffi" in text and "lapack_strsm_ffi" in text


@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_solve_each_transpose(trans):
    from plax.lax.linalg.lu import lu_solve
    with plax.enable_x64():
        a = _rand((2, 4, 4), np.complex128)
        b = _rand((2, 4, 3), np.complex128)
        factors, _, perm = L.lu(a)
        op = a if trans == 0 else (np.swapaxes(a, -1, -2) if trans == 1 else
                                   np.conj(np.swapaxes(a, -1, -2)))
        np.testing.assert_allclose(lu_solve(factors, perm, b, trans), np.linalg.solve(op, b),
                                   rtol=1e-10)


@pytest.mark.parametrize("shape, dtype", [((4, 3), np.float32), ((3, 3), np.float64),
                                          ((5, 2), np.complex64)])
@pytest.mark.parametrize("left, transpose", [(True, False), (True, True), (False, False),
                                             (False, True)])
def test_ormqr_multiplies_by_the_full_q(shape, dtype, left, transpose):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(dtype)
    if np.iscomplexobj(a):
        a = a + 1j * rng.standard_normal(shape).astype(a.real.dtype)
    m = shape[0]
    c = rng.standard_normal((m, 2) if left else (2, m)).astype(dtype)
    with plax.enable_x64(dtype == np.float64):
        h, taus = plax.numpy.linalg.qr(a, mode="raw")
        got = plax.lax.linalg.ormqr(h.mT, taus, c, left=left, transpose=transpose)
    q = np.linalg.qr(a, mode="complete")[0]  # LAPACK's geqrf + orgqr: the same Q
    q = q.conj().T if transpose else q
    want = q @ c if left else c @ q
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_ormqr_rejects_a_c_of_the_wrong_size():
    a = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match="c's rows must number 4"):
        plax.lax.linalg.ormqr(a, np.ones(3, np.float32), np.ones((3, 2), np.float32))
