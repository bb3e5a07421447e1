"""Integral-defined functions of scipy.special on plax: the sine and cosine integrals (sici)
and Owen's T function (owens_t)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.higher_order.custom_derivatives import custom_jvp
from plax.numpy.util import promote_args_inexact
from plax.scipy.special_common import dtype_of as _dtype, real_args as _real

__all__ = ["sici", "owens_t"]




def _complex_of(dtype):
    return np.dtype(np.complex128 if np.dtype(dtype).itemsize == 8 else np.complex64)


# --- sine and cosine integrals ----------------------------------------------------------------
_SICI_SERIES_BELOW = 4.0
_SICI_SERIES_TERMS = 40      # x**k / k! at x = 4 is below 1e-17 of the sum by k = 40
_E1_FRACTION_DEPTH = 40      # E1(i x) by its continued fraction, double precision from x = 4


def _sici_series(x):
    """Si(x) = sum (-1)**n x**(2n+1) / ((2n+1) (2n+1)!) and
    Ci(x) - euler_gamma - log(x) = sum_{n>=1} (-1)**n x**(2n) / (2n (2n)!)."""
    def add_pair(n, state):                      # the terms k = 2n + 1 (Si) and 2n + 2 (Ci)
        term, si, ci_rest = state                # term = (-1)**n x**(2n) / (2n)!
        k = (2 * n + 1).astype(_dtype(x))
        term = term * x / k
        si = si + term / k
        term = jnp.negative(term * x / (k + 1))
        return term, si, ci_rest + term / (k + 1)

    zeros = jnp.zeros_like(x)
    _, si, ci_rest = lax.fori_loop(0, _SICI_SERIES_TERMS // 2, add_pair,
                                   (jnp.ones_like(x), zeros, zeros))
    return si, ci_rest


def _sici_large(x):
    """From E1(i x) = -Ci(x) + i (Si(x) - pi / 2), with E1(z) = exp(-z) / (z + 1 - 1 / (z + 3 -
    4 / (z + 5 - 9 / ...))) evaluated from the bottom."""
    cdt = _complex_of(_dtype(x))
    z = lax.convert_element_type(x, cdt) * 1j

    def level(i, t):
        k = (_E1_FRACTION_DEPTH - i).astype(cdt)     # complex, so no float/complex mixing
        return z + (2 * k - 1) - (k * k) / t

    t = lax.fori_loop(0, _E1_FRACTION_DEPTH, level, z + (2 * _E1_FRACTION_DEPTH + 1))
    e1 = lax.complex(jnp.cos(x), jnp.negative(jnp.sin(x))) / t
    return jnp.imag(e1) + np.pi / 2, jnp.negative(jnp.real(e1))


def _sici_values(x):
    dt = _dtype(x)
    ax = jnp.abs(x)
    small = jnp.less(ax, _SICI_SERIES_BELOW)
    xs = jnp.where(small, ax, 1.0).astype(dt)
    si_s, ci_rest = _sici_series(xs)
    ci_s = np.euler_gamma + jnp.log(xs) + ci_rest
    finite_large = jnp.logical_and(jnp.logical_not(small), jnp.isfinite(ax))
    xl = jnp.where(finite_large, ax, _SICI_SERIES_BELOW).astype(dt)
    si_l, ci_l = _sici_large(xl)
    si = jnp.where(small, si_s, jnp.where(jnp.isinf(ax), np.pi / 2, si_l))
    ci = jnp.where(small, ci_s, jnp.where(jnp.isinf(ax), 0.0, ci_l))
    # Si is odd; Ci(-x) is given as Ci(x) (the real part of its principal value), Ci(0) = -inf,
    # and Ci(-inf) is NaN, as in JAX
    si = jnp.copysign(si, x)
    ci = jnp.where(jnp.equal(x, 0), -np.inf, jnp.where(jnp.isneginf(x), np.nan, ci))
    si = jnp.where(jnp.isnan(x), np.nan, si)
    ci = jnp.where(jnp.isnan(x), np.nan, ci)
    return si.astype(dt), ci.astype(dt)


@custom_jvp
@jit
def _sici(x):
    return _sici_values(x)


@_sici.defjvp
def _sici_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    si, ci = _sici(x)
    return (si, ci), (jnp.sin(x) / x * x_dot, jnp.cos(x) / x * x_dot)


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)): the integral from 0 to x of sin(t) / t,
    and euler_gamma + log(x) + the integral from 0 to x of (cos(t) - 1) / t. Real input only;
    for x < 0, Ci is given as Ci(|x|)."""
    (x,) = promote_args_inexact("sici", x)
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        raise ValueError(f"Argument `x` to sici must be real-valued. Got dtype {_dtype(x)}.")
    return _sici(x)


