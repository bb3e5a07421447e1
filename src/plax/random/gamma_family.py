"""The gamma family of plax.random: gamma and loggamma (Marsaglia and Tsang's method, with
the implicit-reparameterisation gradient), and beta, dirichlet, chisquare, f, t,
generalized_normal and ball built on them, each as JAX constructs it.

The derivative of a gamma sample with respect to its shape parameter is
``-dF/da / dF/dx`` for the gamma CDF ``F``: ``random_gamma_grad`` computes it with
the incomplete-gamma series (small ``x``) or continued fraction (large ``x``)
carried together with their derivatives in ``a``.
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api import jit
from plax.api_vmap import vmap
from plax.core import dtypes
from plax.random import threefry
from plax.random.distributions import _exponential, _rademacher
from plax.random.keys import _check_key
from plax.random.samplers import (_check_param_shapes, _float_dtype, _normal,
                                  _result_shape, _shape, _uniform)
from plax.transforms.custom_derivatives import custom_jvp

__all__ = ["gamma", "loggamma", "beta", "dirichlet", "chisquare", "f", "t",
           "generalized_normal", "ball", "random_gamma_grad"]




# --- one gamma sample -------------------------------------------------------------------
def _gamma_one(key, alpha, log_space: bool):
    """A Gamma(alpha) sample (or its log) by Marsaglia and Tsang's rejection method; alpha < 1
    is boosted to alpha + 1 and scaled back by a uniform to the power 1/alpha."""
    dtype = alpha.dtype
    one = np.array(1, dtype)
    boost = alpha >= one
    alpha_orig = alpha
    alpha = lax.select(boost, alpha, alpha + one)
    d = alpha - np.array(1 / 3, dtype)
    c = np.array(1 / 3, dtype) / jnp.sqrt(d)

    def rejected(state):
        # X is x**2 and V is v**3: Marsaglia and Tsang's squeeze test, then the exact one.
        _, X, V, U = state
        return lax.bitwise_and(U >= one - np.array(0.0331, dtype) * (X * X),
                               jnp.log(U) >= X * np.array(0.5, dtype)
                               + d * (one - V + jnp.log(V)))

    def propose(state):
        keys = threefry.split(state[0], (3,))

        def next_normal(kxv):
            pair = threefry.split(kxv[0], (2,))
            x = _normal(pair[1], (), dtype)
            return pair[0], x, one + x * c

        _, x, v = lax.while_loop(lambda kxv: kxv[2] <= np.array(0, dtype), next_normal,
                                 (keys[1], np.array(0, dtype), np.array(-1, dtype)))
        U = _uniform(keys[2], 0.0, 1.0, (), dtype)
        return keys[0], x * x, v * v * v, U

    pair = threefry.split(key, (2,))
    _, _, V, _ = lax.while_loop(rejected, propose,
                                (pair[0], np.array(0, dtype), one, np.array(2, dtype)))
    if log_space:
        log_u = -_exponential(pair[1], (), dtype)
        log_boost = lax.select(boost | (log_u == 0), np.array(0, dtype), log_u * (one / alpha_orig))
        return jnp.log(d) + jnp.log(V) + log_boost
    u = one - _uniform(pair[1], 0.0, 1.0, (), dtype)
    return d * V * lax.select(boost, one, jnp.power(u, one / alpha_orig))


def _gamma_samples(key, a, log_space: bool):
    """Gamma samples of the shape parameters ``a`` (any shape): one key per element."""
    count = math.prod(a.shape)
    keys = threefry.split(key, (count,)) if count else jnp.zeros((0, 2), np.uint32)
    flat = jnp.reshape(a, (count,))
    samples = vmap(lambda k, x: _gamma_one(k, x, log_space))(keys, flat)
    return jnp.reshape(samples, a.shape)


def _gamma_draw_fun(key, a, log_space):
    return _gamma_samples(key, a, log_space)


_gamma_draw = custom_jvp(_gamma_draw_fun, nondiff_argnums=(2,))


@_gamma_draw.defjvp
def _gamma_draw_jvp(log_space, primals, tangents):
    key, a = primals
    sample = _gamma_draw(key, a, log_space)
    return sample, tangents[1] * _gamma_sample_grad(sample, a, log_space)


def _gamma_sample_grad(sample, a, log_space: bool):
    if log_space:  # d log(s) = ds / s; an exp that underflows counts as the smallest float
        s = jnp.exp(sample)
        s = lax.select(s == 0, jnp.full_like(s, dtypes.finfo(s.dtype).tiny), s)
        return random_gamma_grad(a, s) / s
    return random_gamma_grad(a, sample)


# --- d(sample)/d(alpha) -----------------------------------------------------------------
def random_gamma_grad(a, x):
    """The derivative of a Gamma(a) sample ``x`` with respect to ``a`` (the implicit
    reparameterisation gradient), elementwise."""
    a, x = jnp.asarray(a), jnp.asarray(x)
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    x_is_zero = x == 0
    domain_error = (x < 0) | (a <= 0)
    use_fraction = (x > 1) & (x > a)
    ax = a * jnp.log(x) - x - lax.lgamma(a)
    underflow = ax < -np.log(dtypes.finfo(a.dtype).max)
    ax = jnp.exp(ax)
    enabled = ~(x_is_zero | domain_error | underflow | is_nan)
    out = lax.select(use_fraction,
                     -_fraction_sample_derivative(ax, x, a, enabled & use_fraction),
                     _series_sample_derivative(ax, x, a, enabled & ~use_fraction))
    out = lax.select(x_is_zero, jnp.zeros_like(out), out)
    return lax.select(domain_error | is_nan, jnp.full_like(a, np.nan), out)


def _series_sample_derivative(ax, x, a, enabled):
    """The series for the lower incomplete gamma function, carried with its derivative in
    ``a``; returns -dP/da / dP/dx."""
    eps = dtypes.finfo(a.dtype).eps

    def body(vals):
        on, r, c, ans, xx, dc_da, dans_da = vals
        r_new = r + 1
        dc_new = dc_da * (xx / r_new) - (c * xx) / (r_new * r_new)
        dans_new = dans_da + dc_new
        c_new = c * (xx / r_new)
        ans_new = ans + c_new
        more = on & (jnp.abs(dc_new / dans_new) > eps)
        keep = lambda new, old: lax.select(on, new, old)  # noqa: E731
        return (more, keep(r_new, r), keep(c_new, c), keep(ans_new, ans), xx,
                keep(dc_new, dc_da), keep(dans_new, dans_da))

    ones, zeros = jnp.ones_like(a), jnp.zeros_like(a)
    vals = lax.while_loop(lambda v: jnp.any(v[0]), body,
                          (enabled, a, ones, ones, x, zeros, zeros))
    ans, dans_da = vals[3], vals[6]
    dlogax_da = jnp.log(x) - lax.digamma(a + 1)
    return -(dans_da + ans * dlogax_da) * x / a


def _fraction_sample_derivative(ax, x, a, enabled):
    """The continued fraction for the upper incomplete gamma function, carried with its
    derivative in ``a`` (rescaled against overflow); returns dQ/da / dQ/dx."""
    eps = np.array(dtypes.finfo(x.dtype).eps, x.dtype)
    one = np.array(1, x.dtype)

    def body(vals):
        (on, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans) = vals
        c = c + one
        y_new, z_new = y + one, z + 2
        yc = y_new * c
        pk = pkm1 * z_new - pkm2 * yc
        qk = qkm1 * z_new - qkm2 * yc
        nonzero = qk != 0
        r = pk / qk
        t_new = lax.select(nonzero, jnp.abs((ans - r) / r), jnp.ones_like(r))
        ans_new = lax.select(nonzero, r, ans)
        dpk = dpkm1 * z_new - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z_new - qkm1 - dqkm2 * yc + qkm2 * c
        dans_new = lax.select(nonzero, (dpk - ans_new * dqk) / qk, dans)
        change = lax.select(nonzero, jnp.abs(dans_new - dans), jnp.ones_like(dans))
        npkm2, npkm1, nqkm2, nqkm1 = pkm1, pk, qkm1, qk
        ndpkm2, ndqkm2, ndpkm1, ndqkm1 = dpkm1, dqkm1, dpk, dqk
        big = jnp.abs(pk) > one / eps
        scale = lambda v: lax.select(big, v * eps, v)  # noqa: E731
        npkm2, npkm1, nqkm2, nqkm1 = map(scale, (npkm2, npkm1, nqkm2, nqkm1))
        ndpkm2, ndqkm2, ndpkm1, ndqkm1 = map(scale, (ndpkm2, ndqkm2, ndpkm1, ndqkm1))
        more = on & (change > eps)
        keep = lambda new, old: lax.select(on, new, old)  # noqa: E731
        return (more, keep(ans_new, ans), keep(t_new, t), keep(y_new, y), keep(z_new, z), c,
                keep(npkm1, pkm1), keep(nqkm1, qkm1), keep(npkm2, pkm2), keep(nqkm2, qkm2),
                keep(ndpkm2, dpkm2), keep(ndqkm2, dqkm2), keep(ndpkm1, dpkm1),
                keep(ndqkm1, dqkm1), keep(dans_new, dans))

    y = one - a
    z = x + y + one
    pkm2, qkm2 = jnp.ones_like(x), x
    pkm1, qkm1 = x + one, z * x
    ans = pkm1 / qkm1
    zeros = jnp.zeros_like(x)
    dqkm1 = -x
    dans = (zeros - ans * dqkm1) / qkm1
    start = (enabled, ans, jnp.ones_like(x), y, z, np.array(0, x.dtype), pkm1, qkm1, pkm2, qkm2,
             zeros, zeros, zeros, dqkm1, dans)
    vals = lax.while_loop(lambda v: (v[5] < np.array(2000, x.dtype)) & jnp.any(v[0]), body, start)
    ans, dans = vals[1], vals[14]
    dlogax_da = jnp.log(x) - lax.digamma(a)
    return -(dans + ans * dlogax_da) * x


# --- the public samplers -------------------------------------------------------------------
def gamma(key, a, shape=None, dtype=None):
    """Gamma samples of shape parameter ``a`` (and scale 1); differentiable in ``a``."""
    key = _check_key("gamma", key)
    dtype = _float_dtype(dtype, "gamma")
    return _gamma(key, a, None if shape is None else _shape(shape), dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """The logs of Gamma(a) samples, accurate for small ``a`` where the samples underflow."""
    key = _check_key("loggamma", key)
    dtype = _float_dtype(dtype, "loggamma")
    return _gamma(key, a, None if shape is None else _shape(shape), dtype, True)


@jit(static_argnums=(2, 3, 4))
def _gamma(key, a, shape, dtype, log_space):
    shape = _result_shape("gamma", shape, a)
    a = jnp.asarray(a).astype(dtype)
    if a.shape != shape:
        a = jnp.broadcast_to(a, shape)
    return _gamma_draw(key, a, log_space)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples, as ratios of log-space gamma samples."""
    key = _check_key("beta", key)
    dtype = _float_dtype(dtype, "beta")
    return _beta(key, a, b, None if shape is None else _shape(shape), dtype)


