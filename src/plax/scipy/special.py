"""scipy.special on plax: logsumexp, softmax, the logistic pair, error and gamma functions,
and the x*log(y) family with derivatives that stay finite where SciPy's conventions say so.

Integer and boolean inputs are promoted to the default float type, as in JAX.
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.numpy.util import check_arraylike, promote_args_inexact
from plax.higher_order.custom_derivatives import custom_jvp
from plax.scipy.special_gamma_family import (
    bernoulli, boxcox, boxcox1p, comb, complex_gamma, gammasgn, loggamma, poch)
from plax.scipy.special_faddeeva import dawsn, erfcx, fresnel, wofz
from plax.scipy.special_integrals import owens_t, sici
from plax.scipy.special_hypergeometric import hyp1f1, hyp2f1
from plax.scipy.special_orthogonal import bessel_jn, sph_harm_y
from plax.scipy.special_common import dtype_of as _dtype, real_args

__all__ = ["logsumexp", "softmax", "log_softmax", "expit", "logit", "erf", "erfc", "erfinv",
           "gammaln", "digamma", "xlogy", "xlog1py", "entr", "gammainc", "gammaincc", "betainc",
           "zeta", "polygamma", "i0e", "i1e", "i0", "i1", "ndtr", "ndtri", "log_ndtr", "gamma",
           "beta", "betaln", "factorial", "multigammaln", "rel_entr", "kl_div", "exp1", "expi",
           "expn", "spence"]


def _inexact(name: str, x):
    (x,) = promote_args_inexact(name, x)
    return x



def _unary(lax_fn, name: str, doc: str):
    def fn(x):
        return lax_fn(_inexact(name, x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


expit = _unary(lax.logistic, "expit", "The logistic sigmoid 1 / (1 + exp(-x)).")
erf = _unary(lax.erf, "erf", "The error function.")
erfc = _unary(lax.erfc, "erfc", "The complementary error function 1 - erf(x).")
erfinv = _unary(lax.erf_inv, "erfinv", "The inverse of the error function.")
gammaln = _unary(lax.lgamma, "gammaln", "The log of the absolute value of the gamma function.")
digamma = _unary(lax.digamma, "digamma", "The digamma function, the derivative of gammaln.")


def logit(x):
    """The inverse of expit: log(x / (1 - x))."""
    x = _inexact("logit", x)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


# --- logsumexp and softmax -------------------------------------------------------------------
def _finite_shift(m):
    """The stabilising shift: the max, 0 where it is infinite or NaN, with no derivative
    (logsumexp does not depend on the shift, so its gradient must not flow through it)."""
    return lax.stop_gradient(jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m)))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over ``axis``, computed without overflow; with
    ``return_sign`` also the sign of the sum (and the log of its absolute value)."""
    if b is None:
        (a,) = promote_args_inexact("logsumexp", a)
    else:
        shape = jnp.broadcast_shapes(jnp.shape(a), jnp.shape(b))  # ValueError, as in JAX
        a, b = promote_args_inexact("logsumexp", a, b)
        # Terms with weight 0 are left out (as -inf), so that they neither set the shift
        # (which would leave the others to underflow and the derivatives to overflow) nor
        # turn 0 * inf into nan.
        a = jnp.where(jnp.not_equal(b, 0), a, -np.inf)
        a = jnp.broadcast_to(a, shape)
    if where is not None:  # masked terms are left out as -inf too: their exp cannot overflow
        a = jnp.where(where, a, -np.inf)  # (which would make the derivatives nan)
    is_complex = dtypes.is_complex(_dtype(a))
    real_a = jnp.real(a) if is_complex else a
    shift = _finite_shift(jnp.max(real_a, axis=axis, keepdims=True, where=where,
                                  initial=-np.inf))
    terms = jnp.exp(lax.sub(a, lax.convert_element_type(shift, _dtype(a))) if is_complex
                    else jnp.subtract(a, shift))
    if b is not None:
        terms = jnp.multiply(terms, b)
    total = jnp.sum(terms, axis=axis, keepdims=keepdims, where=where)
    shift = shift if keepdims else jnp.squeeze(shift, axis=axis)
    if is_complex and not return_sign:
        return jnp.add(jnp.log(total), lax.convert_element_type(shift, _dtype(total)))
    out = jnp.add(jnp.log(jnp.abs(total)), shift)
    if return_sign:
        return out, jnp.sign(total)
    if b is not None:  # a negative sum has no real log
        out = jnp.where(jnp.less(total, 0), jnp.full_like(out, np.nan), out)
    return out


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over ``axis`` (all axes when None, as in SciPy)."""
    x = _inexact("softmax", x)
    shift = lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    unnormalized = jnp.exp(jnp.subtract(x, shift))
    return jnp.divide(unnormalized, jnp.sum(unnormalized, axis=axis, keepdims=True))


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over ``axis`` (all axes when None, as in SciPy)."""
    x = _inexact("log_softmax", x)
    shifted = jnp.subtract(x, lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True)))
    return jnp.subtract(shifted, jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True)))


