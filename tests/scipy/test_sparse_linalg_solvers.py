"""plax.scipy.sparse.linalg (cg, bicgstab, gmres) against numpy.linalg.solve and
scipy.sparse.linalg, with JAX 0.10.2's return values, checks and errors: matrices and
matrix-free pytree operators, preconditioners, tol/atol/maxiter/restart, both gmres
methods, jit and vmap, and derivatives through the solve (check_grads)."""
import numpy as np
import pytest
import scipy.sparse.linalg as sla

import plax
import plax.numpy as jnp
from plax.scipy.sparse.linalg import bicgstab, cg, gmres
from plax.core.dtypes import is_weakly_typed
from plax.test_util import check_grads

N = 24
_rng = np.random.default_rng(0)
_G = _rng.normal(size=(N, N))
SPD = (_G @ _G.T / N + np.eye(N)).astype(np.float32)          # for cg
GENERAL = (_G + 0.3 * N * np.eye(N)).astype(np.float32)         # nonsymmetric, well posed
B = _rng.normal(size=N).astype(np.float32)
JACOBI = np.diag(1 / np.diag(GENERAL)).astype(np.float32)       # a preconditioner matrix

SOLVERS = {  # name -> (solve(A, b, **kw), matrix it is given)
    "cg": (cg, SPD), "bicgstab": (bicgstab, GENERAL),
    "gmres_batched": (lambda A, b, **kw: gmres(A, b, solve_method="batched", **kw), GENERAL),
    "gmres_incremental": (lambda A, b, **kw: gmres(A, b, solve_method="incremental", **kw),
                          GENERAL),
}


def _close(x, A, b, rtol=1e-4):
    expected = np.linalg.solve(A.astype(np.float64), np.asarray(b, np.float64))
    np.testing.assert_allclose(np.asarray(x), expected, rtol=rtol,
                               atol=rtol * np.abs(expected).max())


# (gmres's two methods differ only inside a cycle: the operator forms are shared code, so
# the incremental one runs with a matrix and a preconditioner only -- each gmres program
# takes seconds to compile.)
@pytest.mark.parametrize("name, form", [
    (name, form) for name in SOLVERS for form in ["matrix", "function", "preconditioned", "x0"]
    if name != "gmres_incremental" or form in ("matrix", "preconditioned")])
def test_solves_against_numpy(name, form):
    solve, A = SOLVERS[name]
    kw = {"tol": 1e-6}
    operator = jnp.asarray(A)
    if form == "function":
        operator = lambda v: jnp.asarray(A) @ v  # noqa: E731
    elif form == "preconditioned":
        M = JACOBI if A is GENERAL else np.diag(1 / np.diag(A)).astype(np.float32)
        kw["M"] = (lambda v: jnp.asarray(M) @ v) if name == "cg" else jnp.asarray(M)
    elif form == "x0":
        kw["x0"] = jnp.ones(N)
    x, info = solve(operator, jnp.asarray(B), **kw)
    assert x.dtype == np.float32 and x.shape == (N,)
    assert (info is None) == (name in ("cg", "bicgstab"))
    if info is not None:
        assert int(info) == 0 and info.dtype == np.int32
    _close(x, A, B)


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_cg_iterates_match_scipy(steps):
    expected, _ = sla.cg(SPD.astype(np.float64), B.astype(np.float64), maxiter=steps,
                         rtol=0.0, atol=0.0)
    x, _ = cg(jnp.asarray(SPD), jnp.asarray(B), tol=0.0, maxiter=steps)
    np.testing.assert_allclose(np.asarray(x), expected, rtol=1e-4, atol=1e-5)