# --- Owen's T function ------------------------------------------------------------------------
# T(h, a) = 1 / (2 pi) times the integral from 0 to a of exp(-h**2 (1 + x**2) / 2) / (1 + x**2).
# For |a| <= 1 it is integrated by Gauss-Legendre rules: in x when |h| <= 1 (a smooth integrand
# on [0, a]); in y = h x when |h| > 1, over [0, min(h a, 12)] in six equal pieces (the integrand
# exp(-y**2 / 2) h / (h**2 + y**2) times exp(-h**2 / 2) / h; beyond y = 12 it is below 1e-31 of
# the total). For |a| > 1, T(h, a) = (Phi(h) Q(a h) + Phi(a h) Q(h)) / 2 - T(a h, 1 / a), h >= 0.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(20)
_GL_NODES01, _GL_WEIGHTS01 = (_GL_NODES + 1) / 2, _GL_WEIGHTS / 2     # on [0, 1]
_Y_PIECES = 6
_Y_CUTOFF = 12.0


def _owens_t_direct(h, a):
    """T(h, a) for h >= 0 and 0 <= a <= 1."""
    dt = _dtype(h)
    nodes, weights = _GL_NODES01.astype(dt), _GL_WEIGHTS01.astype(dt)
    low = jnp.less_equal(h, 1)
    # in x, for h <= 1
    hl = jnp.where(low, h, 0.0)[..., None]
    x = a[..., None] * nodes
    one_x2 = 1 + jnp.square(x)
    in_x = a * jnp.sum(weights * jnp.exp(-0.5 * jnp.square(hl) * one_x2) / one_x2, axis=-1)
    # in y = h x, for h > 1
    hh = jnp.where(low, 2.0, h).astype(dt)
    top = jnp.minimum(hh * a, _Y_CUTOFF)
    piece = top / _Y_PIECES
    offsets = np.arange(_Y_PIECES, dtype=dt)
    y_nodes = ((offsets[:, None] + nodes[None, :]).reshape(-1)).astype(dt)
    y_weights = np.tile(weights, _Y_PIECES).astype(dt)
    y = piece[..., None] * y_nodes
    hh_ = hh[..., None]
    integrand = jnp.exp(-0.5 * (jnp.square(y) + jnp.square(hh_))) * hh_ / (jnp.square(hh_)
                                                                           + jnp.square(y))
    in_y = piece * jnp.sum(y_weights * integrand, axis=-1)
    return jnp.where(low, in_x, in_y) / (2 * np.pi)


def _normal_cdf_pair(x):
    """(Phi(x), Q(x) = 1 - Phi(x)), each to full relative precision."""
    scale = float(np.sqrt(0.5))
    return 0.5 * lax.erfc(jnp.negative(x) * scale), 0.5 * lax.erfc(x * scale)


def owens_t(h, a):
    """Owen's T function, T(h, a) = 1 / (2 pi) times the integral from 0 to a of
    exp(-h**2 (1 + x**2) / 2) / (1 + x**2) dx. Real input only; differentiable in both."""
    h, a = _real("owens_t", h, a)
    return _owens_t(h, a)


@jit
def _owens_t(h, a):
    dt = _dtype(h)
    ah_, aa = jnp.abs(h), jnp.abs(a)
    big_a = jnp.greater(aa, 1)
    a_inf = jnp.isinf(aa)
    h_inf = jnp.isinf(ah_)
    safe_h = jnp.where(h_inf, 0.0, ah_).astype(dt)
    safe_a = jnp.where(a_inf, 2.0, aa).astype(dt)
    # |a| <= 1
    direct = _owens_t_direct(safe_h, jnp.where(big_a, 0.0, safe_a).astype(dt))
    # |a| > 1, by the identity
    a_big = jnp.where(big_a, safe_a, 2.0).astype(dt)
    k = a_big * safe_h
    phi_h, q_h = _normal_cdf_pair(safe_h)
    phi_k, q_k = _normal_cdf_pair(k)
    swapped = 0.5 * (phi_h * q_k + phi_k * q_h) - _owens_t_direct(k, 1 / a_big)
    out = jnp.where(big_a, swapped, direct)
    out = jnp.where(a_inf, 0.5 * _normal_cdf_pair(safe_h)[1], out)
    out = jnp.where(h_inf, 0.0, out)
    out = jnp.sign(a) * out
    return jnp.where(jnp.isnan(h) | jnp.isnan(a), np.nan, out).astype(dt)
