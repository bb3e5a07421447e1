"""scipy.special's gamma-related extras on plax: gammasgn, loggamma, poch, comb, the Box-Cox
transforms and the Bernoulli numbers."""
from __future__ import annotations

import functools
import operator
from fractions import Fraction

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.higher_order.custom_derivatives import custom_jvp
from plax.numpy.util import promote_args_inexact
from plax.scipy.special_common import dtype_of as _dtype, real_args as _real

__all__ = ["gammasgn", "loggamma", "poch", "comb", "boxcox", "boxcox1p", "bernoulli"]




def _is_nonpositive_integer(x):
    return jnp.logical_and(jnp.less_equal(x, 0), jnp.equal(jnp.floor(x), x))


def gammasgn(x):
    """The sign of the gamma function: +1 or -1, and NaN at the poles (0 and the negative
    integers count by the sign of zero: gammasgn(0.0) = 1, gammasgn(-0.0) = -1) and at -inf."""
    (x,) = _real("gammasgn", x)
    odd_floor = jnp.not_equal(jnp.remainder(jnp.floor(x), 2), 0)
    sign = jnp.where(jnp.logical_and(jnp.less(x, 0), odd_floor), -1.0, 1.0).astype(_dtype(x))
    sign = jnp.where(jnp.equal(x, 0), jnp.copysign(jnp.ones_like(x), x), sign)
    pole = jnp.logical_and(jnp.less(x, 0), jnp.equal(jnp.floor(x), x))
    return lax.stop_gradient(jnp.where(jnp.logical_or(pole, jnp.isnan(x)), np.nan, sign)
                             .astype(_dtype(x)))


def loggamma(x):
    """The principal branch of log(gamma(x)). For real ``x`` this is gammaln(x) for x > 0 and
    NaN for x <= 0; for complex ``x`` the analytic continuation from the positive reals, cut
    along the negative real axis (NaN at the poles and at infinity)."""
    (x,) = promote_args_inexact("loggamma", x)
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        return _complex_loggamma(x)
    return jnp.where(jnp.greater(x, 0), lax.lgamma(x), np.nan)


# log(gamma(w)) for Re w >= 10 by Stirling's series (w - 1/2) log w - w + log(2 pi) / 2 +
# sum_k B_2k / (2k (2k - 1) w**(2k - 1)); ten terms reach double precision there. Smaller
# arguments are shifted up by the recurrence loggamma(z) = loggamma(z + 1) - log(z), which
# holds for the principal branch everywhere off the poles.
_STIRLING_FROM = 10.0
_STIRLING_TERMS = 10


def _stirling_coefficients():
    b = _bernoulli_fractions(2 * _STIRLING_TERMS)
    return [float(b[2 * k] / (2 * k * (2 * k - 1))) for k in range(1, _STIRLING_TERMS + 1)]


@jit
def _complex_loggamma(z):
    z = z + 0  # a -0.0 imaginary part becomes +0.0: the cut takes the same value from both
    re, im = jnp.real(z), jnp.imag(z)
    pole = jnp.equal(im, 0) & jnp.less_equal(re, 0) & jnp.equal(jnp.floor(re), re)
    bad = pole | jnp.logical_not(jnp.isfinite(re) & jnp.isfinite(im))
    z = jnp.where(bad, 1.0, z).astype(_dtype(z))
    shifts = jnp.maximum(jnp.ceil(_STIRLING_FROM - jnp.real(z)), 0)

    def going(state):
        return jnp.any(state[0] < shifts)

    def step(state):
        k, logs = state
        return k + 1, logs + jnp.where(k < shifts, jnp.log(z + k), 0.0)

    init = (jnp.zeros((), _dtype(re)), jnp.zeros_like(z))
    _, logs = lax.while_loop(going, step, init)
    w = z + shifts
    inverse, inverse_sq = 1 / w, 1 / jnp.square(w)
    series = jnp.zeros_like(w)
    for c in reversed(_stirling_coefficients()):
        series = series * inverse_sq + c
    out = ((w - 0.5) * jnp.log(w) - w + 0.5 * np.log(2 * np.pi) + series * inverse) - logs
    return jnp.where(bad, complex(np.nan, np.nan), out).astype(_dtype(z))


