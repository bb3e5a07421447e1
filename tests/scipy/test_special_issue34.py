"""The scipy.special functions added for issue 34 against SciPy (values in float32 and float64,
under jit and vmap), their derivatives with check_grads, and the conventions where JAX's
definition differs from SciPy's (loggamma's NaN at 0, Ci(-x) = Ci(x), comb's zeros)."""
import numpy as np
import pytest
import scipy.special as sp

import plax
from plax.scipy import special as S
from plax.test_util import check_grads
from helpers import close, grad_check_defaults

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
RNG = np.random.default_rng(34)
# real points: both signs, the joins of the series / rational / continued-fraction pieces
# (0.5, 1.2, 4, 6), and the edges
X = np.concatenate([RNG.uniform(-8, 8, 60), [-40, -6.01, -5.99, -1, -0.1, 0, 0.1, 0.49, 0.51,
                                             1.19, 1.21, 3.99, 4.01, 5.99, 6.01, 25, 300]])
EDGES = np.array([np.inf, -np.inf, np.nan])


def _sici_reference(x):
    si, ci = sp.sici(np.abs(x))
    return np.stack([np.sign(x) * si, ci])


# name, our function, SciPy reference on float64 input, float32 rtol, float32 atol
UNARY = [
    ("dawsn", S.dawsn, sp.dawsn, 2e-6, 1e-7),
    ("erfcx", S.erfcx, sp.erfcx, 2e-6, 0),
    ("fresnel", lambda x: plax.numpy.stack(S.fresnel(x)), lambda x: np.stack(sp.fresnel(x)),
     2e-5, 1e-6),
    ("sici", lambda x: plax.numpy.stack(S.sici(x)), _sici_reference, 2e-5, 2e-6),
]


@pytest.mark.parametrize("name,ours,want,rtol,atol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values_like_scipy(name, ours, want, rtol, atol):
    x = X[np.abs(X) < 26]  # (erfcx(-x) overflows float32 past ~9.3; tested in float64)
    if name == "erfcx":
        x = x[x > -9]
    x32 = x.astype(np.float32)
    close(plax.jit(ours)(x32), want(x32.astype(np.float64)), F32, rtol, atol)
    with plax.enable_x64():
        close(plax.jit(ours)(X), want(X), F64, 5e-13, 1e-15)
        close(plax.vmap(ours, out_axes=-1)(X[:5]), want(X[:5]), F64, 5e-13, 1e-15)


def test_unary_edges():
    close(S.dawsn(EDGES), [0, 0, np.nan], F32)
    close(S.erfcx(EDGES), [0, np.inf, np.nan], F32)
    close(plax.numpy.stack(S.fresnel(EDGES)), [[0.5, -0.5, np.nan]] * 2, F32)
    # JAX's conventions: Ci(0) = -inf, Ci(-x) = Ci(x), Ci(-inf) = NaN
    close(plax.numpy.stack(S.sici(np.array([0.0, -2.0, np.inf, -np.inf, np.nan]))),
          [[0, -sp.sici(2.0)[0], np.pi / 2, -np.pi / 2, np.nan],
           [-np.inf, sp.sici(2.0)[1], 0, np.nan, np.nan]], F32)


def test_wofz():
    z = np.concatenate([RNG.normal(size=80) * 5 + 1j * RNG.normal(size=80) * 2,
                        [0, 1 + 1j, -1 + 0.5j, 3 - 2j, 10 + 1j, 0.5j, -0.5j, 100, 1e-3 + 1e-3j,
                         6.01j, 5.99 + 0.1j, -30 + 2j]])
    close(plax.jit(S.wofz)(z.astype(np.complex64)), sp.wofz(z), C64, 3e-5, 1e-6)
    with plax.enable_x64():
        close(S.wofz(z), sp.wofz(z), C128, 1e-13, 1e-15)
        close(plax.vmap(S.wofz)(z[:4]), sp.wofz(z[:4]), C128, 1e-13, 1e-15)
    assert S.wofz(np.float32(1.0)).dtype == C64          # real input gives a complex result


def test_gamma_family():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 2.5, 7.0, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan])
    close(S.gammasgn(x), [-1, 1, -1, 1, 1, 1, np.nan, 1, -1, 1, np.nan, np.nan], F32)
    # loggamma: gammaln for x > 0, NaN for x <= 0 (SciPy gives inf at 0; JAX's NaN is kept)
    close(S.loggamma(x), np.where(x > 0, sp.gammaln(np.where(x > 0, x, 1)), np.nan), F32,
          2e-6, 1e-6)
    # complex: the principal branch, cut along the negative reals (NaN at the poles)
    z = np.concatenate([[1 + 1j, -0.5 + 0j, -0.5 - 0j, -2.5 + 0.1j, -2.5 - 0.1j, 3 - 4j, 0.1j,
                         -100.3 + 2j, 1e3 + 1e3j, -5.5 + 0j, -1e-3 + 0j, 15 - 3j, 0j, -1 + 0j],
                        RNG.normal(size=40) * 20 + 1j * RNG.normal(size=40) * 20])
    with np.errstate(all="ignore"):
        want = sp.loggamma(z)
    close(S.loggamma(z.astype(np.complex64)), want, C64, 2e-6, 1e-6)
    with plax.enable_x64():
        close(plax.jit(S.loggamma)(z), want, C128, 1e-13)
        # forward-mode derivative: digamma
        tangent = plax.jvp(S.loggamma, (1.5 + 0.5j,), (1.0 + 0j,))[1]
        np.testing.assert_allclose(complex(tangent), sp.digamma(1.5 + 0.5j), rtol=1e-12)
    z = np.array([2.5, -1.5, 3.0, 0.0, -2.0, 4.0, 2.0, 0.3, -3.0, 1.5])
    m = np.array([1.5, 2.0, -1.0, 0.0, 2.0, -2.5, -3.0, 4.2, 4.0, 0.25])
    close(plax.jit(S.poch)(z, m), sp.poch(z, m), F32, 3e-6)
    with plax.enable_x64():
        close(S.poch(z, m), sp.poch(z, m), F64, 1e-13)


