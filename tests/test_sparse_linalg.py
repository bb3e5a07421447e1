"""plax.experimental.sparse.linalg: lobpcg_standard against numpy.linalg.eigh, spsolve
against numpy.linalg.solve, with jit, vmap, gradients and JAX's errors."""
import numpy as np
import pytest
import scipy.sparse

import plax
import plax.numpy as jnp
from plax.experimental import sparse
from plax.experimental.sparse import linalg as splinalg
from plax.test_util import check_grads
from helpers import grad_check_defaults  # tests/ is on sys.path (conftest.py)


def symmetric(n, eigenvalues, seed=0):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, n)))
    return ((q * eigenvalues) @ q.T).astype(np.float32)


def check_top_eigenpairs(A, theta, U, k, atol):
    w, _ = np.linalg.eigh(A.astype(np.float64))
    np.testing.assert_allclose(theta, w[::-1][:k], atol=atol)
    U = np.asarray(U, np.float64)
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-3)  # orthonormal
    resid = A @ U - U * np.asarray(theta)
    assert np.abs(resid).max() < 50 * atol


@pytest.mark.parametrize("as_callable", [False, True])
def test_lobpcg_top_eigenpairs_match_eigh(as_callable):
    n, k = 50, 3
    A = symmetric(n, np.linspace(1, 10, n))
    X = np.random.default_rng(1).normal(size=(n, k)).astype(np.float32)
    op = (lambda x: jnp.asarray(A) @ x) if as_callable else A
    theta, U, i = splinalg.lobpcg_standard(op, X)
    assert theta.shape == (k,) and U.shape == (n, k) and theta.dtype == np.float32
    assert 0 < int(i) <= 100
    check_top_eigenpairs(A, theta, U, k, atol=1e-4)


def test_lobpcg_under_jit_with_mixed_signs_and_max_iterations():
    n, k = 40, 2
    A = symmetric(n, np.concatenate([[-9.0, -8.0], np.linspace(-1, 5, n - 2)]), seed=2)
    X = np.random.default_rng(3).normal(size=(n, k)).astype(np.float32)
    theta, U, i = plax.jit(splinalg.lobpcg_standard)(A, X)
    check_top_eigenpairs(A, theta, U, k, atol=1e-3)
    # m caps the iterations; at least one runs even when the tolerance is loose.
    _, _, i = splinalg.lobpcg_standard(A, X, m=3)
    assert int(i) == 3
    _, _, i = splinalg.lobpcg_standard(A, X, tol=10.0)
    assert int(i) == 1


@pytest.mark.parametrize("A,X,match", [
    (np.ones((5, 5), np.float32), np.ones((5, 2), np.float32),
     r"expected search dim \* 5 < matrix dim \(got 10, 5\)"),
    (np.ones((20, 20), np.float32), np.ones((20,), np.float32), "X must be an"),
    (np.ones((20, 19), np.float32), np.ones((20, 2), np.float32), r"A must be \(20, 20\)"),
    (lambda x: x.astype(np.float16), np.ones((20, 2), np.float32),
     r"A, X must have same dtypes \(were float16, float32\)"),
    (lambda x: x[:10], np.ones((20, 2), np.float32), r"A must be \(20, 20\) matrix A"),
    (np.ones((20, 20), np.int32), np.ones((20, 2), np.int32), "not inexact"),
    (np.ones((20, 20), np.float32), np.ones((20, 0), np.float32), "search dim > 0"),
])
def test_lobpcg_errors(A, X, match):
    with pytest.raises(ValueError, match=match):
        splinalg.lobpcg_standard(A, X)


def _system(n=6, seed=4):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n)).astype(np.float32)
    A[np.abs(A) < 0.7] = 0
    A += np.float32(n) * np.eye(n, dtype=np.float32)  # nonsingular, diagonally dominant
    b = rng.normal(size=n).astype(np.float32)
    return A, b, scipy.sparse.csr_matrix(A)


def _bufs(csr):
    return (jnp.asarray(csr.data), jnp.asarray(csr.indices.astype(np.int32)),
            jnp.asarray(csr.indptr.astype(np.int32)))