# --- x * log(y) and entropy -----------------------------------------------------------------
# These follow the convention 0 * log(0) = 0 for the value, while the derivatives are the
# plain formulas (log(y) and x / y), as JAX defines them: custom rules, since differentiating
# the select would give the derivative of the constant branch.
@custom_jvp
def _xlogy(x, y):
    keep = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(keep, jnp.multiply(x, jnp.log(y)), jnp.zeros_like(jnp.multiply(x, y)))


_xlogy.defjvps(lambda tx, ans, x, y: jnp.broadcast_to(jnp.multiply(tx, jnp.log(y)), jnp.shape(ans)),
               lambda ty, ans, x, y: jnp.broadcast_to(jnp.multiply(ty, jnp.divide(x, y)),
                                                      jnp.shape(ans)))


@custom_jvp
def _xlog1py(x, y):
    keep = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(keep, jnp.multiply(x, jnp.log1p(y)), jnp.zeros_like(jnp.multiply(x, y)))


_xlog1py.defjvps(
    lambda tx, ans, x, y: jnp.broadcast_to(jnp.multiply(tx, jnp.log1p(y)), jnp.shape(ans)),
    lambda ty, ans, x, y: jnp.broadcast_to(
        jnp.multiply(ty, jnp.divide(x, jnp.add(y, jnp.ones_like(y)))), jnp.shape(ans)))


def xlogy(x, y):
    """x * log(y), with 0 where x == 0 (unless y is NaN)."""
    return _xlogy(*promote_args_inexact("xlogy", x, y))


def xlog1py(x, y):
    """x * log1p(y), with 0 where x == 0 (unless y is NaN)."""
    return _xlog1py(*promote_args_inexact("xlog1py", x, y))


@custom_jvp
def _xlogx(x):
    """x log(x), 0 at 0 (as xlogy(x, x)); its derivative log(x) + 1 (JAX's private helper,
    behind entr)."""
    return jnp.where(jnp.equal(x, 0), jnp.zeros_like(x), jnp.multiply(x, jnp.log(x)))


_xlogx.defjvps(lambda t, ans, x: jnp.multiply(t, jnp.add(jnp.log(x), 1)))


def entr(x):
    """Elementwise entropy term: -x log(x) for x > 0, 0 at 0 and -inf for x < 0."""
    x = _inexact("entr", x)
    return jnp.where(jnp.less(x, 0), jnp.full_like(x, -np.inf), jnp.negative(_xlogx(x)))


# --- incomplete gamma and beta, zeta, polygamma, Bessel ------------------------------------
def _broadcast_inexact(name, *args):
    args = promote_args_inexact(name, *args)
    return jnp.broadcast_arrays(*args) if len(args) > 1 else args


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return lax.igamma(*_broadcast_inexact("gammainc", a, x))


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return lax.igammac(*_broadcast_inexact("gammaincc", a, x))


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    return lax.betainc(*_broadcast_inexact("betainc", a, b, x))


# d/ds zeta(s, q) = -sum over n >= 0 of log(n + q) (n + q)**-s, by Euler-Maclaurin: the first
# _ZETA_HEAD terms summed, the rest as the derivative of (with a = q + _ZETA_HEAD)
#   a**(1-s) / (s-1) + a**-s / 2 + sum_k B_2k / (2k)! s (s+1) ... (s+2k-2) a**(1-s-2k),
# whose k-th term shrinks like (s + 2k)**2 / (2 pi a)**2 per step.
_ZETA_HEAD = 12
_BERNOULLI_EVEN = [(1, 6), (-1, 30), (1, 42), (-1, 30), (5, 66), (-691, 2730), (7, 6),
                   (-3617, 510), (43867, 798), (-174611, 330), (854513, 138),
                   (-236364091, 2730)]      # B_2, B_4, ..., B_24
_ZETA_TAIL_COEFFS = [n / d / math.factorial(2 * k + 2)
                     for k, (n, d) in enumerate(_BERNOULLI_EVEN)]