@jit(static_argnums=(3, 4))
def _beta(key, a, b, shape, dtype):
    shape = _result_shape("beta", shape, a, b)
    keys = threefry.split(key, (2,))
    a = jnp.broadcast_to(jnp.asarray(a).astype(dtype), shape)
    b = jnp.broadcast_to(jnp.asarray(b).astype(dtype), shape)
    log_a = _gamma(keys[0], a, shape, dtype, True)
    log_b = _gamma(keys[1], b, shape, dtype, True)
    top = jnp.maximum(log_a, log_b)
    ga, gb = jnp.exp(log_a - top), jnp.exp(log_b - top)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet samples (over the last axis of ``alpha``)."""
    key = _check_key("dirichlet", key)
    dtype = _float_dtype(dtype, "dirichlet")
    if not np.ndim(alpha) >= 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{np.ndim(alpha)}")
    return _dirichlet(key, alpha, None if shape is None else _shape(shape), dtype)


@jit(static_argnums=(2, 3))
def _dirichlet(key, alpha, shape, dtype):
    if shape is None:
        shape = tuple(np.shape(alpha)[:-1])
    else:
        _check_param_shapes("dirichlet", shape, np.shape(alpha)[:-1])
    alpha = jnp.asarray(alpha).astype(dtype)
    logs = _gamma(key, alpha, shape + np.shape(alpha)[-1:], dtype, True)
    # A softmax over the last axis (of the log-gamma samples).
    shifted = jnp.exp(logs - lax.stop_gradient(jnp.max(logs, axis=-1, keepdims=True)))
    return shifted / jnp.sum(shifted, axis=-1, keepdims=True)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square samples with ``df`` degrees of freedom."""
    key = _check_key("chisquare", key)
    dtype = _float_dtype(dtype, "chisquare")
    shape = tuple(np.shape(df)) if shape is None else _shape(shape)
    _check_param_shapes("chisquare", shape, np.shape(df))
    return _chisquare(key, df, shape, dtype)