# gamma(z) for complex z: for Re z >= 1/2, exp(loggamma(z + 10) - sum_k<10 log(z + k)) with
# Stirling's series at z + 10; below, the reflection gamma(z) = pi / (sin(pi z) gamma(1 - z)).
# A fixed number of shifts keeps it differentiable in both modes.
_COMPLEX_GAMMA_SHIFTS = 10


def complex_gamma(z):
    """gamma(z) for complex z: NaN + NaN i at the poles 0, -1, -2, ..."""
    dt = _dtype(z)
    re, im = jnp.real(z), jnp.imag(z)
    pole = jnp.equal(im, 0) & jnp.less_equal(re, 0) & jnp.equal(jnp.floor(re), re)
    reflect = jnp.less(re, 0.5)
    w = jnp.where(reflect, 1 - z, z).astype(dt)
    logs = jnp.zeros_like(w)
    for k in range(_COMPLEX_GAMMA_SHIFTS):
        logs = logs + jnp.log(w + k)
    v = w + _COMPLEX_GAMMA_SHIFTS
    inverse, inverse_sq = 1 / v, 1 / jnp.square(v)
    series = jnp.zeros_like(v)
    for c in reversed(_stirling_coefficients()):
        series = series * inverse_sq + c
    g = jnp.exp((v - 0.5) * jnp.log(v) - v + 0.5 * np.log(2 * np.pi) + series * inverse - logs)
    # sin(pi z) = (-1)**n sin(pi (z - n)) with n the integer nearest Re z, exact near the poles
    zr = jnp.where(reflect & jnp.logical_not(pole), z, 0.5).astype(dt)
    n = jnp.round(jnp.real(zr))
    sign = 1 - 2 * jnp.remainder(n, 2)
    sine = sign.astype(dt) * jnp.sin(np.pi * (zr - n.astype(dt)))
    out = jnp.where(reflect, np.pi / (sine * g), g)
    return jnp.where(pole, complex(np.nan, np.nan), out).astype(dt)


# --- the Pochhammer symbol --------------------------------------------------------------------
def _log_abs_gamma_ratio(z, m):
    """log |gamma(z + m) / gamma(z)| and its sign, for z and z + m off the poles."""
    zm = z + m
    value = lax.sub(lax.lgamma(zm), lax.lgamma(z))
    sign = _gamma_sign_real(zm) * _gamma_sign_real(z)
    return value, sign


def _gamma_sign_real(x):
    odd_floor = jnp.not_equal(jnp.remainder(jnp.floor(x), 2), 0)
    return jnp.where(jnp.logical_and(jnp.less(x, 0), odd_floor), -1.0, 1.0).astype(_dtype(x))


@custom_jvp
@jit
def _poch(z, m):
    dt = _dtype(z)
    z_pole, zm_pole = _is_nonpositive_integer(z), _is_nonpositive_integer(z + m)
    m_int = jnp.equal(jnp.floor(m), m)
    # Off the poles: gamma(z + m) / gamma(z) through the log-gamma difference.
    safe_z = jnp.where(z_pole | zm_pole, 0.5, z).astype(dt)
    safe_m = jnp.where(z_pole | zm_pole, 0.5, m).astype(dt)
    log_ratio, sign = _log_abs_gamma_ratio(safe_z, safe_m)
    regular = sign * jnp.exp(log_ratio)
    # z a pole, m an integer: (-1)**m gamma(1 - z) / gamma(1 - z - m), which is 0 once
    # 1 - z - m reaches a pole (the product z (z + 1) ... (z + m - 1) passes through 0).
    w = jnp.where(z_pole & m_int, 1 - z, 1.0).astype(dt)
    wm = jnp.where(z_pole & m_int, 1 - z - m, 1.0).astype(dt)
    wm_pole = _is_nonpositive_integer(wm)
    log_refl, sign_refl = _log_abs_gamma_ratio(jnp.where(wm_pole, 1.0, wm).astype(dt),
                                               jnp.where(wm_pole, 0.0, w - wm).astype(dt))
    parity = jnp.where(jnp.remainder(jnp.abs(m), 2) == 1, -1.0, 1.0).astype(dt)
    reflected = jnp.where(wm_pole, 0.0, parity * sign_refl * jnp.exp(log_refl))
    out = jnp.where(z_pole, jnp.where(m_int, reflected, 0.0),
                    jnp.where(zm_pole, np.inf, regular))
    return out.astype(dt)