def _zeta_ds(s, q):
    """The derivative of the Hurwitz zeta function in s (same-shape, same-dtype s and q)."""
    s, q = jnp.asarray(s), jnp.asarray(q)
    dt = _dtype(s)
    log_t = jnp.log(q[..., None] + np.arange(_ZETA_HEAD, dtype=dt))
    head = jnp.sum(log_t * jnp.exp(jnp.negative(s[..., None]) * log_t), axis=-1)
    a = q + _ZETA_HEAD
    log_a = jnp.log(a)
    power = jnp.exp((1 - s) * log_a)                       # a**(1-s)
    inv_sm1 = 1 / (s - 1)
    tail = power * inv_sm1 * (log_a + inv_sm1) + log_a * power / (2 * a)
    inv_a2 = 1 / jnp.square(a)
    poly, d_poly = s, jnp.ones_like(s)                     # s (s+1) ... (s+2k-2) and its s-slope
    for k, c in enumerate(_ZETA_TAIL_COEFFS):
        power = power * inv_a2                              # a**(1-s-2k) for term k + 1
        tail = tail + c * power * (log_a * poly - d_poly)
        for j in (2 * k + 1, 2 * k + 2):
            poly, d_poly = poly * (s + j), d_poly * (s + j) + poly
    return jnp.negative(head + tail).astype(dt)


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


# d/dq zeta(x, q) = -x zeta(x + 1, q)
_zeta.defjvps(lambda t, ans, x, q: t * _zeta_ds(x, q),
              lambda t, ans, x, q: t * jnp.negative(x) * _zeta(x + 1, q))


