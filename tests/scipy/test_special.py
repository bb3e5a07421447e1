"""plax.scipy.special against SciPy (values) and JAX 0.10 (dtypes, edge values, derivatives)."""
import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import plax
from helpers import check_vmap, check_vmap_axes
from plax.runtime.array import Array
from plax.scipy import special as S
from plax.test_util import check_grads

BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F16, I32 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int32)
TOL = {F32: 2e-5, F16: 4e-3, BF16: 2e-2}


def check(got, want, dtype=F32, tol=None):
    assert isinstance(got, Array), type(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    tol = tol or TOL.get(np.dtype(dtype), 2e-5)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol,
                               equal_nan=True)


def sample(shape, lo, hi, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


# --- elementwise functions ---------------------------------------------------------------------
# name, SciPy reference, input domain
UNARY = [
    ("expit", sp.expit, (-4, 4)),
    ("logit", sp.logit, (0.05, 0.95)),
    ("erf", sp.erf, (-2, 2)),
    ("erfc", sp.erfc, (-2, 2)),
    ("erfinv", sp.erfinv, (-0.9, 0.9)),
    ("gammaln", sp.gammaln, (0.2, 6)),
    ("digamma", sp.digamma, (0.2, 6)),
    ("entr", sp.entr, (0.01, 3)),
]


@pytest.mark.parametrize("name,fn,domain", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_scipy(name, fn, domain):
    f = getattr(S, name)
    for dtype, shape in ((F32, (3, 4)), (F16, (5,)), (BF16, ()), (F32, (0, 2))):
        x = sample(shape, *domain).astype(dtype)
        check(f(x), fn(x.astype(np.float64)), dtype)
    check(f(np.array([1, 2], np.int32) if name not in ("logit", "erfinv") else np.array([0])),
          fn(np.array([1., 2.]) if name not in ("logit", "erfinv") else np.array([0.])), F32)


def test_unary_edge_values():
    x = np.array([0., 0.5, 1., 2.], np.float32)
    check(S.logit(x), [-np.inf, 0., np.inf, np.nan])
    check(S.erfinv(np.array([1., -1., 2.], np.float32)), [np.inf, -np.inf, np.nan])
    check(S.gammaln(np.array([0., -1., -1.5], np.float32)), sp.gammaln([0., -1., -1.5]))
    check(S.digamma(np.array([-0.5, -1.5], np.float32)), sp.digamma([-0.5, -1.5]), tol=1e-4)
    e = S.entr(np.array([0., -1., 2., np.nan, np.inf], np.float32))
    check(e, [0., -np.inf, -2 * np.log(2), np.nan, -np.inf])
    assert np.signbit(np.asarray(e)[0])  # -0.0, as JAX
    assert S.expit(1).dtype == F32 and S.logit(2).dtype == F32


def test_xlogy_and_xlog1py():
    x = np.array([0., 0., 2., 0., 1.5, -1.], np.float32)
    y = np.array([0., 3., 0., np.nan, 2., 0.5], np.float32)
    check(S.xlogy(x, y), sp.xlogy(x.astype(np.float64), y))
    y1 = y - 1
    check(S.xlog1py(x, y1), sp.xlog1py(x.astype(np.float64), y1))
    check(S.xlogy(np.full((2, 1), 2., np.float32), np.array([1., 3.], np.float32)),
          sp.xlogy(2., np.array([[1., 3.], [1., 3.]])))
    check(S.xlogy(2, 3), np.log(3) * 2)
    assert S.xlogy(np.int32(2), np.int32(3)).dtype == F32
    check(S.xlogy(np.float16(2), np.float16(3)), 2 * np.log(3), F16)


# --- logsumexp, softmax -----------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=str)
def test_logsumexp_matches_scipy(axis):
    a = sample((2, 3, 4), -3, 3).astype(np.float32)
    b = sample((3, 4), -1, 2, seed=1).astype(np.float32)
    for keepdims in (False, True):
        check(S.logsumexp(a, axis=axis, keepdims=keepdims),
              sp.logsumexp(a.astype(np.float64), axis=axis, keepdims=keepdims))
    got, sign = S.logsumexp(a, axis=axis, b=b, return_sign=True)
    want, wsign = sp.logsumexp(a.astype(np.float64), axis=axis, b=b, return_sign=True)
    check(got, want, tol=1e-4), check(sign, wsign)
    with np.errstate(invalid="ignore"):
        check(S.logsumexp(a, axis=axis, b=b), sp.logsumexp(a.astype(np.float64), axis=axis, b=b),
              tol=1e-4)


def test_logsumexp_edge_values():
    inf, nan = np.inf, np.nan
    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    check(S.logsumexp(np.array([[-inf, -inf], [1., 2.]], np.float32), axis=1),
          [-inf, np.log(np.exp(1) + np.exp(2))])
    check(S.logsumexp(f(1., inf)), inf), check(S.logsumexp(f(inf, -inf)), inf)
    check(S.logsumexp(f(nan, 1.)), nan), check(S.logsumexp(f(inf, inf)), inf)
    check(S.logsumexp(f(1e30, 1e30)), 1e30 + np.log(2))
    check(S.logsumexp(np.zeros((0,), np.float32)), -inf)
    check(S.logsumexp(np.zeros((2, 0), np.float32), axis=1), [-inf, -inf])
    check(S.logsumexp(f(1., 2.), b=0.), -inf)
    out, sign = S.logsumexp(f(1., 1.), b=f(1., -1.), return_sign=True)
    check(out, -inf), check(sign, 0.)
    check(S.logsumexp(f(1., 2.), b=f(1., -1.)), nan)  # negative sum, no sign asked
    check(S.logsumexp(f(1., 2., 3.), where=np.array([True, False, True])),
          np.log(np.exp(1) + np.exp(3)))
    check(S.logsumexp(np.array([1, 2])), sp.logsumexp([1., 2.]))  # ints give float32
    check(S.logsumexp(np.array([1., 2.], np.float16)), sp.logsumexp([1., 2.]), F16)
    check(S.logsumexp(np.array([1., 2.], BF16)), sp.logsumexp([1., 2.]), BF16)
    z = np.array([1 + 1j, 2 + 0j], np.complex64)
    got = S.logsumexp(z)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(got), sp.logsumexp(z.astype(np.complex128)), rtol=1e-5)


def test_logsumexp_leaves_out_zero_weights():
    # A term with b == 0 neither sets the shift nor meets 0 * inf (as JAX): the value, and
    # the derivatives in a, stay those of the other terms even when the left-out a dominates.
    a = np.array([[0.0, -100.0], [1e30, 1.0], [np.inf, 2.0]], np.float32)
    b = np.array([0.0, 2.0], np.float32)
    check(S.logsumexp(a, axis=1, b=b), np.log(2.0) + a[:, 1].astype(np.float64))
    out, sign = S.logsumexp(a, axis=1, b=b, return_sign=True)
    check(out, np.log(2.0) + a[:, 1].astype(np.float64)), check(sign, [1.0, 1.0, 1.0])
    f = lambda x: S.logsumexp(plax.numpy.stack([x, -x]), b=b)  # = log 2 - x  # noqa: E731
    for x in (100.0, 50.0, 0.0, -50.0):
        check(plax.grad(f)(np.float32(x)), -1.0)
        check(plax.jit(plax.grad(plax.grad(f)))(np.float32(x)), 0.0)
    check(plax.grad(lambda w: S.logsumexp(np.float32([1.0, 2.0]), b=w))(np.float32([0.0, 1.0])),
          [0.0, 1.0])  # JAX's gradient in b: zero at a left-out term


def test_log_ndtr_higher_derivatives_stay_finite():
    # d/dx log ndtr = r = phi/ndtr, d2 = -r (x + r), d3 = -d2 (x + r) - r (1 + d2): in float64
    # from SciPy's log_ndtr. Near the switch to the tail series (x = -10 in float32) the
    # quotient rule squared ndtr(x) and underflowed (-inf, then nan).
    x = np.array([-10.0, -9.99, -9.5, -5.0, -1.0, 0.0, 2.0], np.float64)
    r = np.exp(-0.5 * x * x - 0.5 * np.log(2 * np.pi) - sp.log_ndtr(x))
    d2 = -r * (x + r)
    d3 = -d2 * (x + r) - r * (1 + d2)
    g1 = plax.vmap(plax.grad(S.log_ndtr))
    g2 = plax.vmap(plax.grad(plax.grad(S.log_ndtr)))
    g3 = plax.jit(plax.vmap(plax.grad(plax.grad(plax.grad(S.log_ndtr)))))
    xs = x.astype(np.float32)
    check(g1(xs), r, tol=1e-4)
    check(g2(xs), d2, tol=2e-3)
    got3 = np.asarray(g3(xs))
    assert np.all(np.isfinite(got3)), got3
    # (d3 is a difference of terms near 0.1 there: float32 keeps about two digits of it)
    np.testing.assert_allclose(got3, d3, rtol=0.05, atol=3e-3)


@pytest.mark.parametrize("axis", [None, -1, (0, 1)], ids=str)
def test_softmax_matches_scipy(axis):
    x = sample((2, 3, 4), -3, 3).astype(np.float32)
    check(S.softmax(x, axis=axis), sp.softmax(x.astype(np.float64), axis=axis))
    check(S.log_softmax(x, axis=axis), sp.log_softmax(x.astype(np.float64), axis=axis))


def test_softmax_edge_values():
    x = np.array([1., 2., -np.inf], np.float32)
    check(S.softmax(x), sp.softmax(x.astype(np.float64)))
    check(S.log_softmax(x), [-np.log1p(np.e), -np.log1p(np.exp(-1)), -np.inf])
    check(S.softmax(np.arange(3)), sp.softmax(np.arange(3.)))
    check(S.softmax(np.ones((2, 3), np.float16)), np.full((2, 3), 1 / 6), F16)


# --- transformations ----------------------------------------------------------------------------
def test_gradients():
    x = sample((2, 3), -1, 1, seed=2).astype(np.float32)
    b = sample((2, 3), 0.5, 1.5, seed=3).astype(np.float32)
    check_grads(lambda v: S.logsumexp(v, axis=1), (x,), order=2)
    check_grads(lambda v, w: S.logsumexp(v, b=w), (x, b), order=2)
    check_grads(lambda v: S.softmax(v, axis=-1), (x,), order=2)
    check_grads(lambda v: S.log_softmax(v), (x,), order=2)
    pos = sample((4,), 0.3, 0.8, seed=4).astype(np.float32)
    for name, _, _ in UNARY:
        arg = pos if name in ("logit", "erfinv") else pos * 3
        check_grads(getattr(S, name), (arg,), order=2, atol=5e-2, rtol=5e-2)
    check_grads(S.xlogy, (pos, pos + 1), order=2)
    check_grads(S.xlog1py, (pos, pos), order=2)


def test_gradient_edge_values():
    g = plax.grad(S.logsumexp)
    check(g(np.array([-np.inf, 0.], np.float32)), [0., 1.])
    check(g(np.array([-np.inf, -np.inf], np.float32)), [np.nan, np.nan])  # as JAX
    check(plax.grad(lambda v: S.logsumexp(v, b=np.array([0., 1.], np.float32)))(
        np.array([5., 0.], np.float32)), [0., 1.])
    # xlogy and friends: the plain formulas, not the derivative of the x == 0 branch
    check(plax.grad(S.xlogy)(0., 0.), -np.inf), check(plax.grad(S.xlogy, 1)(0., 0.), np.nan)
    check(plax.grad(S.xlogy)(0., 1.), 0.), check(plax.grad(S.xlogy, 1)(0., 1.), 0.)
    check(plax.grad(S.xlog1py)(0., -1.), -np.inf), check(plax.grad(S.entr)(0.), np.inf)
    check(plax.grad(plax.grad(S.entr))(2.), -0.5)
    check(plax.grad(plax.grad(S.xlogy))(2., 3.), 0.)


def test_vmap_and_jit():
    x = sample((3, 4, 5), -2, 2).astype(np.float32)
    check_vmap_axes(plax.jit(lambda v: S.logsumexp(v, axis=-1)), x)
    check_vmap_axes(plax.jit(lambda v, w: S.logsumexp(v, axis=0, b=w, return_sign=True)),
                    x, np.abs(x) + 0.1)
    check_vmap_axes(plax.jit(lambda v: S.softmax(v, axis=0)), x)
    check_vmap_axes(plax.jit(S.xlogy), np.abs(x), np.abs(x) + 0.5)
    check_vmap(S.entr, np.abs(x))
    check_vmap(plax.jit(S.log_softmax), x)
    check(plax.jit(S.logsumexp, static_argnames="axis")(x, axis=1),
          sp.logsumexp(x.astype(np.float64), axis=1))


def test_make_jaxpr():
    text = str(plax.make_jaxpr(S.xlogy)(1., 2.))
    assert "custom_jvp_call" in text
    text = str(plax.make_jaxpr(S.logsumexp)(np.ones(3, np.float32)))
    assert "reduce_max" in text and "stop_gradient" in text and "sign" not in text


def test_errors():
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        S.logsumexp(np.ones(3, np.float32), b=np.ones(2, np.float32))
    with pytest.raises(TypeError, match="erf does not accept dtype complex64"):
        S.erf(np.array([1j], np.complex64))
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        S.expit([1., 2.])
    with pytest.raises(ValueError, match="out of bounds"):
        S.logsumexp(np.ones(3, np.float32), axis=1)


def test_logsumexp_where_leaves_masked_terms_out_of_the_derivative():
    x = np.array([0., 0., 0., 0., 100.], np.float32)  # exp(100) overflows float32
    g = plax.grad(lambda v: S.logsumexp(v, where=np.arange(5) < 4))(x)
    np.testing.assert_allclose(g, [0.25, 0.25, 0.25, 0.25, 0.0])


def test_xlogx_and_entr():
    from plax._src.scipy.special import _xlogx
    x = np.array([0.0, 0.5, 1.0, 3.0], np.float32)
    np.testing.assert_allclose(_xlogx(x), sp.xlogy(x, x), rtol=1e-6)
    np.testing.assert_allclose(plax.grad(_xlogx)(2.0), np.log(2.0) + 1, rtol=1e-6)
    assert float(plax.jacfwd(S.entr)(0.0)) == np.inf == float(plax.jacrev(S.entr)(0.0))


@pytest.mark.parametrize("lo,hi", [(0.01, 5.0), (0.5, 50.0), (5.0, 500.0), (20.0, 1e6),
                                   (1e-3, 1e4)])
def test_betaln_keeps_precision_when_an_argument_is_large(lo, hi):
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(lo, hi, 500).astype(np.float32) for _ in range(2))
    want = sp.betaln(a.astype(np.float64), b.astype(np.float64))
    got = np.asarray(S.betaln(a, b), np.float64)
    assert np.max(np.abs(got - want) / np.maximum(1, np.abs(want))) < 5e-6
    # betaln(x, 1) = -log(x), and its derivative -1/x, over thirty decades
    xs = np.geomspace(1, 1e30, 200).astype(np.float32)
    out, tangent = plax.jvp(S.betaln, (xs, np.float32(1)), (np.ones_like(xs), np.float32(0)))
    np.testing.assert_allclose(out, -np.log(xs.astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(tangent, -1 / xs.astype(np.float64), atol=1e-5)
