"""plax.scipy.linalg's Schur-based functions (schur, rsf2csf, hessenberg, sqrtm, funm,
solve_sylvester), expm_frechet and qr_multiply against scipy.linalg: values, batches, jit
and vmap, derivatives where JAX's are differentiable (and the errors where they are not),
and the errors for bad input."""
import numpy as np
import pytest
import scipy.linalg as sla

import plax
import plax.numpy as jnp
import plax.scipy.linalg as sl
from plax.test_util import check_grads

from helpers import C64, F32, grad_check_defaults, rand, spd

F64, C128 = np.dtype(np.float64), np.dtype(np.complex128)


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if np.dtype(dtype) in (F32, C64) else \
        dict(rtol=1e-9, atol=1e-9)


def _complex_eigen_matrix(n=5, seed=0):
    """A real matrix with complex-conjugate eigenvalue pairs and no negative real one (so
    its principal square root is the one SciPy's real-arithmetic sqrtm picks too)."""
    for s in range(seed, seed + 50):
        a = np.random.default_rng(s).standard_normal((n, n))
        w = np.linalg.eigvals(a)
        if np.any(np.abs(w.imag) > 0.1) and np.all((w.real > 0.05) | (np.abs(w.imag) > 0.1)):
            return a
    raise AssertionError("no such matrix among the seeds")


# --- schur and rsf2csf --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64])
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur_reconstructs_the_matrix(dtype, output):
    with plax.enable_x64(dtype == F64):
        a = rand((2, 4, 4), dtype, seed=1)
        t, z = sl.schur(a, output=output)
        want_dtype = np.result_type(dtype, np.complex64) if output == "complex" else dtype
        assert t.dtype == z.dtype == want_dtype and t.shape == (2, 4, 4)
        t, z = np.asarray(t), np.asarray(z)
        np.testing.assert_allclose(z @ t @ np.conj(np.swapaxes(z, -1, -2)), a, **_tol(dtype))
        if output == "complex" or np.iscomplexobj(a):
            assert np.all(np.tril(t, -1) == 0)