def zeta(x, q=None):
    """The Hurwitz zeta function sum over n >= 0 of (n + q)**-x (Riemann's when q is None);
    differentiable in both arguments."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None "
                                  "to compute the Hurwitz Zeta function.")
    return _zeta(*_broadcast_inexact("zeta", x, q))


def polygamma(n, x):
    """The n-th derivative of digamma; ``n`` must have an integer dtype."""
    if not dtypes.issubdtype(_dtype(n), np.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{_dtype(n)}.")
    n_f, x = _broadcast_inexact("polygamma", n, x)
    return lax.polygamma(n_f, x)


i0e = _unary(lax.bessel_i0e, "i0e", "The exponentially scaled modified Bessel function I0.")
i1e = _unary(lax.bessel_i1e, "i1e", "The exponentially scaled modified Bessel function I1.")


def i0(x):
    """The modified Bessel function of order 0."""
    x = _inexact("i0", x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def i1(x):
    """The modified Bessel function of order 1."""
    x = _inexact("i1", x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x))


# --- the normal distribution ---------------------------------------------------------------
def ndtr(x):
    """The standard normal CDF."""
    x = _inexact("ndtr", x)
    half = lax.full_like(x, 0.5)
    return lax.mul(half, lax.erfc(lax.mul(lax.neg(x), lax.full_like(x, np.sqrt(0.5)))))


@custom_jvp
def _ndtri(p):
    dt = _dtype(p)
    # The lower-tail probability q = min(p, 1 - p) (1 - p is exact above 1/2), a rational
    # first guess in t = sqrt(-2 log q) (Abramowitz and Stegun 26.2.23, error below 5e-4),
    # then Newton steps on log_ndtr(x) = log(q), accurate far into the tail.
    upper = jnp.greater(p, 0.5)
    q = jnp.where(upper, jnp.subtract(1, p), p)
    inside = jnp.logical_and(jnp.greater(q, 0), jnp.less_equal(q, 0.5))
    q = jnp.where(inside, q, 0.25).astype(dt)
    t = jnp.sqrt(jnp.multiply(-2, jnp.log(q)))
    num = 2.515517 + t * (0.802853 + t * 0.010328)
    den = 1 + t * (1.432788 + t * (0.189269 + t * 0.001308))
    x = jnp.negative(t - num / den).astype(dt)
    log_q = jnp.log(q)
    for _ in range(3):
        log_phi = -0.5 * jnp.square(x) - 0.5 * np.log(2 * np.pi)
        ln = log_ndtr(x)
        x = (x - (ln - log_q) * jnp.exp(ln - log_phi)).astype(dt)
    x = jnp.where(upper, jnp.negative(x), x)
    x = jnp.where(jnp.equal(p, 0), -np.inf, jnp.where(jnp.equal(p, 1), np.inf, x))
    outside = jnp.logical_or(jnp.less(p, 0), jnp.greater(p, 1))
    return jnp.where(jnp.logical_or(outside, jnp.isnan(p)), np.nan, x).astype(dt)


def _ndtri_jvp(t, ans, p):
    # 1 / phi(ndtri(p)); at p = 0 and 1, where ndtri is infinite, 0 as in JAX (whose ndtri
    # is differentiated through the branch that returns the constant infinity)
    infinite = jnp.isinf(ans)
    safe = jnp.where(infinite, 0, ans)
    slope = jnp.multiply(np.sqrt(2 * np.pi), jnp.exp(jnp.multiply(0.5, jnp.square(safe))))
    return jnp.multiply(t, jnp.where(infinite, 0, slope).astype(_dtype(ans)))


_ndtri.defjvps(_ndtri_jvp)


def ndtri(p):
    """The inverse of ndtr: the standard normal quantile of ``p`` (NaN outside [0, 1])."""
    return _ndtri(_inexact("ndtri", p))


def _log_ndtr_switch(dtype):
    """Below this, log_ndtr uses the asymptotic series; above, log(ndtr(x)) is accurate
    (its tail value stays a normal number of the dtype, with full relative precision)."""
    return {8: -20.0, 4: -10.0}.get(np.dtype(dtype).itemsize, -8.0)


@custom_jvp
def _log_ndtr_mid(x):
    """log(ndtr(x)) where ndtr(x) is not tiny (log_ndtr's middle range)."""
    return jnp.log(ndtr(x))


@_log_ndtr_mid.defjvp
def _log_ndtr_mid_jvp(primals, tangents):
    # The derivative phi(x) / ndtr(x) as exp(log phi(x) - log ndtr(x)): differentiated again
    # it stays a ratio of logs, where the plain quotient rule would square ndtr(x) (which
    # underflows near the series switch in float32, making the second derivative -inf).
    (x,), (t,) = primals, tangents
    out = _log_ndtr_mid(x)
    log_phi = jnp.subtract(jnp.multiply(-0.5, jnp.square(x)), 0.5 * np.log(2 * np.pi))
    return out, jnp.multiply(t, jnp.exp(jnp.subtract(log_phi, out)))


def log_ndtr(x, series_order=3):
    """The log of the standard normal CDF, accurate far into both tails."""
    if not isinstance(series_order, int) or isinstance(series_order, bool):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x = _inexact("log_ndtr", x)
    switch = _log_ndtr_switch(_dtype(x))
    lower = jnp.less(x, switch)
    upper = jnp.greater(x, 0.0)
    mid_x = jnp.where(lower | upper, 0.0, x).astype(_dtype(x))
    mid = _log_ndtr_mid(mid_x)
    up_x = jnp.where(upper, x, 1.0).astype(_dtype(x))
    up = jnp.log1p(jnp.negative(ndtr(jnp.negative(up_x))))  # log(1 - q), q the upper tail
    lo_x = jnp.where(lower, x, switch - 1).astype(_dtype(x))
    x2 = jnp.square(lo_x)
    # log(phi(x) / -x) plus the log of the asymptotic series 1 - 1/x**2 + 3/x**4 - ...
    series = jnp.ones_like(lo_x)
    term = jnp.ones_like(lo_x)
    for k in range(1, series_order + 1):
        term = jnp.multiply(term, jnp.negative(jnp.divide(2 * k - 1, x2)))
        series = jnp.add(series, term)
    lo = (jnp.negative(jnp.multiply(0.5, x2)) - jnp.log(jnp.negative(lo_x))
          - 0.5 * np.log(2 * np.pi) + jnp.log(series)).astype(_dtype(x))
    return jnp.where(lower, lo, jnp.where(upper, up, mid))


# --- gamma and beta --------------------------------------------------------------------------
def _gamma_sign(x):
    """The sign of gamma(x): +1 for x > 0, alternating between the negative integers, and
    that of zero at zero (gamma(-0.0) = -inf)."""
    floor_odd = jnp.not_equal(jnp.remainder(jnp.floor(x), 2), 0)
    sign = jnp.where(jnp.logical_or(jnp.greater(x, 0), jnp.logical_not(floor_odd)),
                     jnp.ones_like(x), -jnp.ones_like(x))
    return jnp.where(jnp.equal(x, 0), jnp.copysign(jnp.ones_like(x), x), sign)


def gamma(x):
    """The gamma function (+-inf at +-0, NaN at the negative integers); complex x too."""
    x = _inexact("gamma", x)
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        return complex_gamma(x)
    out = jnp.multiply(_gamma_sign(x), jnp.exp(lax.lgamma(x)))
    neg_int = jnp.logical_and(jnp.less(x, 0), jnp.equal(jnp.floor(x), x))
    return jnp.where(neg_int, np.nan, out)


# The asymptotic (Stirling) series of lgamma: coefficients of 1/x, 1/x^3, 1/x^5, ...
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)


def _stirling_correction(x):
    """lgamma(x) minus Stirling's (x - 1/2) log x - x + log(2 pi) / 2, for x >= 10 (seven
    terms of the asymptotic series: error below 1e-16 there)."""
    r = jnp.reciprocal(x)
    r2 = jnp.square(r)
    acc = jnp.full_like(r, _STIRLING[-1])
    for c in _STIRLING[-2::-1]:
        acc = acc * r2 + c
    return r * acc


