"""Samplers built on uniform, normal and bits, each with JAX's signature and construction
(so the same key gives JAX's values)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.first_order.sharding_constraint import takes_out_sharding
from plax.random import threefry
from plax.random.keys import check_key
from plax.random.samplers import (check_param_shapes, checked_float_dtype,
                                  checked_optional_shape, checked_shape, draw_normal,
                                  draw_uniform, result_shape)

__all__ = ["bernoulli", "exponential", "gumbel", "laplace", "logistic", "cauchy",
           "rademacher", "maxwell", "truncated_normal", "pareto", "weibull_min",
           "double_sided_maxwell", "poisson", "binomial", "multinomial"]



@takes_out_sharding
def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability ``p`` (``mode="high"`` resolves small ``p``
    with a second draw, as JAX's)."""
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    key = check_key("bernoulli", key)
    dtype = dtypes.result_type(p)
    if not dtypes.is_float(dtype):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    p = jnp.asarray(p, dtype)
    return _bernoulli(key, p, checked_optional_shape(shape), mode)


@jit(static_argnums=(2, 3))
def _bernoulli(key, p, shape, mode):
    if shape is None:
        shape = np.shape(p)
    else:
        check_param_shapes("bernoulli", shape, np.shape(p))
    dtype = p.dtype
    if mode == "high":
        u = draw_uniform(key, 0.0, 1.0, (2,) + shape, dtype)
        return u[1] * (2.0 ** -dtypes.finfo(dtype).nmant) < p - u[0]
    return draw_uniform(key, 0.0, 1.0, shape, dtype) < p


def _simple(name, construct):
    """A sampler ``name(key, shape=(), dtype=None)`` computing ``construct(key, shape, dtype)``,
    staged by jit under the name JAX's jaxprs show (``_<name>``)."""
    def staged(key, shape, dtype):
        return construct(key, shape, dtype)

    staged.__name__ = staged.__qualname__ = f"_{name}"
    compiled = jit(staged, static_argnums=(1, 2))

    def sampler(key, shape=(), dtype=None):
        key = check_key(name, key)
        return compiled(key, checked_shape(shape), checked_float_dtype(dtype, name))

    sampler.__name__ = sampler.__qualname__ = name
    return sampler


def draw_exponential(key, shape, dtype):
    """Standard exponential values for a checked key, shape and float dtype."""
    return -jnp.log1p(-draw_uniform(key, 0.0, 1.0, shape, dtype))


def _laplace(key, shape, dtype):
    u = draw_uniform(key, -1.0 + dtypes.finfo(dtype).epsneg, 1.0, shape, dtype)
    return jnp.sign(u) * jnp.log1p(-jnp.abs(u))


def _logistic(key, shape, dtype):
    x = draw_uniform(key, dtypes.finfo(dtype).tiny, 1.0, shape, dtype)
    return jnp.log(x) - jnp.log1p(-x)


def _cauchy(key, shape, dtype):
    u = draw_uniform(key, dtypes.finfo(dtype).eps, 1.0, shape, dtype)
    return jnp.tan(np.array(np.pi, dtype) * (u - np.array(0.5, dtype)))


def _maxwell(key, shape, dtype):
    x = draw_normal(key, shape + (3,), dtype)
    return jnp.sqrt(jnp.sum(x * x, axis=-1))  # the norm of each 3-vector


exponential = takes_out_sharding(_simple("exponential", draw_exponential))
laplace = takes_out_sharding(_simple("laplace", _laplace))
logistic = takes_out_sharding(_simple("logistic", _logistic))
cauchy = takes_out_sharding(_simple("cauchy", _cauchy))
maxwell = takes_out_sharding(_simple("maxwell", _maxwell))
exponential.__doc__ = "Exponential samples of rate 1."
laplace.__doc__ = "Laplace samples of location 0 and scale 1."
logistic.__doc__ = "Standard logistic samples."
cauchy.__doc__ = "Standard Cauchy samples."
maxwell.__doc__ = "Maxwell samples: the norms of 3-dimensional standard normals."


