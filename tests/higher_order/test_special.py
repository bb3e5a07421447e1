"""plax.lax special functions against SciPy (values), JAX 0.10 (typing, edge values,
which derivatives exist) and finite differences (derivatives)."""
import numpy as np
import pytest
import scipy.special as sp

import plax
from plax import lax
from plax.test_util import check_grads
from helpers import check_f32 as check

F32 = np.dtype(np.float32)


A = np.array([0.5, 1.0, 2.0, 5.0, 30.0, 0.1, 3.0, 100.0], np.float32)
X = np.array([0.3, 1.0, 3.0, 2.0, 28.0, 5.0, 10.0, 95.0], np.float32)


def test_igamma_igammac_values():
    f = plax.jit(lambda a, x: (lax.igamma(a, x), lax.igammac(a, x)))
    p, q = f(A, X)
    check(p, sp.gammainc(A, X), rtol=3e-5)
    check(q, sp.gammaincc(A, X), rtol=3e-5)


def test_igamma_edges():
    a = np.array([-1, 0, 1, 1, 0, 2, np.nan, 2], np.float32)
    x = np.array([1, 1, 0, -1, 0, np.inf, 1, np.nan], np.float32)
    check(lax.igamma(a, x), [np.nan, 1, 0, np.nan, np.nan, 1, np.nan, np.nan])
    check(lax.igammac(a, x), [np.nan, 0, 1, np.nan, np.nan, 0, np.nan, np.nan])


def test_igamma_typing():
    out = lax.igamma(np.float32(1.0), np.ones(3, np.float32) * 2)  # rank-0 broadcasts
    check(out, np.full(3, sp.gammainc(1, 2)))
    with pytest.raises(TypeError, match="does not accept dtype int32"):
        lax.igamma(np.ones(3, np.int32), np.ones(3, np.int32))
    with pytest.raises(TypeError, match="same dtypes"):
        lax.igamma(np.ones(3, np.float32), np.ones(3, np.float16))
    with pytest.raises(TypeError, match="shape|dimensions"):
        lax.igamma(np.ones(3, np.float32), np.ones((2, 3), np.float32))


def test_igamma_grads():
    a, x = np.float32(1.5), np.float32(2.0)
    check_grads(lax.igamma, (a, x), order=1, modes=("fwd", "rev"), rtol=2e-2, atol=2e-3)
    check_grads(lax.igammac, (a, x), order=1, modes=("fwd", "rev"), rtol=2e-2, atol=2e-3)
    g = plax.grad(lambda a: lax.igamma(a, np.float32(2.0)))(np.float32(1.5))
    np.testing.assert_allclose(float(g), -0.27743337, rtol=1e-4)
    gx = plax.grad(lambda x: lax.igammac(np.float32(1.5), x))(np.float32(2.0))
    np.testing.assert_allclose(float(gx), -np.exp(-2.0) * 2.0 ** 0.5 / sp.gamma(1.5), rtol=1e-5)
    # Second order in x through the density.
    check_grads(lambda x: lax.igamma(np.float32(2.5), x), (np.float32(1.3),), order=2,
                modes=("fwd",), rtol=2e-2, atol=2e-3)


def test_igamma_grad_a_and_random_gamma_grad():
    a = A[:7].astype(np.float64)
    x = X[:7].astype(np.float64)
    h = 1e-6
    want = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    check(lax.igamma_grad_a(A[:7], X[:7]), want, rtol=1e-4, atol=1e-6)
    density = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    check(plax.jit(lax.random_gamma_grad)(A[:7], X[:7]), -want / density, rtol=1e-4)
    check(lax.random_gamma_grad(np.array([1, 0, -1], np.float32), np.array([0, 1, 1], np.float32)),
          [0, np.nan, np.nan])
    with pytest.raises(NotImplementedError, match="igamma_grad_a"):
        plax.grad(lambda a: lax.igamma_grad_a(a, np.float32(1.0)))(np.float32(2.0))


def test_igamma_vmap():
    out = plax.vmap(lax.igamma, in_axes=(0, None))(A, np.float32(2.0))
    check(out, sp.gammainc(A, np.float32(2.0)), rtol=3e-5)