def betaln(a, b):
    """The log of the absolute value of the beta function. For positive arguments of which
    one is large, Stirling's series of the lgamma differences, which cancel badly when
    subtracted directly (betaln(x, 1) = -log x to rounding over any range of x)."""
    a, b = _broadcast_inexact("betaln", a, b)
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    direct = lax.sub(lax.add(lax.lgamma(a), lax.lgamma(b)), lax.lgamma(lax.add(a, b)))
    one_big = jnp.logical_and(jnp.greater(lo, 0), jnp.greater_equal(hi, 10))
    both_big = jnp.greater_equal(lo, 10)
    corr = _stirling_correction
    # (safe stand-ins where a branch is not taken: its derivatives stay finite)
    h = jnp.where(one_big, hi, 10)
    l1 = jnp.where(one_big, lo, 1)
    s1 = l1 + h
    # lgamma(lo) + [lgamma(hi) - lgamma(lo + hi)], the bracket by Stirling's series
    small_big = (lax.lgamma(l1) + l1 - (h - 0.5) * jnp.log1p(l1 / h) - l1 * jnp.log(s1)
                 + corr(h) - corr(s1))
    l2 = jnp.where(both_big, lo, 10)
    h2 = jnp.where(both_big, hi, 10)
    s2 = l2 + h2
    big_big = (float(0.5 * np.log(2 * np.pi)) - 0.5 * jnp.log(s2) + (l2 - 0.5) * jnp.log(l2 / s2)
               - (h2 - 0.5) * jnp.log1p(l2 / h2) + corr(l2) + corr(h2) - corr(s2))
    return jnp.where(both_big, big_big, jnp.where(one_big, small_big, direct))


def beta(a, b):
    """The beta function gamma(a) gamma(b) / gamma(a + b)."""
    a, b = _broadcast_inexact("beta", a, b)
    sign = jnp.multiply(jnp.multiply(_gamma_sign(a), _gamma_sign(b)), _gamma_sign(a + b))
    return jnp.multiply(sign, jnp.exp(betaln(a, b)))


def factorial(n, exact=False):
    """n! as gamma(n + 1), 0 for negative n; ``exact=True`` is not supported."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n = _inexact("factorial", n)
    return jnp.where(jnp.less(n, 0), 0, jnp.exp(lax.lgamma(jnp.add(n, 1)))).astype(_dtype(n))


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d`` (a static integer)."""
    d = core_concrete_int(d)
    a = _inexact("multigammaln", a)
    dt = _dtype(a)
    consts = np.asarray(d * (d - 1) / 4 * np.log(np.pi), dt)
    offsets = np.arange(d, dtype=dt) / np.asarray(2, dt)
    offsets = offsets.reshape((1,) * jnp.ndim(a) + offsets.shape)  # (ranks explicit)
    terms = lax.lgamma(jnp.subtract(jnp.expand_dims(a, -1), offsets))
    return jnp.add(jnp.sum(terms, axis=-1), consts)


def core_concrete_int(d):
    try:
        value = int(d)
    except Exception:
        raise TypeError("d must be a concrete integer for multigammaln (it sets the number "
                        "of terms).") from None
    if value != d:
        raise ValueError(f"d must be an integer, got {d}.")
    return value