def test_bicgstab_and_gmres_agree_with_scipy():
    A64, b64 = GENERAL.astype(np.float64), B.astype(np.float64)
    for ours, theirs in [(bicgstab, sla.bicgstab), (gmres, sla.gmres)]:
        expected, status = theirs(A64, b64, rtol=1e-8)
        assert status == 0
        x, _ = ours(jnp.asarray(GENERAL), jnp.asarray(B), tol=1e-7)
        np.testing.assert_allclose(np.asarray(x), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("method", ["batched", "incremental"])
def test_gmres_restart_and_maxiter_bound_the_work(method):
    # One cycle of one step minimizes the residual along b: x = (b.Ab / |Ab|^2) b.
    A = jnp.array([[4.0, 1.0], [1.0, 3.0]])
    b = jnp.array([1.0, 2.0])
    x, info = gmres(A, b, restart=1, maxiter=1, solve_method=method)
    Ab = np.asarray(A) @ np.asarray(b)
    np.testing.assert_allclose(np.asarray(x), (Ab @ np.asarray(b)) / (Ab @ Ab) * np.asarray(b),
                               rtol=1e-6)
    assert int(info) == 0
    # Small cycles, enough of them, still converge.
    x, _ = gmres(jnp.asarray(GENERAL), jnp.asarray(B), restart=4, maxiter=60, tol=1e-6,
                 solve_method=method)
    _close(x, GENERAL, B)


def test_tol_and_atol_stop_the_iteration():
    A, b = jnp.array([[4.0, 1.0], [1.0, 3.0]]), jnp.array([1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(cg(A, b, atol=10.0)[0]), [0.0, 0.0])
    np.testing.assert_allclose(np.asarray(cg(A, b, tol=0.0, maxiter=1)[0]), [0.25, 0.5])


def test_gmres_info_reports_nans():
    A, b = jnp.array([[4.0, 1.0], [1.0, 3.0]]), jnp.array([1.0, 2.0])
    x, info = gmres(A, b, x0=jnp.array([jnp.nan, 0.0]))
    assert int(info) == -1 and np.isnan(np.asarray(x)).any()
    x, info = gmres(A, jnp.zeros(2))
    assert int(info) == 0 and not np.asarray(x).any()


@pytest.mark.parametrize("name", SOLVERS)
def test_pytree_operator(name):
    solve, _ = SOLVERS[name]
    d = np.array([2.0, 3.0, 5.0], np.float32)

    def operator(tree):  # diag(d) on "a", 4 on "b" (the scalar), matrix-free
        return {"a": jnp.asarray(d) * tree["a"], "b": 4.0 * tree["b"]}

    b = {"a": jnp.array([2.0, 3.0, 10.0]), "b": jnp.array(8.0)}
    x, _ = solve(operator, b)
    np.testing.assert_allclose(np.asarray(x["a"]), [1.0, 1.0, 2.0], rtol=1e-5)
    np.testing.assert_allclose(float(x["b"]), 2.0, rtol=1e-5)


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres_batched", "gmres_incremental"])
def test_complex_systems(name):
    solve, _ = SOLVERS[name]
    rng = np.random.default_rng(1)
    G = rng.normal(size=(6, 6)) + 1j * rng.normal(size=(6, 6))
    A = (G @ G.conj().T + 6 * np.eye(6) if name == "cg" else G + 6 * np.eye(6))
    A = A.astype(np.complex64)
    b = (rng.normal(size=6) + 1j * rng.normal(size=6)).astype(np.complex64)
    with plax.numpy_dtype_promotion("strict"):  # no implicit real-complex mix inside
        x, _ = solve(jnp.asarray(A), jnp.asarray(b), tol=1e-6)
    assert x.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(A, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", SOLVERS)
def test_under_jit_and_vmap(name):
    solve, A = SOLVERS[name]
    Ap = jnp.asarray(A)
    bs = np.stack([B, 2 * B, np.roll(B, 3)])
    xs = plax.jit(plax.vmap(lambda b: solve(Ap, b, tol=1e-6)[0]))(jnp.asarray(bs))
    for x, b in zip(xs, bs):
        _close(x, A, b)


@pytest.mark.parametrize("name", ["cg", "gmres_batched"])
def test_vmap_over_the_operator(name):
    solve, A = SOLVERS[name]
    Ap = jnp.asarray(A)
    scales = jnp.array([1.0, 2.0])
    xs = plax.vmap(lambda s: solve(lambda v: s * (Ap @ v), jnp.asarray(B), tol=1e-6)[0])(scales)
    _close(xs[0], A, B)
    _close(xs[1], 2 * A, B)


# (Both gmres methods share the derivative: custom_linear_solve never differentiates the
# solver itself, only solves again.)
@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres_batched"])
def test_derivatives_through_the_solve(name):
    solve, A = SOLVERS[name]
    small = A[:5, :5].astype(np.float64)
    small = small @ small.T + 5 * np.eye(5) if name == "cg" else small + 5 * np.eye(5)
    b = np.linspace(-1.0, 1.0, 5)
    with plax.enable_x64():
        Ap, bp = jnp.asarray(small), jnp.asarray(b)
        check_grads(lambda b: solve(Ap, b, tol=1e-12)[0], (bp,), order=1, modes=("fwd", "rev"),
                    atol=1e-5, rtol=1e-5)
        # with respect to the matrix (kept symmetric for cg)
        sym = (lambda a: (a + a.T) / 2) if name == "cg" else (lambda a: a)
        check_grads(lambda a: solve(sym(a), bp, tol=1e-12)[0], (Ap,), order=1,
                    modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
        # the closed form: d(sum x)/db = A^{-T} 1
        g = plax.grad(lambda b: solve(Ap, b, tol=1e-12)[0].sum())(bp)
        np.testing.assert_allclose(np.asarray(g), np.linalg.solve(small.T, np.ones(5)),
                                   rtol=1e-8)


@pytest.mark.parametrize("call, error, match", [
    (lambda: cg(jnp.ones((2, 3)), jnp.ones(2)), ValueError,
     r"linear operator must be a square matrix, but has shape: \(2, 3\)"),
    (lambda: gmres("A", jnp.ones(2)), TypeError,
     "linear operator must be either a function or ndarray"),
    (lambda: cg(jnp.eye(2), jnp.ones(2), x0=jnp.ones(3)), ValueError,
     r"arrays in x0 and b must have matching shapes: \[\(3,\)\] vs \[\(2,\)\]"),
    (lambda: bicgstab(jnp.eye(2), jnp.ones(2), x0=(jnp.ones(2),)), ValueError,
     "x0 and b must have matching tree structure"),
    (lambda: gmres(jnp.eye(2), jnp.ones(2), solve_method="qr"), ValueError,
     "invalid solve_method qr, must be either 'incremental' or 'batched'"),
    (lambda: cg(jnp.eye(2), jnp.array([1, 2])), TypeError,
     "cg solves for floating-point or complex b, got an array of dtype int32"),
    (lambda: cg(jnp.eye(2), jnp.ones(2), M=jnp.ones((2, 3))), ValueError,
     "preconditioner M must be an n x n matrix"),
    (lambda: gmres(_MatmulOnly(jnp.ones((2, 3))), jnp.ones(2)), ValueError,
     r"linear operator must be a square matrix, but has shape: \(2, 3\)"),
])
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


class _MatmulOnly:
    """A matrix-like operator: only ``shape`` and ``@``."""

    def __init__(self, A):
        self.A, self.shape = A, A.shape

    def __matmul__(self, x):
        return self.A @ x


@pytest.mark.parametrize("name", SOLVERS)
def test_matmul_objects_and_weak_types(name):
    solve, A = SOLVERS[name]
    x, _ = solve(_MatmulOnly(jnp.asarray(A)), B, tol=1e-6)
    _close(x, A, B)
    # a weakly typed b gives a weakly typed solution, as JAX's
    x, _ = solve(lambda v: v, 1.0)
    assert is_weakly_typed(x) and float(x) == 1.0
    assert is_weakly_typed(plax.jit(lambda b: solve(lambda v: v, b)[0])(1.0))
