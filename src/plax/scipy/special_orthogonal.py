"""Recurrence-built families of scipy.special on plax: the Bessel functions J_0 ... J_v
(bessel_jn) and the spherical harmonics (sph_harm_y)."""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy.util import promote_args_inexact
from plax.scipy.special_common import dtype_of as _dtype, real_args

__all__ = ["bessel_jn", "sph_harm_y"]



def _static_int(name, value):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a static Python integer, got {value!r} (under jit, "
                        f"mark it static).") from None


# --- Bessel functions of the first kind -------------------------------------------------------
_RESCALE_ABOVE = 1e10        # the backward recurrence's values are divided down past this


def bessel_jn(z, *, v, n_iter=50):
    """The Bessel functions of the first kind J_0(z) ... J_v(z), stacked along a new leading
    axis (shape (v + 1,) + z.shape), by Miller's backward recurrence
    J_{k-1} = (2k / z) J_k - J_{k+1} started at order max(n_iter, v + 1) and normalized by
    J_0 + 2 (J_2 + J_4 + ...) = 1. Accurate for |z| well below n_iter (raise n_iter for
    larger z). Real input only; differentiable in z."""
    v = _static_int("v", v)
    n_iter = _static_int("n_iter", n_iter)
    (z,) = real_args("bessel_jn", z)
    dt = _dtype(z)
    shape = get_aval(z).shape
    if v < 0:
        return jnp.zeros((0,) + shape, dt)
    return _bessel_jn(z, v, max(n_iter, v + 1))


@jit(static_argnums=(1, 2))
def _bessel_jn(z, v, start):
    dt, shape = _dtype(z), get_aval(z).shape
    at_zero = jnp.equal(z, 0)
    safe_z = jnp.where(at_zero | jnp.isinf(z), 1.0, z).astype(dt)
    two_over_z = 2 / safe_z

    def step(i, state):
        k = start - i                                   # k = start, ..., 1
        j_next, j_cur, norm, out = state
        j_prev = k.astype(dt) * two_over_z * j_cur - j_next
        order = k - 1
        norm = norm + jnp.where(jnp.logical_and(order % 2 == 0, order > 0), 2.0, 0.0) * j_prev
        slot = jnp.minimum(order, v)
        kept = lax.dynamic_index_in_dim(out, slot, keepdims=False)
        out = lax.dynamic_update_index_in_dim(out, jnp.where(order <= v, j_prev, kept), slot, 0)
        scale = jnp.abs(j_prev)
        big = jnp.greater(scale, _RESCALE_ABOVE)
        divisor = jnp.where(big, scale, 1.0).astype(dt)
        return j_cur / divisor, j_prev / divisor, norm / divisor, out / divisor[None]

    init = (jnp.zeros_like(safe_z), jnp.ones_like(safe_z), jnp.zeros_like(safe_z),
            jnp.zeros((v + 1,) + shape, dt))
    _, j0, norm, out = lax.fori_loop(0, start, step, init)
    out = out / (j0 + norm)[None]  # (ranks explicit)
    unit = (jnp.arange(v + 1) == 0).astype(dt).reshape((v + 1,) + (1,) * len(shape))
    out = jnp.where(at_zero[None], unit, out)
    return jnp.where(jnp.isinf(z)[None], 0.0, out)  # each J_n decays to 0 at infinity