def test_schur_matches_scipy_and_rsf2csf_triangularises():
    with plax.enable_x64():
        a = _complex_eigen_matrix()
        t, z = sl.schur(a)
        t_ref, z_ref = sla.schur(a)
        np.testing.assert_allclose(t, t_ref, rtol=1e-10, atol=1e-10)
        ct, cz = sl.rsf2csf(t, z)
        ct_ref, cz_ref = sla.rsf2csf(t_ref, z_ref)
        assert ct.dtype == C128 and np.all(np.tril(np.asarray(ct), -1) == 0)
        np.testing.assert_allclose(ct, ct_ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(cz, cz_ref, rtol=1e-10, atol=1e-10)
        # batches (T batched, Z broadcast), jit
        bt, bz = plax.jit(sl.rsf2csf)(np.stack([t, t]), z)
        np.testing.assert_allclose(bt[1], ct_ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("call, error, match", [
    (lambda: sl.schur(np.eye(3, dtype=F32), output="x"), ValueError,
     "Expected 'output' to be either 'real' or 'complex'"),
    (lambda: sl.rsf2csf(np.ones((3, 2), F32), np.eye(3, dtype=F32)), ValueError,
     "Input 'T' must be square"),
    (lambda: sl.rsf2csf(np.eye(3, dtype=F32), np.eye(2, dtype=F32)), ValueError,
     "Input array shapes must match"),
    (lambda: sl.hessenberg(np.ones((3, 2), F32)), ValueError, "must be a square matrix"),
    (lambda: sl.sqrtm(np.eye(3, dtype=F32), blocksize=2), NotImplementedError,
     "Blocked version is not implemented"),
    (lambda: sl.funm(np.ones((3, 2), F32), jnp.exp), ValueError,
     "expected square array_like input"),
    (lambda: sl.solve_sylvester(np.eye(3), np.eye(2), np.ones((2, 3))), ValueError,
     "Incompatible shapes for Sylvester equation"),
    (lambda: sl.solve_sylvester(np.eye(2), np.eye(2), np.eye(2), method="qr"), ValueError,
     "Unrecognized method qr"),
    (lambda: sl.expm_frechet(np.eye(3), np.eye(2)), ValueError,
     "expected A and E to be the same shape"),
    (lambda: sl.qr_multiply(np.ones((4, 3)), np.ones((2, 3))), ValueError,
     "not compatible for c @ Q"),
    (lambda: sl.qr_multiply(np.ones((4, 3)), np.ones((4, 2)), mode="left"), ValueError,
     "not compatible for Q @ c"),
    (lambda: sl.qr_multiply(np.ones((4, 3)), np.ones((2, 4)), mode="up"), ValueError,
     "mode must be 'right' or 'left'"),
])
def test_bad_input_is_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- hessenberg ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F64, C128])
def test_hessenberg_matches_scipy(dtype):
    with plax.enable_x64():
        a = rand((5, 5), dtype, seed=2)
        np.testing.assert_allclose(sl.hessenberg(a), sla.hessenberg(a), rtol=1e-10, atol=1e-10)
        h, q = sl.hessenberg(a, calc_q=True)
        h_ref, q_ref = sla.hessenberg(a, calc_q=True)
        np.testing.assert_allclose(q, q_ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(np.asarray(q) @ np.asarray(h) @ np.conj(np.asarray(q).T), a,
                                   rtol=1e-10, atol=1e-10)
        batch = plax.vmap(lambda m: sl.hessenberg(m, calc_q=True))(np.stack([a, 2 * a]))
        np.testing.assert_allclose(batch[0][1], sla.hessenberg(2 * a), rtol=1e-10, atol=1e-10)
        h0, q0 = sl.hessenberg(np.zeros((0, 0), dtype), calc_q=True)
        assert h0.shape == q0.shape == (0, 0)


# --- sqrtm and funm -----------------------------------------------------------------------------
@pytest.mark.parametrize("name, a", [
    ("spd", spd((4, 4), F64, seed=3)),
    ("complex eigenvalues", _complex_eigen_matrix(seed=4)),
    ("upper triangular", np.triu(np.arange(1.0, 17.0).reshape(4, 4))),
    ("zero", np.zeros((3, 3))),
    ("complex", rand((3, 3), C128, seed=5)),
])
def test_sqrtm_matches_scipy(name, a):
    with plax.enable_x64():
        root = sl.sqrtm(a)
        assert root.dtype == C128
        np.testing.assert_allclose(np.asarray(root) @ np.asarray(root), a, rtol=1e-9,
                                   atol=1e-9)
        np.testing.assert_allclose(root, sla.sqrtm(a), rtol=1e-8, atol=1e-8)


def test_sqrtm_single_precision_batches_jit_and_no_derivative():
    a = spd((2, 3, 3), F32, seed=6)
    root = plax.jit(sl.sqrtm)(a)
    assert root.dtype == C64 and root.shape == (2, 3, 3)
    np.testing.assert_allclose(root[1], sla.sqrtm(a[1].astype(F64)), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(sl.sqrtm(np.eye(3, dtype=np.int32)), np.eye(3), atol=1e-6)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'schur'"):
        plax.grad(lambda a: sl.sqrtm(a).real.sum())(a[0])


@pytest.mark.parametrize("func, ref", [
    (jnp.exp, sla.expm), (jnp.sin, sla.sinm), (jnp.cos, sla.cosm),
    (lambda w: w ** 3 + 2 * w, lambda a: a @ a @ a + 2 * a),
])
def test_funm_matches_closed_forms(func, ref):
    with plax.enable_x64():
        a = _complex_eigen_matrix(seed=7) / 2
        got = sl.funm(a, func)
        assert got.dtype == C128
        np.testing.assert_allclose(got, ref(a), rtol=1e-9, atol=1e-9)


def test_funm_error_estimate_batches_and_repeated_eigenvalues():
    with plax.enable_x64():
        a = _complex_eigen_matrix(seed=8) / 2
        f, err = sl.funm(a, jnp.sin, disp=False)
        f_ref, err_ref = sla.funm(a, np.sin, disp=False)
        np.testing.assert_allclose(f, f_ref, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(err, err_ref, rtol=1e-6)
        batch = plax.vmap(lambda m: sl.funm(m, jnp.exp))(np.stack([a, a.T]))
        np.testing.assert_allclose(batch[1], sla.expm(a.T), rtol=1e-9, atol=1e-9)
        # a repeated eigenvalue in a Jordan block: Parlett's recurrence would divide by zero;
        # like SciPy's (and JAX's) the numerator is kept, and the error estimate says 1
        jordan = np.array([[2.0, 1.0], [0.0, 2.0]])
        f, err = sl.funm(jordan, jnp.exp, disp=False)
        f_ref, err_ref = sla.funm(jordan, np.exp, disp=False)
        np.testing.assert_allclose(f, f_ref, rtol=1e-12)
        assert float(err) == err_ref == 1


# --- solve_sylvester ----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["schur", "eigen"])
@pytest.mark.parametrize("dtype", [F64, C128])
def test_solve_sylvester_matches_scipy(method, dtype):
    with plax.enable_x64():
        a = rand((4, 4), dtype, seed=9) + 3 * np.eye(4)
        b = rand((3, 3), dtype, seed=10) + 3 * np.eye(3)
        c = rand((4, 3), dtype, seed=11)
        x = sl.solve_sylvester(a, b, c, method=method)
        assert x.dtype == dtype and x.shape == (4, 3)
        np.testing.assert_allclose(x, sla.solve_sylvester(a, b, c), rtol=1e-9, atol=1e-9)


def test_solve_sylvester_batches_single_precision_and_singular_cases():
    a = rand((2, 3, 3), F32, seed=12) + 3 * np.eye(3, dtype=F32)
    b = rand((2, 2), F32, seed=13) + 3 * np.eye(2, dtype=F32)
    c = rand((2, 3, 2), F32, seed=14)
    x = plax.jit(sl.solve_sylvester)(a, b, c)  # b broadcast against the batch
    assert x.dtype == F32 and x.shape == (2, 3, 2)
    np.testing.assert_allclose(x[1], sla.solve_sylvester(a[1], b, c[1]), rtol=2e-4, atol=2e-4)
    vm = plax.vmap(sl.solve_sylvester, in_axes=(0, None, 0))(a, b, c)
    np.testing.assert_allclose(vm, x, rtol=1e-5, atol=1e-5)
    # an eigenvalue of A is minus one of B: no unique solution, NaN as in JAX
    assert np.isnan(np.asarray(sl.solve_sylvester(np.eye(2), -np.eye(2), np.eye(2)))).all()
    ints = sl.solve_sylvester(np.eye(3, dtype=np.int32), np.eye(2, dtype=np.int32),
                              np.ones((3, 2), np.int32))
    assert ints.dtype == F32
    np.testing.assert_allclose(ints, np.full((3, 2), 0.5), rtol=1e-6)


@pytest.mark.parametrize("method", ["schur", "eigen"])
def test_solve_sylvester_is_differentiable_in_every_operand(method):
    with plax.enable_x64():
        a = rand((3, 3), F64, seed=15) + 3 * np.eye(3)
        b = rand((2, 2), F64, seed=16) + 3 * np.eye(2)
        c = rand((3, 2), F64, seed=17)
        check_grads(lambda a, b, c: sl.solve_sylvester(a, b, c, method=method), (a, b, c), 1,
                    modes=["fwd", "rev"], **grad_check_defaults(F64))


# --- expm_frechet -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64])
def test_expm_frechet_matches_scipy(dtype):
    with plax.enable_x64(dtype == F64):
        a = rand((2, 4, 4), dtype, seed=18) / 2
        e = rand((2, 4, 4), dtype, seed=19)
        expm_a, frechet = sl.expm_frechet(a, e)
        assert expm_a.dtype == frechet.dtype == dtype
        for i in range(2):
            ref_expm, ref_frechet = sla.expm_frechet(a[i].astype(F64), e[i].astype(F64))
            np.testing.assert_allclose(expm_a[i], ref_expm, **_tol(dtype))
            np.testing.assert_allclose(frechet[i], ref_frechet, **_tol(dtype))
        alone = sl.expm_frechet(a, e, compute_expm=False)
        np.testing.assert_allclose(alone, frechet, rtol=1e-6, atol=1e-6)


def test_expm_frechet_is_differentiable():
    with plax.enable_x64():
        a = rand((3, 3), F64, seed=20) / 3
        e = rand((3, 3), F64, seed=21)
        # forward mode only: reverse mode of this second derivative of expm (a switch over
        # Padé degrees) takes ~15 s to trace and compile; fwd checks the same derivative
        check_grads(lambda a, e: sl.expm_frechet(a, e, compute_expm=False), (a, e), 1,
                    modes=["fwd"], **grad_check_defaults(F64))


# --- qr_multiply --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
@pytest.mark.parametrize("mode", ["left", "right"])
@pytest.mark.parametrize("conjugate, pivoting", [(False, False), (True, False), (False, True)])
def test_qr_multiply_matches_scipy(shape, mode, conjugate, pivoting):
    with plax.enable_x64():
        a = rand(shape, C128, seed=22)
        m, k = shape[0], min(shape)
        c = rand((k, 2) if mode == "left" else (2, m), C128, seed=23)
        got = sl.qr_multiply(a, c, mode=mode, conjugate=conjugate, pivoting=pivoting)
        want = sla.qr_multiply(a, c, mode=mode, conjugate=conjugate, pivoting=pivoting)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


def test_qr_multiply_vectors_batches_and_derivative_in_c():
    with plax.enable_x64():
        a = rand((4, 3), F64, seed=24)
        v = rand((4,), F64, seed=25)
        got, r = sl.qr_multiply(a, v)
        want, r_ref = sla.qr_multiply(a, v)
        assert got.shape == (3,)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(r, r_ref, rtol=1e-10, atol=1e-10)
        c = rand((2, 2, 4), F64, seed=26)
        batch = plax.vmap(lambda c: sl.qr_multiply(a, c)[0])(c)
        np.testing.assert_allclose(batch[1], sla.qr_multiply(a, c[1])[0], rtol=1e-10,
                                   atol=1e-10)
        check_grads(lambda c: sl.qr_multiply(a, c)[0], (c[0],), 1, modes=["fwd", "rev"],
                    **grad_check_defaults(F64))
