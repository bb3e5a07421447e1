"""plax.scipy.optimize.minimize: BFGS and L-BFGS against scipy.optimize.minimize where JAX's
solvers converge, and against JAX 0.10.2's own results (iterates, counts, statuses, computed
with jax.scipy.optimize.minimize on the same problems), under jit and vmap."""
import numpy as np
import pytest
import scipy.optimize

import plax
import plax.numpy as jnp
from plax.scipy.optimize import OptimizeResults, minimize
from helpers import close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
LBFGS = "l-bfgs-experimental-do-not-rely-on-this"
A = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 1.0]])
B = np.array([1.0, -2.0, 0.5])


def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def quad(x, a, b):
    return 0.5 * x @ a @ x - b @ x


PROBLEMS = {"rosen2": (rosen, [-1.2, 1.0]), "rosen5": (rosen, [0.0] * 5),
            "quad": (quad, [0.0] * 3), "rosen2far": (rosen, [3.0, -2.0])}

# JAX 0.10.2 in float64: (problem, method, nit, nfev, status, x). Its BFGS stops on the 2-D
# Rosenbrock function when a line search's zoom gives up (status 3), far from the minimum,
# and plax follows it there too.
JAX_F64 = [
    ("rosen2", "BFGS", 8, 17, 3, [-0.2778069614751315, 0.043338775200157394]),
    ("rosen5", "BFGS", 36, 50, 0, [0.9999999945520046, 0.999999989949592, 0.9999999883958697,
                                   0.999999971126479, 0.9999999501932214]),
    ("quad", "BFGS", 5, 7, 0, [0.5447073582420373, -1.268246806392983, 0.8804751861669754]),
    ("rosen2far", "BFGS", 27, 39, 3, [2.4538716619935217, 5.989608550800015]),
    ("rosen2", LBFGS, 17, 35, 5, [0.2233641973095693, 0.022606940744656703]),
    ("rosen5", LBFGS, 6, 14, 5, [0.40085993723225954, 0.13158377008209624,
                                 0.017469675387704574, 0.010787504157617764,
                                 -0.0019225040069396804]),
    ("quad", LBFGS, 7, 8, 0, [0.5447075874694651, -1.2682466812540971, 0.8804743243940796]),
    ("rosen2far", LBFGS, 32, 53, 0, [0.9999998358493466, 0.9999996628667628]),
]


def _run(problem, method, dtype, **kw):
    """minimize on ``problem`` under jit (test_stops_like_jax runs it eagerly)."""
    fun, x0 = PROBLEMS[problem]
    args = (jnp.asarray(A, dtype), jnp.asarray(B, dtype)) if fun is quad else ()
    return plax.jit(lambda x0, args: minimize(fun, x0, args, method=method, **kw))(
        jnp.asarray(x0, dtype), args)


@pytest.mark.parametrize("problem,method,nit,nfev,status,x", JAX_F64)
def test_like_jax_float64(problem, method, nit, nfev, status, x):
    with plax.enable_x64():
        r = _run(problem, method, F64)
        assert isinstance(r, OptimizeResults)
        assert (int(r.nit), int(r.nfev), int(r.njev), int(r.status)) == (nit, nfev, nfev, status)
        assert bool(r.success) == (status == 0)
        close(r.x, x, F64, 1e-6, 1e-9)  # (the failed runs amplify rounding)
        fun, _ = PROBLEMS[problem]
        args = (A, B) if fun is quad else ()
        close(r.fun, float(fun(jnp.asarray(r.x), *args)), F64, 1e-12, 1e-15)
        assert (r.hess_inv is None) == (method == LBFGS)


