"""The Faddeeva function w(z) = exp(-z**2) erfc(-i z) on plax, and the functions built on it:
wofz, erfcx, dawsn and the Fresnel integrals.

w is evaluated in the upper half plane by Weideman's rational approximation (J. A. C. Weideman,
"Computation of the complex error function", SIAM J. Numer. Anal. 31, 1994: a polynomial in
(L + i z) / (L - i z) whose coefficients are an FFT of a simple function, computed here once
at import), relative error ~1e-14 for |z| < 6, and by Laplace's continued fraction beyond;
the lower half plane follows from w(z) = 2 exp(-z**2) - w(-z).
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.higher_order.custom_derivatives import custom_jvp
from plax.numpy.util import promote_args_inexact
from plax.scipy.special_common import dtype_of as _dtype, real_args

__all__ = ["wofz", "erfcx", "dawsn", "fresnel"]

_TERMS = 40                 # Weideman's N: 40 terms reach ~2e-14 relative error for |z| < 6
_RATIONAL_RADIUS = 6.0      # inside it the rational approximation, outside the fraction
_FRACTION_DEPTH = 24        # Laplace's fraction is at double precision by depth 20 for |z| >= 6
_INV_SQRT_PI = float(1 / np.sqrt(np.pi))


def _weideman_coefficients(n_terms):
    """The coefficients (highest power first) and the scale L of the rational approximation."""
    m = 2 * n_terms
    scale = np.sqrt(n_terms / np.sqrt(2))
    theta = np.arange(-m + 1, m) * np.pi / m
    t = scale * np.tan(theta / 2)
    samples = np.concatenate([[0.0], np.exp(-t ** 2) * (scale ** 2 + t ** 2)])
    coefficients = np.real(np.fft.fft(np.fft.fftshift(samples))) / (2 * m)
    return coefficients[1:n_terms + 1][::-1].copy(), float(scale)


_COEFFS, _L = _weideman_coefficients(_TERMS)



def _complex_of(dtype):
    """The complex dtype with ``dtype``'s precision (complex128 for float64, else complex64)."""
    return np.dtype(np.complex128 if np.dtype(dtype).itemsize == 8 else np.complex64)


# The series and fractions below run as loops rather than unrolled: XLA compiles the unrolled
# complex arithmetic slowly (seconds), the loops in a fraction of that.
def _horner(coefficients, z):
    """The polynomial with ``coefficients`` (highest power first) at z."""
    table = jnp.asarray(coefficients, _dtype(z))      # z's own dtype: no real/complex mixing

    def add(i, acc):
        return acc * z + table[i]

    return lax.fori_loop(0, len(coefficients), add, jnp.zeros_like(z))


def _fraction(x, depth, sign):
    """t = x + sign (k / 2) / t from k = depth down to 1, starting from t = x: Laplace's
    continued fraction for w (sign -1) and its form on the imaginary axis (sign +1)."""
    def level(i, t):
        k = (depth - i).astype(_dtype(x))
        return x + sign * (k / 2) / t

    return lax.fori_loop(0, depth, level, x)


def _w_rational(z):
    """w(z) for Im z >= 0 and |z| below the radius."""
    iz = 1j * z
    denominator = _L - iz
    p = _horner(_COEFFS, (_L + iz) / denominator)
    return 2 * p / jnp.square(denominator) + _INV_SQRT_PI / denominator


def _w_fraction(z):
    """w(z) for Im z >= 0 and large |z|: (i / sqrt(pi)) / (z - (1/2) / (z - 1 / (z - ...)))."""
    return (1j * _INV_SQRT_PI) / _fraction(z, _FRACTION_DEPTH, -1)


def _w_upper(z):
    """w(z) for Im z >= 0."""
    inside = jnp.less(jnp.abs(z), _RATIONAL_RADIUS)
    near = jnp.where(inside, z, 0.0).astype(_dtype(z))
    far = jnp.where(inside, _RATIONAL_RADIUS * 1j, z).astype(_dtype(z))
    return jnp.where(inside, _w_rational(near), _w_fraction(far))