# --- relative entropy -------------------------------------------------------------------------
def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 where p == 0 and q >= 0; inf otherwise."""
    p, q = _broadcast_inexact("rel_entr", p, q)
    both_pos = jnp.logical_and(jnp.greater(p, 0), jnp.greater(q, 0))
    safe_p = jnp.where(both_pos, p, 1)
    safe_q = jnp.where(both_pos, q, 1)
    val = jnp.multiply(safe_p, jnp.log(jnp.divide(safe_p, safe_q)))
    zero = jnp.logical_and(jnp.equal(p, 0), jnp.greater_equal(q, 0))
    out = jnp.where(both_pos, val, jnp.where(zero, 0, np.inf))
    return out.astype(_dtype(p))


def kl_div(p, q):
    """p log(p / q) - p + q for p, q > 0; q where p == 0 and q >= 0; inf otherwise."""
    p, q = _broadcast_inexact("kl_div", p, q)
    both_pos = jnp.logical_and(jnp.greater(p, 0), jnp.greater(q, 0))
    safe_p = jnp.where(both_pos, p, 1)
    safe_q = jnp.where(both_pos, q, 1)
    val = jnp.add(jnp.subtract(jnp.multiply(safe_p, jnp.log(jnp.divide(safe_p, safe_q))),
                               safe_p), safe_q)
    zero = jnp.logical_and(jnp.equal(p, 0), jnp.greater_equal(q, 0))
    out = jnp.where(both_pos, val, jnp.where(zero, q, np.inf))
    return out.astype(_dtype(p))


# --- exponential integrals ----------------------------------------------------------------------
# E_n(x) = integral from 1 to inf of exp(-x t) / t**n dt (x > 0, n = 0, 1, 2, ...), E1 = E_1,
# and Ei(x) = principal value of the integral from -inf to x of exp(t) / t = -E1(-x) for x < 0.
_EXPN_SERIES_TERMS = 24      # x <= 1: x**k / k! falls below double eps well before k = 24
_FRACTION_MAX_STEPS = 500    # x > 1: the continued fraction needs under 100 steps (at x = 1)
_EI_ASYMPTOTIC_FROM = 40.0   # from here the asymptotic series' smallest term is below 1e-16


# For integer n >= 1: 1 / (n-1)! and psi(n) = -euler_gamma + 1 + 1/2 + ... + 1/(n-1), exactly
# (lax's lgamma and digamma are a few float32 ulps off at integers, which the series' cancellation
# near x = 1 would magnify). Past n = 40 the series' lead term is below 1e-46: it is dropped.
_LEAD_TERMS = 40
_INV_FACTORIAL = np.array([1 / math.factorial(k) for k in range(_LEAD_TERMS)])
_PSI_AT_INTEGERS = -np.euler_gamma + np.concatenate([[0.0], np.cumsum(
    1 / np.arange(1, _LEAD_TERMS, dtype=float))])


def _expn_series(n, x):
    """E_n(x) for 0 < x <= 1 and integer n >= 1, from its power series:
    (-x)**(n-1) / (n-1)! (psi(n) - log x) - sum over k != n-1 of (-x)**k / ((k-n+1) k!)."""
    dt = _dtype(x)
    log_x = jnp.log(x)
    index = jnp.clip(n - 1, 0, _LEAD_TERMS - 1).astype(np.int32)
    inv_factorial = jnp.take(_INV_FACTORIAL.astype(dt), index)
    psi = jnp.take(_PSI_AT_INTEGERS.astype(dt), index)
    odd = jnp.equal(jnp.remainder(n - 1, 2), 1)
    lead = jnp.where(odd, -1.0, 1.0) * jnp.exp((n - 1) * log_x) * inv_factorial * (psi - log_x)
    lead = jnp.where(jnp.greater(n, _LEAD_TERMS), 0.0, lead)

    def add_term(k, state):                     # term = (-x)**k / k!
        term, total = state
        term = term * jnp.negative(x) / k
        denom = k - n + 1
        hit = jnp.equal(denom, 0)
        return term, total + jnp.where(hit, 0.0, term / jnp.where(hit, 1.0, denom))

    ones = jnp.ones_like(x)
    first = jnp.where(jnp.equal(n, 1), 0.0, ones / (1 - n))       # k = 0
    total = lax.fori_loop(1, _EXPN_SERIES_TERMS, add_term, (ones, first.astype(dt)))[1]
    return (lead - total).astype(dt)


def _expn_fraction(n, x):
    """E_n(x) for x > 1 and integer n >= 1: exp(-x) times the continued fraction
    1 / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...))), evaluated forwards
    (modified Lentz) until each element's step changes it by less than eps."""
    finfo = dtypes.finfo(_dtype(x))
    eps, huge = float(finfo.eps), float(1 / finfo.tiny)

    def step(state):
        i, b, c, d, h, _ = state
        a = jnp.negative(i * (n - 1 + i))
        b = b + 2
        d = 1 / (a * d + b)
        c = b + a / c
        delta = c * d
        return i + 1, b, c, d, h * delta, jnp.all(jnp.abs(delta - 1) < eps)

    def going(state):
        return jnp.logical_and(jnp.logical_not(state[5]), state[0] < _FRACTION_MAX_STEPS)

    b = x + n
    init = (jnp.ones((), _dtype(x)), b, jnp.full_like(x, huge), 1 / b, 1 / b,
            jnp.zeros((), bool))
    h = lax.while_loop(going, step, init)[4]
    return h * jnp.exp(jnp.negative(x))


def _expn_positive(n, x):
    """E_n(x) for integer n >= 1 and finite x > 0 (other elements give garbage)."""
    small = jnp.less_equal(x, 1)
    xs = jnp.where(small, x, 0.5).astype(x.dtype)
    xl = jnp.where(small, 2.0, x).astype(x.dtype)
    nn = jnp.maximum(n, 1)
    return jnp.where(small, _expn_series(nn, xs), _expn_fraction(nn, xl))