def test_zeta_polygamma():
    s = np.array([2, 1.5, 3, 4.5, 2, 2, 7], np.float32)
    q = np.array([1, 2, 0.5, 3, 10, -1.5, 0.3], np.float32)
    check(lax.zeta(s, q), sp.zeta(s, q), rtol=2e-5)
    check(lax.zeta(np.array([0.5, 1, 2], np.float32), np.array([1, 1, 0], np.float32)),
          [np.nan, np.inf, np.inf])
    m = np.array([0, 1, 2, 3, 1, 4, 0], np.float32)
    x = np.array([1, 2, 0.5, 3, 10, 1.5, -1.5], np.float32)
    check(plax.jit(lax.polygamma)(m, x), sp.polygamma(m.astype(int), x), rtol=3e-5)
    check(lax.polygamma(np.array([1.5, -1], np.float32), np.array([1, 1], np.float32)),
          [np.nan, np.nan])
    with pytest.raises(NotImplementedError, match="zeta"):
        plax.grad(lambda s: lax.zeta(s, np.float32(2.0)))(np.float32(2.5))


def test_polygamma_grads():
    g = plax.grad(lambda x: lax.polygamma(np.float32(1.0), x))(np.float32(2.5))
    np.testing.assert_allclose(float(g), -0.23620412, rtol=1e-4)
    check_grads(lambda x: lax.polygamma(np.float32(1.0), x), (np.float32(2.5),), order=2,
                modes=("fwd", "rev"), rtol=2e-2, atol=2e-3)
    with pytest.raises(ValueError, match="polygamma gradient with respect to m"):
        plax.grad(lambda m: lax.polygamma(m, np.float32(1.0)))(np.float32(2.0))
    out = plax.vmap(lambda x: lax.polygamma(np.float32(2.0), x))(np.array([1.0, 2.0], np.float32))
    check(out, sp.polygamma(2, [1.0, 2.0]), rtol=3e-5)


XB = np.array([-30, -5, -0.5, 0, 0.5, 1, 10, 19.9, 20.1, 50, 500], np.float32)


def test_bessel_values():
    f = plax.jit(lambda x: (lax.bessel_i0e(x), lax.bessel_i1e(x)))
    i0e, i1e = f(XB)
    check(i0e, sp.i0e(XB), rtol=2e-5)
    check(i1e, sp.i1e(XB), rtol=2e-5)
    check(plax.vmap(lax.bessel_i1e)(XB[:4]), sp.i1e(XB[:4]), rtol=2e-5)
    with pytest.raises(TypeError, match="does not accept dtype int32"):
        lax.bessel_i0e(np.int32(1))


def test_bessel_grads():
    for x in (np.float32(-1.3), np.float32(0.7), np.float32(25.0)):
        check_grads(lax.bessel_i0e, (x,), order=2, modes=("fwd", "rev"), rtol=2e-2, atol=2e-3)
        check_grads(lax.bessel_i1e, (x,), order=1, modes=("fwd", "rev"), rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(float(plax.grad(lax.bessel_i1e)(np.float32(0.0))), 0.5)


def test_betainc():
    a = np.array([0.5, 1, 2, 5, 30, 0.1, 3], np.float32)
    b = np.array([0.5, 3, 2, 1, 40, 2, 0.7], np.float32)
    x = np.array([0.3, 0.9, 0.5, 0.7, 0.4, 0.01, 0.99], np.float32)
    check(plax.jit(lax.betainc)(a, b, x), sp.betainc(a, b, x), rtol=5e-5)
    check(plax.vmap(lax.betainc, in_axes=(None, None, 0))(np.float32(2), np.float32(3), x),
          sp.betainc(2, 3, x), rtol=5e-5)
    edge = lax.betainc(np.array([-1, 0, 1, 1, 0, 1, 1, 1, 1], np.float32),
                       np.array([1, 1, 0, -1, 0, 2, 2, 2, 2], np.float32),
                       np.array([.5, .5, .5, .5, .5, -.1, 0, 1, 1.1], np.float32))
    check(edge, [np.nan, 1, 0, np.nan, np.nan, np.nan, 0, 1, np.nan])
    # infinite parameters, as SciPy: the mass sits at x = 1 (a = inf) or x = 0 (b = inf)
    inf = np.inf
    a = np.array([inf, inf, inf, 1, 0, inf, inf, 2], np.float32)
    b = np.array([inf, inf, 1, inf, inf, 0, 2, inf], np.float32)
    x = np.array([0.5, 0, 0.5, 0.5, 0.5, 0.5, 1, 0], np.float32)
    check(lax.betainc(a, b, x), sp.betainc(a, b, x))


def test_betainc_grads():
    a, b = np.float32(2.0), np.float32(3.0)
    check_grads(lambda x: lax.betainc(a, b, x), (np.float32(0.3),), order=2,
                modes=("fwd", "rev"), rtol=2e-2, atol=2e-3)
    with pytest.raises(ValueError, match="Betainc gradient with respect to a and b"):
        plax.grad(lambda a: lax.betainc(a, b, np.float32(0.3)))(np.float32(1.5))