@custom_jvp
@jit
def _wofz(z):
    lower = jnp.less(jnp.imag(z), 0)
    upper_z = jnp.where(lower, jnp.negative(z), z)
    w = _w_upper(upper_z)
    return jnp.where(lower, 2 * jnp.exp(jnp.negative(jnp.square(z))) - w, w)


@_wofz.defjvp
def _wofz_jvp(primals, tangents):
    (z,), (z_dot,) = primals, tangents
    w = _wofz(z)
    return w, (2j * _INV_SQRT_PI - 2 * z * w) * z_dot


def wofz(z):
    """The Faddeeva function w(z) = exp(-z**2) erfc(-i z), for complex (or real) z; the result
    is complex. Holomorphic, with w'(z) = 2i / sqrt(pi) - 2 z w(z)."""
    (z,) = promote_args_inexact("wofz", z)
    if not dtypes.issubdtype(_dtype(z), np.complexfloating):
        z = lax.convert_element_type(z, _complex_of(_dtype(z)))
    return _wofz(z)



# --- erfcx: w on the imaginary axis, in real arithmetic ---------------------------------------
def _erfcx_nonnegative(x):
    """erfcx(x) = w(i x) for x >= 0: there (L + i z) / (L - i z) = (L - x) / (L + x) is real,
    and the continued fraction's denominators are i times real ones."""
    inside = jnp.less(x, _RATIONAL_RADIUS)
    near = jnp.where(inside, x, 0.0).astype(_dtype(x))
    denominator = _L + near
    p = _horner(_COEFFS, (_L - near) / denominator)
    rational = 2 * p / jnp.square(denominator) + _INV_SQRT_PI / denominator
    far = jnp.where(inside, _RATIONAL_RADIUS, x).astype(_dtype(x))
    fraction = _INV_SQRT_PI / _fraction(far, _FRACTION_DEPTH, 1)
    return jnp.where(inside, rational, fraction)


@custom_jvp
@jit
def _erfcx(x):
    negative = jnp.less(x, 0)
    out = _erfcx_nonnegative(jnp.abs(x))
    reflected = 2 * jnp.exp(jnp.square(x)) - out     # erfcx(-x) = 2 exp(x**2) - erfcx(x)
    out = jnp.where(negative, reflected, out)
    return jnp.where(jnp.isposinf(x), 0.0, out).astype(_dtype(x))


@_erfcx.defjvp
def _erfcx_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    out = _erfcx(x)
    return out, (2 * x * out - 2 * _INV_SQRT_PI) * x_dot


def erfcx(x):
    """The scaled complementary error function exp(x**2) erfc(x), without the overflow and
    underflow of computing the two apart; for complex x it is w(i x)."""
    (x,) = promote_args_inexact("erfcx", x)
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        return _wofz(1j * x)
    return _erfcx(x)


# --- Dawson's integral ------------------------------------------------------------------------
_DAWSN_SERIES_BELOW = 0.5
_DAWSN_SERIES_TERMS = 14    # the terms fall by 2 x**2 / (2n + 3) <= 1/6 each below 0.5


def _dawsn_series(x):
    """sum over n of (-2 x**2)**n x / (1 * 3 * ... * (2n + 1))."""
    x2 = jnp.square(x)

    def nest(i, acc):
        n = (_DAWSN_SERIES_TERMS - i).astype(_dtype(x))
        return (1 - acc) * (2 * x2 / (2 * n + 1))

    return x * (1 - lax.fori_loop(0, _DAWSN_SERIES_TERMS, nest, jnp.zeros_like(x)))