def test_comb():
    N = np.array([5, 5, 5, 5, -1, 3.5, 0, 10, 4, 2])
    k = np.array([2, 0, 6, -1, 1, 2, 0, 3, 4.5, 1.5])
    close(S.comb(N, k), sp.comb(N, k), F32, 2e-6)
    # with repetition: comb(N + k - 1, k); 0 for N < 0 or k < 0 (SciPy gives NaN for N < 0)
    want = np.where(N < 0, 0.0, sp.comb(N, k, repetition=True))
    close(S.comb(N, k, repetition=True), want, F32, 5e-6)
    with plax.enable_x64():
        close(S.comb(N, k), sp.comb(N, k), F64, 1e-13)


def test_boxcox():
    x = np.array([0.5, 2.0, -1.0, 0.0, 3.0, 1e-8, 10.0])
    lm = np.array([0.0, 0.5, 0.5, 0.5, -1.5, 1.0, 0.0])
    close(S.boxcox(x, lm), sp.boxcox(x, lm), F32, 2e-6)
    close(S.boxcox1p(x, lm), sp.boxcox1p(x, lm), F32, 2e-6)
    with plax.enable_x64():
        close(S.boxcox1p(x, lm), sp.boxcox1p(x, lm), F64, 1e-15)


def test_bernoulli():
    close(S.bernoulli(30), sp.bernoulli(30), F32, 1e-6, 1e-7)
    with plax.enable_x64():
        close(S.bernoulli(60), sp.bernoulli(60), F64, 1e-14)
    assert S.bernoulli(0).shape == (1,)
    with pytest.raises(ValueError, match="non-negative integer"):
        S.bernoulli(-1)