@pytest.mark.parametrize("problem", ["quad", "rosen5"])
def test_converged_like_scipy(problem):
    fun, x0 = PROBLEMS[problem]
    args = (A, B) if fun is quad else ()
    want = scipy.optimize.minimize(lambda x: float(fun(jnp.asarray(x), *args)), np.array(x0),
                                   method="BFGS",
                                   jac=lambda x: np.asarray(plax.grad(fun)(jnp.asarray(x), *args)))
    with plax.enable_x64():
        r = _run(problem, "BFGS", F64)
        close(r.x, want.x, F64, 0, 1e-4)
        assert np.max(np.abs(np.asarray(r.jac))) < 1e-5
        if problem == "quad":  # the estimate approaches the true inverse Hessian
            close(r.hess_inv, np.linalg.inv(A), F64, 0, 1e-2)


def test_float32():
    r = _run("quad", "BFGS", F32)
    assert (int(r.nit), int(r.nfev), int(r.status), bool(r.success)) == (5, 7, 0, True)
    close(r.x, np.linalg.solve(A, B), F32, 0, 1e-5)
    assert [v.dtype for v in (r.x, r.fun, r.jac, r.hess_inv)] == [F32] * 4
    assert r.success.dtype == np.bool_ and r.nit.dtype == r.nfev.dtype == np.int32
    r = _run("quad", LBFGS, F32)
    assert (int(r.nit), int(r.nfev), int(r.status)) == (7, 8, 0)
    close(r.x, np.linalg.solve(A, B), F32, 0, 1e-5)


def test_options_jit_and_vmap():
    with plax.enable_x64():
        r = _run("rosen2", "BFGS", F64, options=dict(maxiter=3))   # out of iterations
        assert (int(r.nit), int(r.nfev), int(r.status), bool(r.success)) == (3, 9, 1, False)
        close(r.x, [-0.5488972623005326, 0.3059645719760432], F64, 1e-9)
        r = _run("rosen2", "BFGS", F64, tol=1e-1,
                 options=dict(gtol=1e-2, norm=2, line_search_maxiter=5))
        assert (int(r.nit), int(r.nfev), int(r.status)) == (8, 17, 3)
        r = plax.vmap(lambda x0: minimize(rosen, x0, method="BFGS"))(
            jnp.array([[-1.2, 1.0], [0.5, 0.5]]))
        np.testing.assert_array_equal(np.asarray(r.nit), [8, 14])
        np.testing.assert_array_equal(np.asarray(r.nfev), [17, 23])
        close(r.x[1], [1.0, 1.0], F64, 0, 1e-6)


@pytest.mark.parametrize("fun,x0,method,nit,nfev,status", [
    (lambda x: jnp.sum(x ** 2), [0.0, 0.0], "BFGS", 0, 1, 0),        # starts at the minimum
    (lambda x: -jnp.sum(x ** 2), [1.0, 0.0], "BFGS", 1, 11, 5),      # unbounded below
    (lambda x: jnp.sum(jnp.abs(x)), [1.0, -0.5], "BFGS", 2, 8, 3),   # not smooth
    (lambda x: jnp.sum(jnp.abs(x)), [1.0, -0.5], LBFGS, 2, 20, 5),
])
def test_stops_like_jax(fun, x0, method, nit, nfev, status):
    with plax.enable_x64():
        r = minimize(fun, jnp.asarray(x0), method=method)
        assert (int(r.nit), int(r.nfev), int(r.status)) == (nit, nfev, status)
        assert bool(r.success) == (status == 0)


def test_errors():
    x0 = jnp.zeros(2)
    with pytest.raises(TypeError, match="args argument to jax.scipy.optimize.minimize must be "
                                        "a tuple"):
        minimize(rosen, x0, [1], method="BFGS")
    with pytest.raises(ValueError, match="Method Nelder-Mead not recognized"):
        minimize(rosen, x0, method="Nelder-Mead")
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        minimize(rosen, x0, method="BFGS", options=dict(foo=1))
    with pytest.raises(ValueError, match=r"x0 of shape \(n,\).*got shape \(2, 2\)"):
        minimize(rosen, jnp.zeros((2, 2)), method="BFGS")
    with pytest.raises(TypeError, match="minimize requires ndarray or scalar arguments"):
        minimize(rosen, [0.0, 0.0], method="BFGS")