@jit(static_argnums=(2, 3))
def _chisquare(key, df, shape, dtype):
    half = jnp.asarray(df).astype(dtype) / np.array(2, dtype)
    return jnp.exp(_gamma(key, half, shape, dtype, True)) * np.array(2, dtype)


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F-distribution samples: a ratio of two scaled chi-squares."""
    key = _check_key("f", key)
    dtype = _float_dtype(dtype, "f")
    shape = _result_shape("f", None if shape is None else _shape(shape), dfnum, dfden)
    return _f(key, dfnum, dfden, shape, dtype)


@jit(static_argnums=(3, 4))
def _f(key, dfnum, dfden, shape, dtype):
    dfden, dfnum = jnp.asarray(dfden).astype(dtype), jnp.asarray(dfnum).astype(dtype)
    keys = threefry.split(key, (2,))
    num = _chisquare(keys[1], dfnum, shape, dtype) / dfnum
    den = _chisquare(keys[0], dfden, shape, dtype) / dfden
    return num / den


def t(key, df, shape=None, dtype=None):
    """Student's t samples with ``df`` degrees of freedom."""
    key = _check_key("t", key)
    dtype = _float_dtype(dtype, "t")
    return _t(key, df, None if shape is None else _shape(shape), dtype)


@jit(static_argnums=(2, 3))
def _t(key, df, shape, dtype):
    shape = _result_shape("t", shape, df)
    df = jnp.asarray(df).astype(dtype)
    keys = threefry.split(key, (2,))
    n = _normal(keys[0], shape, dtype)
    half = df / np.array(2, dtype)
    g = _gamma(keys[1], half, shape, dtype, False)
    return n * jnp.sqrt(half / g)


def generalized_normal(key, p, shape=(), dtype=None):
    """Samples of density proportional to ``exp(-|x|**p)``."""
    key = _check_key("generalized_normal", key)
    dtype = _float_dtype(dtype, "generalized_normal")
    _check_param_shapes("generalized_normal", _shape(shape), np.shape(p))
    return _generalized_normal(key, p, _shape(shape), dtype)


@jit(static_argnums=(2, 3))
def _generalized_normal(key, p, shape, dtype):
    keys = threefry.split(key, (2,))
    g = _gamma(keys[0], 1 / p, shape, dtype, False)
    r = _rademacher(keys[1], shape, dtype)
    return r * g ** (1 / p)


def ball(key, d, p=2, shape=(), dtype=None):
    """Points drawn uniformly from the unit ``p``-norm ball in ``d`` dimensions."""
    key = _check_key("ball", key)
    dtype = _float_dtype(dtype, "ball")
    d = int(d)
    return _ball(key, p, d, _shape(shape), dtype)


@jit(static_argnums=(2, 3, 4))
def _ball(key, p, d, shape, dtype):
    keys = threefry.split(key, (2,))
    g = _generalized_normal(keys[0], p, (*shape, d), dtype)
    e = _exponential(keys[1], shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]