OWENS = [(0.0, 0.5), (0.5, 0.5), (1.0, 2.0), (2.0, 0.3), (5.0, 1.0), (-1.0, 0.5), (1.0, -1.0),
         (0.3, 100.0), (10.0, 0.2), (3.0, 0.999), (3.0, 1.001), (8.0, 1.5), (0.0, np.inf),
         (2.0, np.inf), (np.inf, 1.0), (0.9, 5.0), (1.1, 0.05)]


def test_owens_t():
    h, a = np.array(OWENS).T
    close(plax.jit(S.owens_t)(h, a), sp.owens_t(h, a), F32, 5e-6, 1e-12)
    with plax.enable_x64():
        close(S.owens_t(h, a), sp.owens_t(h, a), F64, 5e-14, 1e-300)
        hr, ar = RNG.uniform(-6, 6, 100), RNG.uniform(-4, 4, 100)
        close(plax.vmap(S.owens_t)(hr, ar), sp.owens_t(hr, ar), F64, 5e-14, 1e-300)


HYP1F1 = [(1.0, 2.0, 0.5), (0.5, 1.5, -2.0), (2.0, 3.0, 10.0), (-2.0, 3.0, 1.5), (1.0, -2.5, 1.0),
          (3.0, 1.0, -10.0), (1.0, 1.0, 50.0), (2.5, 4.0, -30.0), (-2.5, 1.0, 5.0),
          (-2.0, 1.0, -5.0), (3.0, 1.0, -50.0), (1.0, 2.0, 0.0), (0.3, 0.7, -3.0)]
HYP2F1 = [(1.0, 2.0, 3.0, 0.5), (0.5, 1.5, 2.0, -2.0), (1.0, 1.0, 2.0, 0.9), (2.0, 3.0, 4.0, 0.99),
          (-2.0, 3.0, 4.0, 0.5), (1.0, 2.0, 3.0, -5.0), (1.0, 2.0, -1.5, 0.3),
          (2.5, 1.5, 4.0, 0.7), (1.0, 2.0, 4.0, 1.0), (-2.0, 3.0, 4.0, 1.5), (-1.0, 2.0, -2.0, 0.3),
          (0.5, 0.5, 1.5, -3.0), (0.3, 0.6, 1.7, 0.95), (1.2, 0.7, 3.3, 0.97),
          (1.0, 2.0, 3.0, -0.999), (0.5, 0.5, 1.5, -30.0)]


def test_hypergeometric_values():
    args1, args2 = np.array(HYP1F1).T, np.array(HYP2F1).T
    close(plax.jit(S.hyp1f1)(*args1.astype(np.float32)), sp.hyp1f1(*args1), F32, 2e-6)
    close(plax.jit(S.hyp2f1)(*args2.astype(np.float32)), sp.hyp2f1(*args2), F32, 3e-5)
    with plax.enable_x64():
        close(S.hyp1f1(*args1), sp.hyp1f1(*args1), F64, 1e-14)
        close(plax.vmap(S.hyp2f1)(*args2), sp.hyp2f1(*args2), F64, 1e-14)
    # NaN in, NaN out; 1F1(a; b; -inf) = 0 for a > 0
    close(S.hyp1f1(np.float32([1, np.nan, 1]), 2.0, np.float32([np.nan, 1, -np.inf])),
          [np.nan, np.nan, 0], F32)
    close(S.hyp2f1(np.float32([1, np.nan]), 2.0, 3.0, np.float32([np.nan, 0.5])),
          [np.nan, np.nan], F32)
    # the edges: inf at c's poles and for x > 1, Gauss's sum at x = 1
    close(S.hyp2f1(np.float32([1, 1, 1]), 2.0, np.float32([-2, 3, 4]), np.float32([0.3, 1.5, 1])),
          [np.inf, np.inf, 3.0], F32, 2e-6)