def test_spsolve_matches_dense_solve_eager_and_jit():
    A, b, csr = _system()
    data, indices, indptr = _bufs(csr)
    expected = np.linalg.solve(A.astype(np.float64), b)
    x = splinalg.spsolve(data, indices, indptr, b)
    assert x.dtype == np.float32 and x.shape == b.shape
    np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plax.jit(splinalg.spsolve)(data, indices, indptr, b), expected,
                               rtol=1e-5, atol=1e-6)
    assert "spsolve[reorder=1 tol=1e-06]" in str(
        plax.make_jaxpr(splinalg.spsolve)(data, indices, indptr, b))
    # The CSR buffers of a fromdense'd matrix, padding included, work too.
    s = sparse.CSR.fromdense(A, nse=csr.nnz + 3)
    np.testing.assert_allclose(splinalg.spsolve(s.data, s.indices, s.indptr, b), expected,
                               rtol=1e-5, atol=1e-6)


def test_spsolve_gradients():
    A, b, csr = _system(n=5, seed=5)
    data, indices, indptr = _bufs(csr)
    f = lambda d, rhs: splinalg.spsolve(d, indices, indptr, rhs)  # noqa: E731
    check_grads(f, (data, jnp.asarray(b)), order=1, modes=("fwd", "rev"),
                **grad_check_defaults(np.float32))
    # d/db sum(A^-1 b) = A^-T 1, in closed form.
    g = plax.grad(lambda rhs: f(data, rhs).sum())(b)
    np.testing.assert_allclose(g, np.linalg.solve(A.T.astype(np.float64), np.ones(5)),
                               rtol=1e-5, atol=1e-6)


def test_spsolve_vmap_solves_each():
    A, b, csr = _system(n=4, seed=6)
    data, indices, indptr = _bufs(csr)
    bs = np.stack([b, 2 * b, -b])
    out = plax.vmap(splinalg.spsolve, in_axes=(None, None, None, 0))(data, indices, indptr, bs)
    np.testing.assert_allclose(out, np.linalg.solve(A.astype(np.float64), bs.T).T, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("case,match", [
    ("short_b", "Invalid CSR buffer sizes"),
    ("int_b", "data types do not match"),
    ("matrix_b", "Arrays must be one-dimensional"),
])
def test_spsolve_errors(case, match):
    A, b, csr = _system(n=4, seed=7)
    data, indices, indptr = _bufs(csr)
    rhs = {"short_b": b[:3], "int_b": b.astype(np.int32),
           "matrix_b": np.ones((4, 2), np.float32)}[case]
    with pytest.raises(ValueError, match=match):
        splinalg.spsolve(data, indices, indptr, rhs)


def test_linalg_is_an_attribute_of_the_sparse_package_in_a_fresh_process():
    # as in JAX, `import jax.experimental.sparse as jesp; jesp.linalg.lobpcg_standard` (ott-jax)
    import subprocess
    import sys
    code = ("import plax.experimental.sparse as jesp\n"
            "print(jesp.linalg.lobpcg_standard.__name__, jesp.coo.COO.__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["lobpcg_standard", "COO"], out.stderr


def test_lobpcg_under_strict_rank_and_dtype_promotion():
    # JAX's own lobpcg tests run with both strict: the solver keeps its ranks explicit
    a = np.diag(np.arange(1.0, 101.0)).astype(np.float32)
    x = np.random.default_rng(0).normal(size=(100, 10)).astype(np.float32)
    want = splinalg.lobpcg_standard(a, x, m=20)[0]
    with plax.numpy_rank_promotion("raise"), plax.numpy_dtype_promotion("strict"):
        got = splinalg.lobpcg_standard(a, x, m=20)[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.arange(100.0, 90.0, -1), rtol=1e-4)


def test_lobpcg_debug_runs_every_iteration_with_diagnostics():
    # (JAX's private entry points, which its tests use): with debug, all m iterations run
    # and each diagnostic is stacked over them
    rng = np.random.default_rng(3)
    A = np.diag(np.arange(1.0, 41.0)).astype(np.float32)
    X = rng.standard_normal((40, 3)).astype(np.float32)
    theta, U, i, info = splinalg._lobpcg_standard_matrix(A, X, 12, tol=0.0, debug=True)
    assert int(i) == 12 and np.asarray(info["lambda history"]).shape == (12, 3)
    np.testing.assert_allclose(theta, [40, 39, 38], rtol=1e-4)
    np.testing.assert_allclose(info["lambda history"][-1], theta)
    assert not np.asarray(info["X zeros"]).any()
    for key in ("residual history", "P zeros", "basis rank", "converged", "X orth", "P orth",
                "P.X", "adjusted residual max", "adjusted residual p50", "adjusted residual min"):
        assert np.asarray(info[key]).shape[0] == 12
    theta2, *_ = splinalg._lobpcg_standard_callable(lambda v: A @ v, X, 12, None)
    np.testing.assert_allclose(theta2, theta, rtol=1e-4)
