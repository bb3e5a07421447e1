"""lax.custom_linear_solve and lax.custom_root: values, implicit derivatives both ways
against the closed forms (A^{-1} b, sqrt), under jit, vmap and scan."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

A_NP = np.array([[4., 1., 0.5], [0.3, 3., 0.2], [0.1, 0.4, 2.]], np.float32)  # not symmetric
S_NP = A_NP + A_NP.T  # symmetric
B_NP = np.array([1., -2., 0.5], np.float32)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def solve_with(a, b, symmetric=False, transpose=True):
    """x = a^{-1} b through custom_linear_solve, with dense solves as the user's solvers."""
    return lax.custom_linear_solve(
        lambda x: a @ x, b, lambda mv, y: jnp.linalg.solve(a, y),
        (lambda vm, y: jnp.linalg.solve(a.T, y)) if transpose and not symmetric else None,
        symmetric=symmetric)


# (name, matrix, symmetric flag)
CASES = [("general", A_NP, False), ("symmetric", S_NP, True)]


@pytest.mark.parametrize("name,a,sym", CASES)
def test_value_and_derivative_in_b(name, a, sym):
    a = jnp.asarray(a)
    f = lambda b: solve_with(a, b, sym)
    inv = np.linalg.inv(np.asarray(a, np.float64))
    close(f(B_NP), inv @ B_NP)
    close(plax.jit(f)(B_NP), inv @ B_NP)
    close(plax.jacfwd(f)(B_NP), inv)
    close(plax.jacrev(f)(B_NP), inv)


@pytest.mark.parametrize("name,a,sym", CASES)
def test_derivative_in_matrix_closed_form(name, a, sym):
    # d(A^{-1} b)/dA_ij . E = -A^{-1} E A^{-1} b, with the matrix closed over by matvec/solve.
    def f(a):
        return solve_with(a, jnp.asarray(B_NP), sym)
    a64 = np.asarray(a, np.float64)
    inv = np.linalg.inv(a64)
    x = inv @ B_NP
    want = -np.einsum("ki,j->kij", inv, x)  # dx_k / dA_ij
    close(plax.jacfwd(f)(jnp.asarray(a)), want, 1e-4)
    close(plax.jacrev(f)(jnp.asarray(a)), want, 1e-4)
    check_grads(f, (jnp.asarray(a),), order=2, modes=["fwd", "rev"], eps=1e-3, atol=2e-2,
                rtol=2e-2)


def test_vmap_over_b_and_matrix():
    bs = np.stack([B_NP, 2 * B_NP, -B_NP])
    mats = np.stack([A_NP, S_NP, A_NP + np.eye(3, dtype=np.float32)])
    got = plax.vmap(lambda b: solve_with(jnp.asarray(A_NP), b))(bs)
    close(got, np.linalg.solve(A_NP, bs.T).T)
    got = plax.vmap(solve_with)(jnp.asarray(mats), jnp.asarray(bs))
    close(got, np.stack([np.linalg.solve(m, b) for m, b in zip(mats, bs)]))
    # derivatives of the batched solve (vmap of grad and grad of vmap agree with the closed form)
    g = lambda m, b: solve_with(m, b).sum()
    want = np.stack([np.linalg.solve(m.T, np.ones(3)) for m in mats])
    close(plax.vmap(plax.grad(g, 1))(jnp.asarray(mats), jnp.asarray(bs)), want)
    close(plax.grad(lambda b: plax.vmap(g)(jnp.asarray(mats), b).sum())(jnp.asarray(bs)), want)


def test_under_scan_and_jit_grad():
    a = jnp.asarray(A_NP)

    def step(c, b):
        return c + solve_with(a, b).sum(), None

    f = lambda bs: lax.scan(step, 0., bs)[0]
    bs = jnp.asarray(np.stack([B_NP, 3 * B_NP]))
    close(f(bs), np.linalg.solve(A_NP, np.asarray(bs).T).sum())
    want = np.tile(np.linalg.solve(A_NP.T, np.ones(3)), (2, 1))
    close(plax.jit(plax.grad(f))(bs), want)


def test_pytree_b_and_has_aux():
    a = jnp.asarray(A_NP)

    def solve(mv, b):
        return {"u": jnp.linalg.solve(a, b["u"]), "v": b["v"] / 2.}, jnp.int32(7)

    def tsolve(vm, b):
        return {"u": jnp.linalg.solve(a.T, b["u"]), "v": b["v"] / 2.}, jnp.int32(3)

    mv = lambda x: {"u": a @ x["u"], "v": 2. * x["v"]}
    b = {"u": jnp.asarray(B_NP), "v": jnp.float32(4.)}
    x, aux = lax.custom_linear_solve(mv, b, solve, tsolve, has_aux=True)
    close(x["u"], np.linalg.solve(A_NP, B_NP))
    close(x["v"], 2.)
    assert int(aux) == 7
    g = plax.grad(lambda b: lax.custom_linear_solve(mv, b, solve, tsolve, has_aux=True)[0]["u"]
                  .sum())(b)
    close(g["u"], np.linalg.solve(A_NP.T, np.ones(3)))
    close(g["v"], 0.)