def test_bessel_jn():
    z = np.array([0.5, 1.0, 10.0, 0.01, -2.0, 0.0, 1e-6, 20.0, -7.5])
    want = np.array([sp.jv(k, z) for k in range(6)])
    close(plax.jit(lambda z: S.bessel_jn(z, v=5))(z.astype(np.float32)), want, F32, 2e-5, 1e-6)
    with plax.enable_x64():
        close(S.bessel_jn(z, v=5), want, F64, 1e-12, 1e-15)
        close(plax.vmap(lambda z: S.bessel_jn(z, v=5))(z), want.T, F64, 1e-12, 1e-15)
    close(S.bessel_jn(np.float32([np.inf, -np.inf, np.nan]), v=1), [[0, 0, np.nan]] * 2, F32)
    assert S.bessel_jn(np.ones((2, 3), np.float32), v=2).shape == (3, 2, 3)
    assert S.bessel_jn(1.0, v=-1).shape == (0,)
    with pytest.raises(TypeError, match="static Python integer"):
        plax.jit(lambda z, v: S.bessel_jn(z, v=v))(1.0, 2)


def test_sph_harm_y():
    n = RNG.integers(0, 8, 60)
    m = RNG.integers(-8, 9, 60)
    theta, phi = RNG.uniform(-1, 4, 60), RNG.uniform(-3, 7, 60)
    close(S.sph_harm_y(n, m, theta.astype(np.float32), phi.astype(np.float32)),
          sp.sph_harm_y(n, m, theta, phi), C64, 2e-5, 2e-6)
    with plax.enable_x64():
        close(S.sph_harm_y(n, m, theta, phi), sp.sph_harm_y(n, m, theta, phi), C128, 1e-12,
              1e-14)
        # under jit n_max is given (a static bound)
        f = plax.jit(S.sph_harm_y, static_argnames="n_max")
        close(f(n, m, theta, phi, n_max=7), sp.sph_harm_y(n, m, theta, phi), C128, 1e-12, 1e-14)
    with pytest.raises(TypeError, match="n_max"):
        plax.jit(S.sph_harm_y)(n, m, theta, phi)
    with pytest.raises(NotImplementedError, match="diff_n"):
        S.sph_harm_y(n, m, theta, phi, diff_n=1)


# function, points (float64) at which check_grads runs in forward and reverse mode
GRADS = [
    ("dawsn", S.dawsn, (np.array([-7.0, -0.3, 0.2, 1.0, 3.0]),)),
    ("erfcx", S.erfcx, (np.array([-2.0, -0.3, 0.2, 1.0, 7.0]),)),
    ("fresnel", lambda x: S.fresnel(x)[0] + 2 * S.fresnel(x)[1], (np.array([-2.0, 0.5, 1.5]),)),
    ("sici", lambda x: S.sici(x)[0] + 2 * S.sici(x)[1], (np.array([-5.0, 0.5, 3.0, 9.0]),)),
    ("wofz", S.wofz, (np.array([1 + 1j, -2 + 0.5j, 0.3 - 0.4j, 7 + 2j]),)),
    ("owens_t", S.owens_t, (np.array([0.5, 2.0, -1.0, 3.0]), np.array([0.5, 0.3, 2.0, -1.5]))),
    ("poch", S.poch, (np.array([2.5, 3.0, 0.7]), np.array([1.5, -1.0, 2.2]))),
    ("boxcox", S.boxcox, (np.array([0.5, 2.0, 3.0]), np.array([0.3, 0.5, -1.5]))),
    ("hyp1f1", S.hyp1f1, (np.array([1.0, 0.5, -1.5, 0.3]), np.array([2.0, 1.5, 0.5, 0.7]),
                          np.array([0.5, -2.0, 2.0, -3.0]))),
    ("hyp2f1", S.hyp2f1, (np.array([1.0, 0.5, 2.5, 0.3]), np.array([2.0, 1.5, 1.5, 0.6]),
                          np.array([3.0, 2.0, 4.0, 1.7]), np.array([0.5, -2.0, 0.7, -5.0]))),
    ("bessel_jn", lambda z: S.bessel_jn(z, v=3), (np.array([0.5, 3.0, -2.0]),)),
    ("sph_harm_y", lambda t, p: S.sph_harm_y(np.array([3, 2, 1]), np.array([2, -1, 0]), t, p),
     (np.array([0.3, 1.0, 2.5]), np.array([0.1, 2.0, -1.0]))),
]


