"""lax.linalg's reductions and the rest of its names: schur (gees), hessenberg (gehrd),
tridiagonal (sytrd/hetrd), ormqr_p (ormqr/unmqr), cholesky_update, symmetric_product,
lu_pivots_to_permutation_p, qdwh and the implementation enums. Values against NumPy/SciPy
and closed forms, batches, jit and vmap, JAX's errors (and JAX's lack of derivatives where
it has none)."""
import numpy as np
import pytest
import scipy.linalg as sla

import plax
from plax import lax
from plax.test_util import check_grads

from helpers import C64, F32, grad_check_defaults, rand, spd, x64_for

L = lax.linalg
F64, C128 = np.dtype(np.float64), np.dtype(np.complex128)
DTYPES = [F32, F64, C64, C128]


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if np.dtype(dtype) in (F32, C64) else \
        dict(rtol=1e-10, atol=1e-10)


def _sorted(w):
    """Eigenvalues in a rounding-proof order (real part to 3 places, then imaginary)."""
    return w[np.lexsort((w.imag, np.round(w.real, 3)))]


def _adjoint(x):
    return np.conj(np.swapaxes(x, -1, -2))


# --- schur ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_schur_reconstructs_with_a_unitary_z_and_a_triangular_t(dtype):
    with x64_for(dtype):
        a = rand((2, 5, 5), dtype, seed=1)
        t, z = L.schur(a)
        assert t.dtype == z.dtype == dtype and t.shape == z.shape == (2, 5, 5)
        t, z = np.asarray(t), np.asarray(z)
        np.testing.assert_allclose(z @ t @ _adjoint(z), a, **_tol(dtype))
        np.testing.assert_allclose(_adjoint(z) @ z, np.broadcast_to(np.eye(5), (2, 5, 5)),
                                   **_tol(dtype))
        # complex: triangular; real: quasi-triangular (2 x 2 blocks on the diagonal)
        below = -1 if np.iscomplexobj(a) else -2
        assert np.all(np.tril(t, below) == 0)
        eig = _sorted(np.linalg.eigvals(a[0].astype(np.complex128)))
        np.testing.assert_allclose(_sorted(np.linalg.eigvals(t[0])), eig, **_tol(dtype))