@custom_jvp
@jit
def _expn(n, x):
    n, x = jnp.asarray(n), jnp.asarray(x)
    n = jnp.trunc(n)                            # as SciPy: a float order is truncated
    finite_pos = jnp.logical_and(jnp.greater(x, 0), jnp.isfinite(x))
    safe_x = jnp.where(finite_pos, x, 1.0).astype(x.dtype)
    out = _expn_positive(n, safe_x)
    out = jnp.where(jnp.equal(n, 0), jnp.exp(jnp.negative(safe_x)) / safe_x, out)
    # the edges: E_n(0) = 1 / (n - 1) (inf for n <= 1), E_n(inf) = 0, NaN for n < 0 or x < 0
    at_zero = jnp.where(jnp.greater(n, 1), 1 / jnp.maximum(n - 1, 1), np.inf)
    out = jnp.where(jnp.equal(x, 0), at_zero, out)
    out = jnp.where(jnp.isposinf(x), 0.0, out)
    bad = jnp.logical_or(jnp.less(n, 0), jnp.logical_not(jnp.greater_equal(x, 0)))
    return jnp.where(jnp.logical_or(bad, jnp.isnan(n)), np.nan, out).astype(x.dtype)


def _expn_jvp(primals, tangents):
    n, x = primals
    _, x_dot = tangents
    # d/dx E_n = -E_{n-1}; for n = 0, d/dx (exp(-x) / x) = -exp(-x) (1 + x) / x**2
    below = jnp.where(jnp.equal(jnp.trunc(n), 0),
                      jnp.exp(jnp.negative(x)) * (1 + x) / jnp.square(x),
                      _expn(jnp.maximum(n - 1, 0), x))
    return _expn(n, x), jnp.negative(below) * x_dot


_expn.defjvp(_expn_jvp)



def expn(n, x):
    """The generalized exponential integral E_n(x), the integral from 1 to inf of
    exp(-x t) / t**n dt, for integer n >= 0 (a float n is truncated, as SciPy does) and
    x >= 0; NaN elsewhere. Differentiable in x (d/dx E_n = -E_{n-1}); n gets no derivative."""
    n, x = real_args("expn", n, x, broadcast=False)
    n, x = jnp.broadcast_arrays(n, x)
    return _expn(n, x)


def exp1(x):
    """The exponential integral E1(x), the integral from x to inf of exp(-t) / t (x >= 0;
    NaN for x < 0). Its derivative is -exp(-x) / x."""
    (x,) = real_args("exp1", x, broadcast=False)
    return _expn(jnp.ones_like(x), x)


def _ei_series(x):
    """Ei(x) for 0 < x < 40: euler_gamma + log x + sum over k >= 1 of x**k / (k k!), summed
    until each element's next term is below eps of its sum (all terms are positive)."""
    eps = float(dtypes.finfo(_dtype(x)).eps)

    def step(state):
        k, term, total, _ = state
        term = term * x / k
        total = total + term / k
        return k + 1, term, total, jnp.all(term < eps * k * total)

    def going(state):
        return jnp.logical_not(state[3])

    init = (jnp.ones((), _dtype(x)), jnp.ones_like(x), jnp.zeros_like(x), jnp.zeros((), bool))
    total = lax.while_loop(going, step, init)[2]
    return (np.euler_gamma + jnp.log(x)) + total


def _ei_asymptotic(x):
    """Ei(x) for x >= 40: exp(x) / x times sum over k < 40 of k! / x**k (the terms shrink
    while k < x); exp(x - log x) rather than exp(x) / x, so as not to overflow early."""
    def add_term(k, state):
        term, total = state
        term = term * k / x
        return term, total + term

    ones = jnp.ones_like(x)
    total = lax.fori_loop(1, int(_EI_ASYMPTOTIC_FROM), add_term, (ones, ones))[1]
    return jnp.exp(x - jnp.log(x)) * total


@custom_jvp
@jit
def _expi(x):
    x = jnp.asarray(x)
    neg = jnp.less(x, 0)
    big = jnp.greater_equal(x, _EI_ASYMPTOTIC_FROM)
    mid = jnp.logical_and(jnp.greater(x, 0), jnp.less(x, _EI_ASYMPTOTIC_FROM))
    e1 = _expn(jnp.ones_like(x), jnp.where(neg, jnp.negative(x), 1.0).astype(x.dtype))
    series = _ei_series(jnp.where(mid, x, 1.0).astype(x.dtype))
    asym = _ei_asymptotic(jnp.where(big, x, _EI_ASYMPTOTIC_FROM).astype(x.dtype))
    out = jnp.where(neg, jnp.negative(e1), jnp.where(big, asym, series))
    # Ei(0) = -inf (from either side), Ei(inf) = inf, Ei(nan) = nan
    out = jnp.where(jnp.isposinf(x), np.inf, out)
    return jnp.where(jnp.equal(x, 0), -np.inf, jnp.where(jnp.isnan(x), np.nan, out)
                     ).astype(x.dtype)


_expi.defjvps(lambda t, ans, x: t * jnp.exp(x) / x)


def expi(x):
    """The exponential integral Ei(x), the principal value of the integral from -inf to x of
    exp(t) / t; -E1(-x) for x < 0. Its derivative is exp(x) / x."""
    (x,) = real_args("expi", x, broadcast=False)
    return _expi(x)