@_poch.defjvp
def _poch_jvp(primals, tangents):
    z, m = primals
    z_dot, m_dot = tangents
    out = _poch(z, m)
    psi_zm = lax.digamma(z + m)
    return out, out * ((psi_zm - lax.digamma(z)) * z_dot + psi_zm * m_dot)


def poch(z, m):
    """The Pochhammer symbol (rising factorial) gamma(z + m) / gamma(z), with its limits at
    the poles of gamma. Differentiable in both arguments (off the poles)."""
    z, m = _real("poch", z, m)
    return _poch(z, m)


def comb(N, k, *, repetition=False):
    """The number of combinations of N things taken k at a time, N! / (k! (N - k)!), through
    the gamma function (so for real N and k too); 0 where k < 0, N < 0 or k > N. With
    ``repetition``, combinations with replacement: comb(N + k - 1, k)."""
    N, k = _real("comb", N, k)
    return _comb(N, k, bool(repetition))


@jit(static_argnames="repetition")
def _comb(N, k, repetition):
    if repetition:
        top = N + k - 1
        valid = jnp.greater_equal(k, 0) & jnp.greater_equal(N, 0) & jnp.greater_equal(top, k)
    else:
        top = N
        valid = (jnp.greater_equal(k, 0) & jnp.greater_equal(N, 0) & jnp.greater_equal(N, k))
    safe_top = jnp.where(valid, top, 1.0)
    safe_k = jnp.where(valid, k, 0.0)
    log_value = (lax.lgamma(safe_top + 1) - lax.lgamma(safe_k + 1)
                 - lax.lgamma(safe_top - safe_k + 1))
    out = jnp.where(valid, jnp.exp(log_value), 0.0)
    if repetition:  # choosing nothing from N >= 0 things: exactly one way, N = 0 included
        out = jnp.where(jnp.equal(k, 0) & jnp.greater_equal(N, 0), 1.0, out)
    return jnp.where(jnp.isnan(N) | jnp.isnan(k), np.nan, out)


# --- Box-Cox ----------------------------------------------------------------------------------
@jit
def _boxcox_from_log(log_x, lmbda):
    """(exp(lmbda log_x) - 1) / lmbda, and log_x itself where lmbda == 0."""
    zero = jnp.equal(lmbda, 0)
    safe = jnp.where(zero, 1.0, lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


def boxcox(x, lmbda):
    """The Box-Cox transform (x**lmbda - 1) / lmbda, log(x) where lmbda == 0 (NaN for x < 0)."""
    x, lmbda = _real("boxcox", x, lmbda)
    return _boxcox_from_log(jnp.log(x), lmbda)


def boxcox1p(x, lmbda):
    """The Box-Cox transform of 1 + x, accurate for small x: ((1 + x)**lmbda - 1) / lmbda,
    log1p(x) where lmbda == 0 (NaN for x < -1)."""
    x, lmbda = _real("boxcox1p", x, lmbda)
    return _boxcox_from_log(jnp.log1p(x), lmbda)


# --- Bernoulli numbers ------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _bernoulli_fractions(n):
    """B_0 ... B_n exactly (B_1 = -1/2), from the recurrence sum_{j<=m} C(m+1, j) B_j = 0."""
    from math import comb as exact_comb
    out = [Fraction(1)]
    for m in range(1, n + 1):
        total = sum(exact_comb(m + 1, j) * out[j] for j in range(m))
        out.append(-total / (m + 1))
    return tuple(out)  # a tuple: the cache hands the same one to every caller


def _to_float(fraction):
    try:
        return float(fraction)
    except OverflowError:  # past float64's range (n > 258)
        return np.inf if fraction > 0 else -np.inf


def bernoulli(n):
    """The Bernoulli numbers B_0 ... B_n as a float array of length n + 1 (B_1 = -1/2, as
    SciPy); ``n`` must be a static non-negative integer."""
    try:
        n = operator.index(n)
    except TypeError:
        raise ValueError("n must be a non-negative integer (a static Python int), got "
                         f"{n!r}.") from None
    if n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n}.")
    dtype = dtypes.canonicalize_dtype(np.float64)
    with np.errstate(over="ignore"):  # beyond float32's range they are +-inf, as in JAX
        values = np.array([_to_float(b) for b in _bernoulli_fractions(n)]).astype(dtype)
    return jnp.asarray(values)