def test_schur_matches_scipy_and_runs_under_jit_and_vmap():
    with plax.enable_x64():
        a = rand((4, 4), F64, seed=2)
        t, z = L.schur(a)
        t_ref, z_ref = sla.schur(a)  # the same LAPACK routine: the same form
        np.testing.assert_allclose(t, t_ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(np.abs(np.asarray(z)), np.abs(z_ref), rtol=1e-10,
                                   atol=1e-10)
        (t_only,) = L.schur(a, compute_schur_vectors=False)
        np.testing.assert_allclose(t_only, t_ref, rtol=1e-10, atol=1e-10)
        jitted = plax.jit(L.schur)(a)
        np.testing.assert_allclose(jitted[0], t_ref, rtol=1e-10, atol=1e-10)
        batch = np.stack([a, 2 * a])
        vt, vz = plax.vmap(L.schur)(batch)
        np.testing.assert_allclose(vt[1], sla.schur(2 * a)[0], rtol=1e-10, atol=1e-10)


def test_schur_of_empty_matrices_and_nan_input():
    t, z = L.schur(np.zeros((3, 0, 0), F32))
    assert t.shape == z.shape == (3, 0, 0)
    t, _ = L.schur(np.full((3, 3), np.nan, F32))
    assert np.isnan(np.asarray(t)).all()


@pytest.mark.parametrize("call, error, match", [
    (lambda: L.schur(np.ones((3, 2), F32)), ValueError, "must be a square matrix"),
    (lambda: L.schur(np.ones((3, 3), np.int32)), TypeError, "floating-point or complex"),
    (lambda: L.schur(np.eye(3, dtype=F32), sort_eig_vals=True), NotImplementedError,
     "sort feature of LAPACK's gees"),
    (lambda: L.hessenberg(np.ones((3, 2), F32)), ValueError,
     r"Hessenberg reduction must have shape \[..., n, n\]"),
    (lambda: L.tridiagonal(np.ones((0, 0), F32)), ValueError, "must be a square matrix"),
    (lambda: L.tridiagonal(np.ones((3, 2), F32)), ValueError, "must be a square matrix"),
])
def test_reductions_refuse_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("fn, name", [
    (lambda a: L.schur(a)[0], "schur"),
    (lambda a: L.hessenberg(a)[0], "hessenberg"),
    (lambda a: L.tridiagonal(a)[1], "tridiagonal"),
])
def test_reductions_have_no_derivative_as_in_jax(fn, name):
    a = rand((3, 3), F32)
    with pytest.raises(NotImplementedError, match=f"Differentiation rule for '{name}'"):
        plax.grad(lambda a: fn(a).real.sum())(a)


# --- hessenberg -------------------------------------------------------------------------------
def _householder_q(packed, taus, offset):
    """Q = H_1 ... H_k from reflectors stored below diagonal ``offset`` (-1: hessenberg)."""
    n = packed.shape[-1]
    q = np.eye(n, dtype=np.result_type(packed.dtype, np.float64))
    for i, tau in enumerate(taus):
        v = np.zeros(n, q.dtype)
        v[i - offset] = 1
        v[i - offset + 1:] = packed[i - offset + 1:, i]
        q = q @ (np.eye(n) - tau * np.outer(v, v.conj()))
    return q


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessenberg_packs_h_and_its_reflectors(dtype):
    with x64_for(dtype):
        a = rand((2, 5, 5), dtype, seed=3)
        packed, taus = L.hessenberg(a)
        assert packed.shape == (2, 5, 5) and taus.shape == (2, 4) and taus.dtype == dtype
        for i in range(2):
            h = np.triu(np.asarray(packed[i]), -1)
            q = _householder_q(np.asarray(packed[i]), np.asarray(taus[i]), -1)
            np.testing.assert_allclose(q @ h @ q.conj().T, a[i], **_tol(dtype))
        with plax.enable_x64(dtype in (F64, C128)):
            h_ref = sla.hessenberg(a[0])
        np.testing.assert_allclose(np.triu(np.asarray(packed[0]), -1), h_ref, **_tol(dtype))


def test_hessenberg_under_vmap_and_jit_and_small_sizes():
    a = rand((3, 4, 4), F32, seed=4)
    packed, taus = plax.vmap(plax.jit(L.hessenberg))(a)
    direct = L.hessenberg(a)
    np.testing.assert_allclose(packed, direct[0], rtol=1e-6, atol=1e-6)
    one, t1 = L.hessenberg(np.full((1, 1), 2.0, F32))
    assert one.shape == (1, 1) and t1.shape == (0,) and float(one[0, 0]) == 2.0


# --- tridiagonal ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_keeps_the_spectrum(dtype, lower):
    with x64_for(dtype):
        x = rand((2, 5, 5), dtype, seed=5)
        a = (x + _adjoint(x)).astype(dtype)
        packed, d, e, taus = L.tridiagonal(a, lower=lower)
        real = np.finfo(dtype).dtype
        assert d.dtype == e.dtype == real and taus.dtype == dtype
        assert d.shape == (2, 5) and e.shape == (2, 4) and taus.shape == (2, 4)
        for i in range(2):
            t = np.diag(d[i]) + np.diag(e[i], 1) + np.diag(e[i], -1)
            np.testing.assert_allclose(np.linalg.eigvalsh(t), np.linalg.eigvalsh(a[i]),
                                       **_tol(dtype))
        # the packed matrix holds d on its diagonal
        np.testing.assert_allclose(np.real(np.diagonal(np.asarray(packed), 0, -2, -1)), d,
                                   **_tol(dtype))


def test_tridiagonal_with_lower_reflectors_rebuilds_the_matrix():
    with plax.enable_x64():
        x = rand((5, 5), F64, seed=6)
        a = x + x.T
        packed, d, e, taus = (np.asarray(v) for v in L.tridiagonal(a))
        q = _householder_q(packed, taus, -1)
        t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
        np.testing.assert_allclose(q @ t @ q.T, a, rtol=1e-10, atol=1e-10)
        got = plax.vmap(lambda m: L.tridiagonal(m)[1])(np.stack([a, a]))
        np.testing.assert_allclose(got[1], d, rtol=1e-12)


# --- ormqr ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [C128])  # real dtypes: tests/lax/test_linalg.py
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("left, transpose", [(True, False), (True, True), (False, False),
                                             (False, True)])
def test_ormqr_matches_the_full_q_and_is_linear_in_c(dtype, shape, left, transpose):
    with plax.enable_x64():
        a = rand(shape, dtype, seed=7)
        packed, taus = L.geqrf(a)
        m = shape[0]
        q = np.linalg.qr(a, mode="complete")[0]
        q = q.conj().T if transpose else q
        c = rand((m, 2) if left else (2, m), dtype, seed=8)
        got = L.ormqr(packed, taus, c, left=left, transpose=transpose)
        np.testing.assert_allclose(got, q @ c if left else c @ q, rtol=1e-10, atol=1e-10)
        if shape == (5, 3):
            fn = lambda c: L.ormqr(packed, taus, c, left=left, transpose=transpose)  # noqa: E731
            check_grads(fn, (c,), 1, modes=["fwd", "rev"], **grad_check_defaults(F64))


def test_ormqr_batches_and_refuses_derivatives_in_the_reflectors():
    a = rand((4, 3), F32, seed=9)
    packed, taus = L.geqrf(a)
    c = rand((2, 4, 2), F32, seed=10)
    got = plax.vmap(L.ormqr, in_axes=(None, None, 0))(packed, taus, c)
    np.testing.assert_allclose(got[1], L.ormqr(packed, taus, c[1]), rtol=1e-6, atol=1e-6)
    assert L.ormqr_p.name == "ormqr"
    with pytest.raises(NotImplementedError, match="ormqr"):
        plax.grad(lambda p: L.ormqr(p, taus, c[0]).sum())(packed)
    with pytest.raises(ValueError, match="same number of columns"):
        L.ormqr(packed, taus, c[0], left=False)


# --- cholesky_update --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64])
def test_cholesky_update_is_the_factor_of_the_updated_matrix(dtype):
    with x64_for(dtype):
        a = spd((4, 4), dtype, seed=11)
        r = np.linalg.cholesky(a).T.astype(dtype)  # upper: a = rᵀ r
        w = rand((4,), dtype, seed=12)
        got = np.asarray(L.cholesky_update(r, w))
        # below the diagonal only rounding remains (as in JAX's: the rotations are not masked)
        assert np.abs(np.tril(got, -1)).max() < 100 * np.finfo(dtype).eps
        want = np.linalg.cholesky(a + np.outer(w, w)).T
        np.testing.assert_allclose(got, want, **_tol(dtype))
        # jit, vmap and a zero update (no rotation: r unchanged)
        batch = plax.vmap(plax.jit(L.cholesky_update))(np.stack([r, r]), np.stack([w, 0 * w]))
        np.testing.assert_allclose(batch[0], want, **_tol(dtype))
        np.testing.assert_allclose(batch[1], r, **_tol(dtype))


def test_cholesky_update_errors():
    r = np.eye(3, dtype=F32)
    with pytest.raises(ValueError, match="takes a square matrix and a vector of the same size"):
        L.cholesky_update(r, np.ones(2, F32))
    with pytest.raises(TypeError, match="cholesky_update does not accept dtype complex64"):
        L.cholesky_update(r.astype(C64), np.ones(3, C64))
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'cholesky_update'"):
        plax.grad(lambda r: L.cholesky_update(r, np.ones(3, F32)).sum())(r)


# --- symmetric_product ------------------------------------------------------------------------
def test_symmetric_product_values_symmetrize_and_derivative():
    with plax.enable_x64():
        a = rand((2, 4, 3), F64, seed=13)
        c = spd((2, 4, 4), F64, seed=14)
        got = L.symmetric_product(a, c, alpha=2.0, beta=-0.5)
        want = 2.0 * a @ np.swapaxes(a, -1, -2) - 0.5 * c
        np.testing.assert_allclose(np.tril(np.asarray(got)), np.tril(want), rtol=1e-12)
        full = L.symmetric_product(a, c, alpha=2.0, beta=-0.5, symmetrize_output=True)
        np.testing.assert_allclose(full, want, rtol=1e-12, atol=1e-12)
        vm = plax.vmap(lambda a, c: L.symmetric_product(a, c, alpha=2.0, beta=-0.5))(a, c)
        np.testing.assert_allclose(vm, got, rtol=1e-12)
        check_grads(lambda a, c: L.symmetric_product(a, c, alpha=1.5, beta=0.5), (a[0], c[0]),
                    2, modes=["fwd", "rev"], **grad_check_defaults(F64))


def test_symmetric_product_errors():
    with pytest.raises(ValueError, match="symmetric_update expects a rectangular matrix"):
        L.symmetric_product(np.ones((3, 2), F32), np.ones((2, 2), F32))
    with pytest.raises(TypeError, match="does not accept dtype complex64"):
        L.symmetric_product(np.ones((2, 2), C64), np.ones((2, 2), C64))


# --- lu_pivots_to_permutation_p ---------------------------------------------------------------
def test_lu_pivots_to_permutation_primitive_batches():
    pivots = np.array([[2, 2, 2], [1, 2, 3]], np.int32)
    want = np.array([[2, 0, 1, 3], [1, 2, 3, 0]], np.int32)
    np.testing.assert_array_equal(L.lu_pivots_to_permutation(pivots, 4), want)
    got = plax.vmap(lambda p: L.lu_pivots_to_permutation(p, 4))(pivots)
    np.testing.assert_array_equal(got, want)
    jaxpr = plax.make_jaxpr(lambda p: L.lu_pivots_to_permutation(p, 4))(pivots[0])
    assert "lu_pivots_to_permutation" in str(jaxpr)
    with pytest.raises(ValueError, match="Output permutation size 2 has to exceed"):
        L.lu_pivots_to_permutation(pivots, 2)


# --- qdwh -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, shape", [(F32, (6, 4)), (F64, (5, 5)), (C64, (5, 3))])
def test_qdwh_is_the_polar_decomposition(dtype, shape):
    with x64_for(dtype):
        x = rand(shape, dtype, seed=15)
        u, h, iters, converged = L.qdwh(x)
        assert u.shape == shape and h.shape == (shape[1],) * 2
        assert bool(converged) and 0 < int(iters) <= 10
        u_ref, h_ref = sla.polar(x.astype(np.complex128 if np.iscomplexobj(x) else F64))
        np.testing.assert_allclose(u, u_ref, **_tol(dtype))
        np.testing.assert_allclose(h, h_ref, **_tol(dtype))


def test_qdwh_counts_like_jax_and_honours_max_iterations_and_padding():
    x = rand((4, 3), F32, seed=0)
    # JAX's iteration count for these inputs (QR steps, Cholesky steps, Halley until settled)
    assert int(L.qdwh(x)[2]) == 4
    ill = np.diag([1.0, 1e-3, 1e-6]).astype(F32)
    _, _, iters, converged = L.qdwh(ill, max_iterations=2)
    assert int(iters) == 2 and not bool(converged)
    padded = np.zeros((6, 5), F32)
    padded[:4, :3] = x
    u_pad, h_pad, _, _ = L.qdwh(padded, dynamic_shape=(4, 3))
    u, h, _, _ = L.qdwh(x)
    np.testing.assert_allclose(np.asarray(u_pad)[:4, :3], u, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(h_pad)[:3, :3], h, rtol=1e-5, atol=1e-5)
    batched = plax.vmap(L.qdwh)(np.stack([x, 2 * x]))
    np.testing.assert_allclose(batched[0][1], u, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="must have M >= N"):
        L.qdwh(x.T)
    with pytest.raises(ValueError, match="one matrix"):
        L.qdwh(np.stack([x, x]))


def test_qdwh_is_differentiable_in_both_modes():
    # JAX's stops with a while loop (no reverse mode); plax's loops are scans
    with plax.enable_x64():
        x = rand((4, 3), F64, seed=16)
        check_grads(lambda x: L.qdwh(x)[0], (x,), 1, modes=["fwd", "rev"],
                    **grad_check_defaults(F64))


# --- the implementation enums and extend's primitives ------------------------------------------
def test_implementation_enums_refuse_what_the_cpu_lacks():
    assert [m.value for m in L.EigImplementation] == ["cusolver", "magma", "lapack"]
    assert [m.value for m in L.EighImplementation] == ["qr", "jacobi", "qdwh"]
    a = spd((3, 3), F32)
    w = L.eig(a, implementation=L.EigImplementation.LAPACK, compute_left_eigenvectors=False,
              compute_right_eigenvectors=False)[0]
    np.testing.assert_allclose(np.sort(np.real(np.asarray(w))), np.linalg.eigvalsh(a),
                               rtol=1e-4)
    _, w = L.eigh(a, implementation=L.EighImplementation.QR)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-4)
    with pytest.raises(ValueError, match="Only the lapack implementation is supported on CPU"):
        L.eig(a, implementation=L.EigImplementation.MAGMA)
    with pytest.raises(NotImplementedError, match="QDWH implementation is only supported on TPU"):
        L.eigh(a, implementation=L.EighImplementation.QDWH)
    with pytest.raises(NotImplementedError, match="Jacobi implementation is not supported on CPU"):
        L.eigh(a, implementation=L.EighImplementation.JACOBI)


def test_extend_names_the_reduction_primitives():
    from plax.extend.core import primitives
    assert primitives.schur_p is L.schur_p
    assert primitives.hessenberg_p is L.hessenberg_p
    assert primitives.tridiagonal_p is L.tridiagonal_p
    jaxpr = plax.make_jaxpr(L.hessenberg)(np.eye(3, dtype=F32))
    assert jaxpr.eqns[0].primitive is primitives.hessenberg_p
