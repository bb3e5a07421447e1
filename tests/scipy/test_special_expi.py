"""plax.scipy.special's exponential integrals expi, exp1 and expn against SciPy, with their
derivatives (exp(x) / x, -exp(-x) / x, -E_{n-1}) under jit and vmap."""
import numpy as np
import pytest
import scipy.special as sp

import plax
from plax.scipy import special as S
from plax.test_util import check_grads
from helpers import close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
# both signs, each side of the series / asymptotic / continued-fraction joins (1, 40), Ei's zero
# (0.3725...), underflow and overflow, and the edges 0, +-inf, NaN
X = np.concatenate([[-800, -100, -30, -5, -1, -0.3725, -1e-5, 0, 1e-8, 1e-3, 0.5, 0.999, 1,
                     1.001, 2, 7, 20, 39.99, 40, 40.01, 65, 100, 300, 700, np.inf, -np.inf,
                     np.nan], np.linspace(-50, 50, 201), np.geomspace(1e-6, 700, 61)])


@pytest.mark.parametrize("name", ["expi", "exp1"])
def test_values_like_scipy(name):
    ours, want = getattr(S, name), getattr(sp, name)
    with np.errstate(invalid="ignore"), plax.enable_x64():
        # (float64 overflows past 709.78, where SciPy's exp1 gives subnormals XLA flushes)
        x = X[np.abs(X) <= 700]
        close(plax.jit(ours)(x), want(x), F64, 2e-13, 1e-16)
    x32 = X[np.abs(X) <= 80].astype(np.float32)
    close(plax.jit(ours)(x32), want(x32.astype(float)), F32, 3e-6, 1e-7)


def test_edges():
    got = S.expi(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32))
    np.testing.assert_array_equal(np.asarray(got), [-np.inf, -np.inf, np.inf, 0, np.nan])
    got = S.exp1(np.array([0.0, np.inf, -1.0, np.nan], np.float32))
    np.testing.assert_array_equal(np.asarray(got), [np.inf, 0, np.nan, np.nan])


N_X = [(n, x) for n in (0, 1, 2, 3, 5, 10, 30, 5000)
       for x in (0, 1e-5, 0.3, 0.999, 1, 1.001, 1.5, 3, 10, 200, np.inf, -1)]


def test_expn_like_scipy():
    n, x = np.array(N_X).T
    with np.errstate(invalid="ignore"), plax.enable_x64():
        close(plax.jit(S.expn)(n, x), sp.expn(n.astype(int), x), F64, 1e-13, 1e-300)
    close(S.expn(n.astype(np.int32), x.astype(np.float32)), sp.expn(n.astype(int), x), F32,
          3e-6, 1e-30)
    # a float order is truncated, as SciPy does; negative orders are NaN
    close(S.expn(np.float32([2.5, 0.7, -1.0]), 1.0), [sp.expn(2, 1.0), np.exp(-1), np.nan], F32)
    # the order broadcasts against x
    close(S.expn(np.array([1, 2, 3]), np.float32([[0.5], [2.0]])),
          sp.expn([1, 2, 3], [[0.5], [2.0]]), F32)


def test_derivatives():
    with plax.enable_x64():
        x = np.array([-3.0, -0.5, 0.2, 1.0, 2.5, 45.0])
        close(plax.vmap(plax.grad(S.expi))(x), np.exp(x) / x, F64, 1e-14)
        check_grads(S.expi, (x,), order=2, modes=("fwd", "rev"))
        xp = np.abs(x)
        close(plax.vmap(plax.grad(S.exp1))(xp), -np.exp(-xp) / xp, F64, 1e-14)
        for n in (0, 1, 3):
            f = lambda x, n=n: S.expn(n, x)  # noqa: E731
            want = (-np.exp(-xp) * (1 + xp) / xp ** 2 if n == 0 else -sp.expn(n - 1, xp))
            close(plax.jit(plax.vmap(plax.grad(f)))(xp), want, F64, 1e-13)
        check_grads(lambda x: S.expn(3, x), (xp,), order=2, modes=("fwd", "rev"))
        # the order gets no derivative (as in JAX)
        assert plax.grad(S.expn)(3.0, 2.0) == 0
    assert plax.grad(S.expi)(0.0) == np.inf


def test_types_and_errors():
    assert plax.eval_shape(S.expi, 3.0).dtype == F32
    assert plax.eval_shape(S.expn, 2, np.float32(1)).dtype == F32
    assert S.exp1(np.arange(1, 3)).dtype == F32
    for call in (lambda: S.expi(1j), lambda: S.exp1(1j), lambda: S.expn(2, 1j)):
        with pytest.raises(ValueError, match="does not support complex-valued inputs"):
            call()