# --- Spence's function (the dilogarithm) -------------------------------------------------------
def _even_bernoulli(count):
    """B_2, B_4, ..., B_{2 count} as exact fractions (the Akiyama-Tanigawa recurrence)."""
    from fractions import Fraction
    out, a = [], []
    for m in range(2 * count + 1):
        a.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        if m >= 2 and m % 2 == 0:
            out.append(a[0])
    return out


# Li2(u) = w - w**2 / 4 + sum_k B_2k w**(2k + 1) / (2k + 1)! with w = -log(1 - u): for
# |w| <= log 2 the terms shrink by (w / 2 pi)**2 each, so nine reach double precision.
_LI2_COEFFS = tuple(float(b / np.prod(np.arange(1, 2 * k + 2, dtype=float)))
                    for k, b in enumerate(_even_bernoulli(9), start=1))
_PI2_6 = float(np.pi ** 2 / 6)


def _li2_series(w):
    """Li2(1 - exp(-w)) for |w| <= log 2."""
    w2 = jnp.square(w)
    acc = jnp.zeros_like(w)
    for c in reversed(_LI2_COEFFS):
        acc = jnp.multiply(jnp.add(acc, c), w2)
    return jnp.add(jnp.subtract(w, jnp.multiply(0.25, w2)), jnp.multiply(w, acc))


@custom_jvp
def _spence(x):
    dt = _dtype(x)
    # spence(x) = Li2(1 - x), reduced to the series' range: directly for 1/2 <= x <= 2
    # (w = -log x); by reflection, Li2(u) = pi**2/6 - log(u) log(1 - u) - Li2(1 - u), for
    # x < 1/2; by inversion, Li2(u) = -pi**2/6 - log(-u)**2 / 2 - Li2(1/u), for x > 2.
    low, high = jnp.less(x, 0.5), jnp.greater(x, 2)
    xm = jnp.where(low | high, 1, x).astype(dt)
    mid = _li2_series(jnp.negative(jnp.log(xm)))
    xl = jnp.where(jnp.logical_and(low, jnp.greater(x, 0)), x, 0.25).astype(dt)
    lo = (_PI2_6 - jnp.log1p(jnp.negative(xl)) * jnp.log(xl)
          - _li2_series(jnp.negative(jnp.log1p(jnp.negative(xl))))).astype(dt)
    xh = jnp.where(high, x, 4).astype(dt)
    hi = (-_PI2_6 - 0.5 * jnp.square(jnp.log(xh - 1))
          - _li2_series(jnp.log1p(jnp.negative(jnp.reciprocal(xh))))).astype(dt)
    out = jnp.where(low, lo, jnp.where(high, hi, mid))
    out = jnp.where(jnp.equal(x, 0), _PI2_6, jnp.where(jnp.equal(x, 1), 0, out))
    # (NaN below 0 and, as in SciPy, at +inf)
    return jnp.where(jnp.logical_or(jnp.less(x, 0), jnp.isinf(x)), np.nan, out).astype(dt)


def _spence_derivative(x):
    """log(x) / (1 - x); near x = 1 the series -(1 - u/2 + u**2/3 - ...) in u = x - 1, which
    also gives the higher derivatives there."""
    dt = _dtype(x)
    u = jnp.subtract(x, 1)
    near = jnp.less(jnp.abs(u), 1e-3)
    un = jnp.where(near, u, 0).astype(dt)
    series = jnp.zeros_like(un)
    for k in range(6, 0, -1):
        series = jnp.add(jnp.multiply(series, jnp.negative(un)), 1 / k)
    safe = jnp.where(near, 2, x).astype(dt)
    exact = jnp.divide(jnp.log(safe), jnp.subtract(1, safe))
    return jnp.where(near, jnp.negative(series), exact).astype(dt)


_spence.defjvps(lambda t, ans, x: jnp.multiply(t, _spence_derivative(x)))


def spence(x):
    """Spence's function, the integral from 1 to x of log(t) / (1 - t) dt (real x >= 0;
    NaN for negative x). Floating-point input only."""
    check_arraylike("spence", x)
    dt = dtypes.result_type(x)
    if not dtypes.issubdtype(dt, np.floating):
        raise TypeError(f"x.dtype={dtypes.canonicalize_dtype(dt).name} is not supported, see "
                        "docstring for supported types.")
    return _spence(jnp.asarray(x))


__all__ += ["bernoulli", "boxcox", "boxcox1p", "comb", "gammasgn", "loggamma", "poch", "dawsn",
            "erfcx", "fresnel", "wofz", "owens_t", "sici", "hyp1f1", "hyp2f1", "bessel_jn",
            "sph_harm_y"]