def test_solver_is_not_differentiated():
    # A "solver" that is right only at the solution: implicit differentiation must not see
    # its internals (here a stop_gradient'ed closed form), only matvec.
    a = jnp.asarray(A_NP)
    solve = lambda mv, b: lax.stop_gradient(jnp.linalg.solve(a, b))
    f = lambda b: lax.custom_linear_solve(lambda x: a @ x, b, solve, symmetric=False,
                                          transpose_solve=lambda vm, y: jnp.linalg.solve(a.T, y))
    close(plax.jacrev(f)(B_NP), np.linalg.inv(A_NP))


def test_errors():
    a = jnp.asarray(A_NP)
    no_transpose = lambda b: lax.custom_linear_solve(lambda x: a @ x, b,
                                                     lambda mv, y: jnp.linalg.solve(a, y))
    close(plax.jacfwd(no_transpose)(B_NP), np.linalg.inv(A_NP))  # forward mode needs none
    with pytest.raises(TypeError, match="transpose_solve required for backwards mode"):
        plax.grad(lambda b: no_transpose(b).sum())(B_NP)
    with pytest.raises(TypeError, match=r"solve\(\) output pytree structure must match b"):
        lax.custom_linear_solve(lambda x: a @ x, B_NP, lambda mv, y: (y, y))
    with pytest.raises(TypeError, match=r"matvec\(\) output shapes must match b"):
        lax.custom_linear_solve(lambda x: x[:2], B_NP, lambda mv, y: y)


# --- custom_root -----------------------------------------------------------------------------
def newton(f, x0):
    def body(x, _):
        fx, dfx = plax.jvp(f, (x,), (jnp.ones_like(x),))
        return x - fx / dfx, None
    return lax.scan(body, x0, None, length=30)[0]


def scalar_solve(g, y):
    return y / g(1.0)


def root_sqrt(a):
    return lax.custom_root(lambda x: x ** 2 - a, 1.0, newton, scalar_solve)


@pytest.mark.parametrize("a", [0.5, 2.0, 9.0])
def test_custom_root_sqrt(a):
    close(root_sqrt(a), np.sqrt(a))
    close(plax.grad(root_sqrt)(a), 0.5 / np.sqrt(a))
    close(plax.jit(plax.grad(root_sqrt))(a), 0.5 / np.sqrt(a))
    close(plax.jvp(root_sqrt, (a,), (1.,))[1], 0.5 / np.sqrt(a))
    close(plax.grad(plax.grad(root_sqrt))(a), -0.25 * a ** -1.5, 1e-4)


def test_custom_root_vmap_and_vector():
    xs = jnp.asarray([1., 4., 16.])
    close(plax.vmap(root_sqrt)(xs), [1., 2., 4.])
    close(plax.vmap(plax.grad(root_sqrt))(xs), 0.5 / np.sqrt([1., 4., 16.]))
    # A vector root (x_i^2 = a_i) with a dense tangent solve: d x / d a = diag(1 / (2 x)).
    def vec_root(a):
        def tangent_solve(g, y):
            jac = plax.jacfwd(g)(jnp.zeros_like(y))
            return jnp.linalg.solve(jac, y)
        return lax.custom_root(lambda x: x ** 2 - a, jnp.ones(3), newton, tangent_solve)
    a = jnp.asarray([1., 4., 9.])
    close(vec_root(a), [1., 2., 3.])
    close(plax.jacrev(vec_root)(a), np.diag(0.5 / np.array([1., 2., 3.])), 1e-5)
    close(plax.jacfwd(vec_root)(a), np.diag(0.5 / np.array([1., 2., 3.])), 1e-5)


def test_custom_root_has_aux():
    def solve(f, x0):
        return newton(f, x0), jnp.int32(30)
    f = lambda a: lax.custom_root(lambda x: x ** 2 - a, 1.0, solve, scalar_solve, has_aux=True)
    x, n = f(4.)
    close(x, 2.)
    assert int(n) == 30
    close(plax.grad(lambda a: f(a)[0])(4.), 0.25)


def test_custom_root_traces_tangent_solve_at_the_call():
    class Failed(Exception):
        pass

    def failing_solve(g, y):
        raise Failed("tangent_solve ran")

    # Not differentiated, yet tangent_solve is traced (on the guess's type), as JAX's is.
    with pytest.raises(Failed, match="tangent_solve ran"):
        lax.custom_root(lambda x: x ** 2 - 4.0, 1.0, newton, failing_solve)
    with pytest.raises(TypeError, match="tangent_solve\\(\\) output pytree structure"):
        lax.custom_root(lambda x: x ** 2 - 4.0, 1.0, newton, lambda g, y: (y, y))