@takes_out_sharding
def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel samples; ``mode`` "high"/"highest" resolve the tail further, as JAX's."""
    key = check_key("gumbel", key)
    dtype = checked_float_dtype(dtype, "gumbel")
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return draw_gumbel(key, checked_shape(shape), dtype, mode)


def _gumbel(key, shape, dtype, mode):
    info = dtypes.finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        raw = threefry.random_bits(key, 32, (2,) + shape)
        neg = ~raw
        lo = neg[1]
        neg = neg + jnp.stack([(lo == np.uint32(0xFFFFFFFF)).astype(np.uint32),
                               jnp.ones_like(lo)])
        flip = raw[0] < np.uint32(1 << 31)
        x = _safe_int_to_float(jnp.where(flip, raw, neg))
        return jnp.where(flip, -jnp.log(-jnp.log1p(-x)), -jnp.log(-jnp.log(x)))
    if mode in ("high", "highest"):
        u = draw_uniform(key, 0.0, 1.0, (2,) + shape, dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high, high + 2.0 ** -info.nmant * low + info.tiny)
        return -jnp.log(-jnp.log1p(-x))
    return -jnp.log(-jnp.log(draw_uniform(key, info.tiny, 1.0, shape, dtype)))


# Standard Gumbel values for a checked key, shape, float dtype and mode;
# staged by jit under the name JAX's jaxprs show (``jit[name=_gumbel]``).
draw_gumbel = jit(_gumbel, static_argnums=(1, 2, 3))


def _safe_int_to_float(words):
    """Two uint32 words per element as a float32 in (0, 1), keeping the low word's bits
    when the high word has leading zeros."""
    info = dtypes.finfo(np.float32)
    hiclz, loclz = lax.clz(words[0]), lax.clz(words[1])
    hi, lo = words[0], words[1]
    mantissa = hi << hiclz | jnp.where(hiclz == 32, lo << loclz,
                                       lax.shift_right_logical(lo, np.uint32(32) - hiclz))
    mantissa = lax.shift_right_logical(mantissa, np.uint32(32 - info.nmant - 1))
    mantissa = mantissa & np.uint32((1 << info.nmant) - 1)
    exponent = (np.uint32(-info.minexp) - jnp.where(hiclz == 32, 32 + loclz, hiclz)) << np.uint32(
        info.nmant)
    exponent = exponent & np.uint32((1 << 30) - (1 << (info.nmant - 1)))
    return lax.bitcast_convert_type(exponent | mantissa, np.float32)


@takes_out_sharding
def rademacher(key, shape=(), dtype=None):
    """Random signs -1 and +1 (integers by default)."""
    key = check_key("rademacher", key)
    dtype = np.dtype(np.int64 if dtypes.x64_enabled() else np.int32) if dtype is None else \
        dtypes.canonicalize_user_dtype(dtype)
    return draw_rademacher(key, checked_shape(shape), dtype)


def _rademacher(key, shape, dtype):
    flips = _bernoulli(key, jnp.asarray(0.5, dtypes.default_float_dtype()), shape, "low")
    return (2 * flips.astype(dtype) - 1).astype(dtype)


# Random signs for a checked key, shape and dtype;
# staged by jit under the name JAX's jaxprs show (``jit[name=_rademacher]``).
draw_rademacher = jit(_rademacher, static_argnums=(1, 2))


@takes_out_sharding
def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples truncated to ``(lower, upper)``."""
    key = check_key("truncated_normal", key)
    dtype = checked_float_dtype(dtype, "truncated_normal")
    return _truncated_normal(key, lower, upper, checked_optional_shape(shape), dtype)


@jit(static_argnums=(3, 4))
def _truncated_normal(key, lower, upper, shape, dtype):
    shape = result_shape("truncated_normal", shape, lower, upper)
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower, upper = jnp.asarray(lower).astype(dtype), jnp.asarray(upper).astype(dtype)
    a, b = lax.erf(lower / sqrt2), lax.erf(upper / sqrt2)
    out = sqrt2 * lax.erf_inv(draw_uniform(key, a, b, shape, dtype))
    return jnp.clip(out, lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype)))


@takes_out_sharding
def pareto(key, b, shape=None, dtype=None):
    """Pareto samples of shape parameter ``b`` (support [1, inf))."""
    key = check_key("pareto", key)
    dtype = checked_float_dtype(dtype, "pareto")
    shape = result_shape("pareto", checked_optional_shape(shape), b)
    return _pareto(key, b, shape, dtype)


@jit(static_argnums=(2, 3))
def _pareto(key, b, shape, dtype):
    return jnp.exp(draw_exponential(key, shape, dtype) / jnp.asarray(b).astype(dtype))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples of ``scale`` and ``concentration``."""
    key = check_key("weibull_min", key)
    dtype = checked_float_dtype(dtype, "weibull_min")
    return _weibull_min(key, scale, concentration, checked_shape(shape), dtype)