# --- spherical harmonics ----------------------------------------------------------------------
def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """The spherical harmonic Y_n^m(theta, phi) of degree n and order m (integer arrays), with
    theta the polar angle and phi the azimuth, as scipy.special.sph_harm_y: orthonormal, with
    the Condon-Shortley phase, 0 where |m| > n. ``n_max`` (static) bounds n; by default it is
    max(n), which needs a concrete n. ``diff_n`` (derivative arrays) is not supported."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to sph_harm_y is not supported.")
    theta, phi = promote_args_inexact("sph_harm_y", theta, phi)
    dt = _dtype(theta)
    if dtypes.issubdtype(dt, np.complexfloating):
        raise ValueError("sph_harm_y does not support complex-valued angles.")
    n, m = jnp.asarray(n), jnp.asarray(m)
    for name, arg in (("n", n), ("m", m)):
        if not dtypes.issubdtype(_dtype(arg), np.integer):
            raise TypeError(f"sph_harm_y: {name} must have an integer dtype, got "
                            f"{_dtype(arg)}.")
    if n_max is None:
        try:
            n_max = int(np.max(np.asarray(n))) if get_aval(n).size else 0
        except Exception:
            raise TypeError("sph_harm_y needs a concrete n to find n_max; under jit, pass "
                            "n_max (a static bound on n).") from None
    n_max = _static_int("n_max", n_max)
    return _sph_harm_y(*jnp.broadcast_arrays(n, m, theta, phi), n_max)


@jit(static_argnums=4)
def _sph_harm_y(n, m, theta, phi, n_max):
    dt = _dtype(theta)
    abs_m = jnp.abs(m)
    mf = abs_m.astype(dt)
    cos_t, sin_t = jnp.cos(theta), jnp.sin(theta)
    # the normalized P_|m|^|m|: (-1)**m sqrt((2m + 1) / (4 pi) * prod_{k<=m} (2k - 1) / (2k))
    # |sin(theta)|**m (that is, (1 - cos(theta)**2)**(m/2): the functions of cos(theta)), the
    # product being gamma(m + 1/2) / (sqrt(pi) gamma(m + 1))
    log_prod = lax.lgamma(mf + 0.5) - lax.lgamma(mf + 1) - 0.5 * np.log(np.pi)
    odd_m = jnp.equal(abs_m % 2, 1)
    sign = jnp.where(odd_m, -1.0, 1.0)
    magnitude = jnp.exp(0.5 * (jnp.log((2 * mf + 1) / (4 * np.pi)) + log_prod)
                        + mf * jnp.log(jnp.where(jnp.equal(sin_t, 0), 1.0, jnp.abs(sin_t))))
    p_mm = jnp.where(jnp.equal(abs_m, 0), float(np.sqrt(1 / (4 * np.pi))),
                     sign * jnp.where(jnp.equal(sin_t, 0), 0.0, magnitude))
    p_m1 = jnp.sqrt(2 * mf + 3) * cos_t * p_mm           # degree |m| + 1
    # upward in the degree: P_l = a_l (cos(theta) P_{l-1} - P_{l-2} / a_{l-1}),
    # a_l = sqrt((4 l**2 - 1) / (l**2 - m**2))

    def a_coef(l):
        lf = l.astype(dt) if hasattr(l, "astype") else jnp.asarray(l, dt)
        denom = jnp.maximum(jnp.square(lf) - jnp.square(mf), 1.0)
        return jnp.sqrt((4 * jnp.square(lf) - 1) / denom)

    def step(l, state):
        p_prev2, p_prev, result = state                  # degrees l - 2 and l - 1
        active = jnp.greater_equal(l, abs_m + 2)
        p_l = a_coef(l) * (cos_t * p_prev - p_prev2 / a_coef(l - 1))
        p_prev2 = jnp.where(active, p_prev, p_prev2)
        p_prev = jnp.where(active, p_l, p_prev)
        result = jnp.where(active & jnp.equal(n, l), p_l, result)
        return p_prev2, p_prev, result

    result = jnp.where(jnp.equal(n, abs_m), p_mm, jnp.where(jnp.equal(n, abs_m + 1), p_m1, 0.0))
    if n_max >= 2:
        _, _, result = lax.fori_loop(2, n_max + 1, step, (p_mm, p_m1, result.astype(dt)))
    result = jnp.where(jnp.greater(abs_m, n) | jnp.less(n, 0), 0.0, result).astype(dt)
    # the azimuthal factor exp(i m phi); negative orders: Y_n^-m = (-1)**m conj(Y_n^m)
    flip = jnp.where(jnp.less(m, 0) & odd_m, -1.0, 1.0).astype(dt)
    angle = m.astype(dt) * phi
    return lax.complex(flip * result * jnp.cos(angle), flip * result * jnp.sin(angle))