@custom_jvp
@jit
def _dawsn(x):
    dt = _dtype(x)
    ax = jnp.abs(x)
    small = jnp.less(ax, _DAWSN_SERIES_BELOW)
    far = jnp.greater_equal(ax, _RATIONAL_RADIUS)
    series = _dawsn_series(jnp.where(small, x, 0.0).astype(dt))
    mid_x = jnp.where(small | far, 1.0, ax).astype(dt)
    mid = (np.sqrt(np.pi) / 2) * jnp.imag(_w_rational(
        lax.convert_element_type(mid_x, _complex_of(dt))))
    # on the real axis the continued fraction is real: D(x) = 1 / (2 t)
    far_x = jnp.where(far, ax, _RATIONAL_RADIUS).astype(dt)
    fraction = 0.5 / _fraction(far_x, _FRACTION_DEPTH, -1)
    magnitude = jnp.where(far, fraction, mid)
    out = jnp.where(small, series, jnp.copysign(magnitude, x))
    return jnp.where(jnp.isinf(x), jnp.copysign(jnp.zeros_like(x), x), out).astype(dt)


_dawsn.defjvps(lambda t, ans, x: t * (1 - 2 * x * ans))


def dawsn(x):
    """Dawson's integral exp(-x**2) times the integral from 0 to x of exp(t**2) dt. Real
    input only; its derivative is 1 - 2 x dawsn(x)."""
    return _dawsn(real_args("dawsn", x)[0])


# --- the Fresnel integrals --------------------------------------------------------------------
_FRESNEL_SERIES_BELOW = 1.2
_FRESNEL_SERIES_TERMS = 16


def _fresnel_series(x):
    """S(x) and C(x) from their power series in u = pi x**2 / 2:
    S = x sum (-1)**n u**(2n+1) / ((2n+1)! (4n+3)), C = x sum (-1)**n u**(2n) / ((2n)! (4n+1))."""
    u = (np.pi / 2) * jnp.square(x)

    def add_pair(n, state):                       # the terms k = 2n (C) and 2n + 1 (S)
        term, s_total, c_total = state            # term = (-1)**n u**(2n) / (2n)!
        k = (2 * n).astype(_dtype(x))
        c_total = c_total + term / (2 * k + 1)
        odd = term * u / (k + 1)
        s_total = s_total + odd / (2 * k + 3)
        return jnp.negative(odd * u / (k + 2)), s_total, c_total

    zeros = jnp.zeros_like(x)
    _, s_total, c_total = lax.fori_loop(0, _FRESNEL_SERIES_TERMS, add_pair,
                                        (jnp.ones_like(x), zeros, zeros))
    return x * s_total, x * c_total


def _fresnel_values(x):
    dt = _dtype(x)
    ax = jnp.abs(x)
    small = jnp.less(ax, _FRESNEL_SERIES_BELOW)
    huge = jnp.greater(ax, 1e18)                  # (past it x**2 may overflow; S = C = 1/2)
    s_small, c_small = _fresnel_series(jnp.where(small, x, 0.0).astype(dt))
    big_x = jnp.where(small | huge, 2.0, ax).astype(dt)
    cdt = _complex_of(dt)
    z = lax.convert_element_type(big_x * (np.sqrt(np.pi) / 2), cdt) * (1 + 1j)
    phase = (np.pi / 2) * jnp.square(big_x)
    rotation = lax.complex(jnp.cos(phase), jnp.sin(phase))
    c_plus_is = (0.5 + 0.5j) * (1 - rotation * _w_upper(z))
    sign = jnp.sign(x)
    s_big = jnp.where(huge, 0.5, jnp.imag(c_plus_is)) * sign
    c_big = jnp.where(huge, 0.5, jnp.real(c_plus_is)) * sign
    return (jnp.where(small, s_small, s_big).astype(dt),
            jnp.where(small, c_small, c_big).astype(dt))


@custom_jvp
@jit
def _fresnel(x):
    return _fresnel_values(x)


@_fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    s, c = _fresnel(x)
    phase = (np.pi / 2) * jnp.square(x)
    return (s, c), (jnp.sin(phase) * x_dot, jnp.cos(phase) * x_dot)


def fresnel(x):
    """The Fresnel integrals (S(x), C(x)): the integrals from 0 to x of sin(pi t**2 / 2) and
    cos(pi t**2 / 2). Real input only."""
    return _fresnel(real_args("fresnel", x)[0])