@jit(static_argnums=(3, 4))
def _weibull_min(key, scale, concentration, shape, dtype):
    u = draw_uniform(key, 0.0, 1.0, shape, dtype)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Maxwell samples with a random sign, scaled by ``scale`` around ``loc``."""
    key = check_key("double_sided_maxwell", key)
    dtype = checked_float_dtype(dtype, "double_sided_maxwell")
    return _double_sided_maxwell(key, loc, scale, checked_shape(shape), dtype)


@jit(static_argnums=(3, 4))
def _double_sided_maxwell(key, loc, scale, shape, dtype):
    params = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    shape = (shape or params) + params
    keys = threefry.split(key, (2,))
    magnitude = _maxwell(keys[0], shape, dtype)
    sign = draw_rademacher(keys[1], shape, dtype)
    return sign * magnitude * scale + loc


@takes_out_sharding
def poisson(key, lam, shape=None, dtype=None):
    """Poisson counts of rate ``lam`` (Knuth's method below 10, Hormann's transformed
    rejection from 10 on, as JAX's)."""
    key = check_key("poisson", key)
    dtype = np.dtype(np.int64 if dtypes.x64_enabled() else np.int32) if dtype is None else \
        dtypes.canonicalize_user_dtype(dtype)
    shape = tuple(np.shape(lam)) if shape is None else checked_shape(shape)
    lam = jnp.broadcast_to(lam, shape).astype(np.float32)
    return _poisson(key, lam, shape, dtype)


@jit(static_argnums=(2, 3, 4))
def _poisson_knuth(key, lam, shape, dtype, max_iters):

    def body(carry):
        i, count, rng, log_prod = carry
        pair = threefry.split(rng, (2,))
        count = lax.select(log_prod > -lam, count + 1, count)
        u = draw_uniform(pair[1], 0.0, 1.0, shape, np.dtype(np.float32))
        return i + 1, count, pair[0], log_prod + jnp.log(u)

    def cond(carry):
        i, _, _, log_prod = carry
        return jnp.any(log_prod > -lam) & (i < max_iters)

    start = (0, jnp.zeros(shape, dtype), key, jnp.zeros(shape, np.float32))
    count = lax.while_loop(cond, body, start)[1]
    return (count - 1).astype(dtype)


@jit(static_argnums=(2, 3, 4))
def _poisson_rejection(key, lam, shape, dtype, max_iters):
    log_lam = jnp.log(lam)
    b = 0.931 + 2.53 * jnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, rng = carry
        keys = threefry.split(rng, (3,))
        u = draw_uniform(keys[1], 0.0, 1.0, shape, lam.dtype) - 0.5
        v = draw_uniform(keys[2], 0.0, 1.0, shape, lam.dtype)
        u_shifted = 0.5 - jnp.abs(u)
        k = jnp.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = jnp.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, keys[0]

    def cond(carry):
        i, _, accepted, _ = carry
        return jnp.any(~accepted) & (i < max_iters)

    start = (0, jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, start)[1].astype(dtype)


@jit(static_argnums=(2, 3))
def _poisson(key, lam, shape, dtype):
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, jnp.zeros_like(lam))
    # Rejection's acceptance rate tends to 89% as lam grows: any large rate serves here.
    lam_rejection = lax.select(use_knuth, jnp.full_like(lam, 1e5), lam)
    max_iters = int(np.iinfo(dtype).max)
    result = lax.select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                        _poisson_rejection(key, lam_rejection, shape, dtype, max_iters))
    return lax.select(lam == 0, jnp.zeros_like(result), result)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial counts of ``n`` trials of success probability ``p``, as floats (inversion by
    geometric waiting times when ``n * min(p, 1-p) <= 10``, else the BTRS transformed
    rejection, as JAX's)."""
    key = check_key("binomial", key)
    dtype = checked_float_dtype(dtype, "binomial")
    return _binomial(key, n, p, checked_optional_shape(shape), dtype)


_STIRLING_TAIL = [0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287]


def _stirling_approx_tail(k):
    """log(k!) minus its Stirling approximation: tabulated up to 9, a series beyond."""
    table = jnp.array(_STIRLING_TAIL, dtype=k.dtype)
    small = k <= 9
    k = lax.clamp(np.array(0.0, k.dtype), k, np.array(9.0, k.dtype))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return lax.select(small, table[jnp.floor(k).astype(np.int32)], approx)


@jit(static_argnums=(3, 4, 5), inline=True)
def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    log1m = jnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, rng = carry
        pair = threefry.split(rng, (2,))
        num_geom = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = draw_uniform(pair[0], 0.0, 1.0, shape, prob.dtype)
        return i + 1, num_geom, geom_sum + jnp.ceil(jnp.log(u) / log1m), pair[1]

    def cond(carry):
        return jnp.any(carry[2] <= count) & (carry[0] < max_iters)

    zeros = jnp.zeros(shape, prob.dtype)
    k = lax.while_loop(cond, body, (0, zeros, zeros, key))[1]
    return (k - 1).astype(dtype)


@jit(static_argnums=(3, 4, 5), inline=True)
def _btrs(key, count, prob, shape, dtype, max_iters):
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, rng = carry
        keys = threefry.split(rng, (3,))
        u = draw_uniform(keys[1], 0.0, 1.0, shape, prob.dtype) - 0.5
        v = draw_uniform(keys[2], 0.0, 1.0, shape, prob.dtype)
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
                 + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
                 + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
                 + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
                 - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= bound))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, keys[0]

    def cond(carry):
        return jnp.any(~carry[2]) & (carry[0] < max_iters)

    start = (0, jnp.full(shape, -1, prob.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, start)[1].astype(dtype)


@jit(static_argnums=(3, 4), inline=True)
def _binomial(key, count, prob, shape, dtype):
    shape = result_shape("binomial", shape, count, prob)
    prob = jnp.asarray(prob)
    if not dtypes.is_inexact(prob.dtype):
        prob = prob.astype(dtypes.default_float_dtype())
    count = jnp.broadcast_to(jnp.asarray(count).astype(prob.dtype), shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan, q_lt_0 = jnp.isnan(q), q < 0.0
    q = lax.select(q_is_nan | q_lt_0, jnp.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)  # float counts round down, as numpy's
    count_inv = lax.select(use_inversion, count, jnp.zeros_like(count))
    count_btrs = lax.select(use_inversion, jnp.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, jnp.full_like(q, 0.5), q)
    max_iters = float(np.finfo(dtype).max)
    samples = lax.select(use_inversion,
                         _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                         _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_lt_0 | q_is_nan | count_nan_or_neg
    samples = lax.select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dtype), samples)
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      count.astype(dtype) - samples)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Counts of ``n`` draws among the categories of ``p`` (last axis): one binomial per
    category on what the earlier categories left, in a scan, as JAX's."""
    key = check_key("multinomial", key)
    n, p = jnp.asarray(n), jnp.asarray(p)
    common = dtypes.result_type(n, p)
    if not dtypes.is_inexact(common):
        common = np.dtype(dtypes.default_float_dtype())
    n, p = n.astype(common), p.astype(common)
    shape = tuple(p.shape) if shape is None else checked_shape(shape)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    left = lax.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(left == 0, 1, left)
    keys = threefry.split(key, (ratios.shape[0],))

    def draw(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial(k, remainder, jnp.clip(ratio, 0, 1), dtype=remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(draw, n, (ratios, keys), unroll=unroll)
    counts = jnp.moveaxis(counts, 0, -1)
    return counts if dtype is None else counts.astype(dtype)