@pytest.mark.parametrize("name,fn,args", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name, fn, args):
    with plax.enable_x64():
        check_grads(fn, args, order=1, modes=("fwd", "rev"), **grad_check_defaults(F64))


def test_closed_form_derivatives():
    with plax.enable_x64():
        x = np.array([-3.0, 0.5, 2.0, 8.0])
        close(plax.vmap(plax.grad(S.dawsn))(x), 1 - 2 * x * sp.dawsn(x), F64, 1e-13)
        close(plax.vmap(plax.grad(lambda x: S.fresnel(x)[0]))(x), np.sin(np.pi * x ** 2 / 2),
              F64, 1e-13)
        close(plax.vmap(plax.grad(lambda x: S.sici(x)[1]))(x), np.cos(x) / x, F64, 1e-13)
        # d/dx 1F1(a; b; x) = a / b 1F1(a + 1; b + 1; x)
        close(plax.grad(S.hyp1f1, 2)(1.5, 2.5, -3.0), 1.5 / 2.5 * sp.hyp1f1(2.5, 3.5, -3.0),
              F64, 1e-13)


def test_types_and_errors():
    assert S.dawsn(np.arange(3)).dtype == F32
    assert S.hyp1f1(1, 2, 1).dtype == F32
    assert plax.eval_shape(S.owens_t, 1.0, np.float32(0.5)).dtype == F32
    for call in (lambda: S.dawsn(1j),
                 lambda: S.owens_t(1j, 1.0), lambda: S.hyp2f1(1.0, 1.0, 1.0, 1j)):
        with pytest.raises(ValueError, match="does not support complex-valued inputs"):
            call()
    with pytest.raises(ValueError, match=r"Argument `x` to sici must be real-valued\. Got dtype "
                                         r"complex64"):
        S.sici(np.arange(3, dtype=np.complex64))


def test_erfcx_complex():
    """For complex z, erfcx(z) = w(i z) (SciPy's complex erfcx), with derivative
    2 z erfcx(z) - 2 / sqrt(pi)."""
    z = np.array([1 + 1j, -2 + 0.5j, 0.3 - 0.4j, 7 + 2j, -3 - 3j, 30 + 1j, 0.5])
    want = sp.erfcx(z)
    close(plax.jit(S.erfcx)(z.astype(np.complex64)), want, C64, 3e-5, 1e-6)
    tangent = plax.jvp(S.erfcx, (z.astype(np.complex64),), (np.ones(7, np.complex64),))[1]
    close(tangent, 2 * z * want - 2 / np.sqrt(np.pi), C64, 1e-4, 1e-5)
    with plax.enable_x64():
        close(S.erfcx(z), want, C128, 1e-13, 1e-15)


def test_strict_promotion_inside():
    """Under strict dtype promotion the Faddeeva-based functions and sici still run: their
    internals never mix real and complex arrays."""
    z = np.array([1 + 1j, -2 + 0.5j, 0.3 - 0.4j, 7 + 2j, 3j], np.complex64)
    x = np.array([0.5, 3.0, 5.0, 9.0, 40.0], np.float32)
    with plax.numpy_dtype_promotion("strict"):
        close(S.wofz(z), sp.wofz(z.astype(np.complex128)), C64, 3e-5, 1e-6)
        tangent = plax.jvp(S.wofz, (z,), (np.ones_like(z),))[1]
        close(S.erfcx(x), sp.erfcx(x.astype(np.float64)), F32, 2e-6)
        close(S.dawsn(x), sp.dawsn(x.astype(np.float64)), F32, 2e-6, 1e-7)
        close(plax.numpy.stack(S.sici(x)), np.stack(sp.sici(x.astype(np.float64))), F32, 2e-5,
              2e-6)
    w = sp.wofz(z.astype(np.complex128))
    close(tangent, 2j / np.sqrt(np.pi) - 2 * z * w, C64, 1e-4, 1e-6)
