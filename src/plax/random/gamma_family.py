"""The gamma family of plax.random: gamma and loggamma (Marsaglia and Tsang's method, with
the implicit-reparameterisation gradient), and beta, dirichlet, chisquare, f, t,
generalized_normal and ball built on them, each as JAX constructs it.

The derivative of a gamma sample with respect to its shape parameter is
``-dF/da / dF/dx`` for the gamma CDF ``F``: ``plax.lax.random_gamma_grad`` computes it
with the incomplete-gamma series (small ``x``) or continued fraction (large ``x``)
carried together with their derivatives in ``a``.

``random_gamma_p`` (JAX's ``random_gamma``) is the sampler as one primitive: ``(key, a)``
with ``log_space`` -> samples shaped as ``a``, each element drawn with its own key split
from ``key`` (a batch of keys leading ``a``'s dimensions: each key for its own block). Its
jvp is the implicit-reparameterisation derivative above; vmap moves both batch dimensions
to the front; it lowers by tracing the sampler; the key-reuse checker counts the key as
consumed.
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.api.vmap import vmap
from plax.core import dtypes
from plax.core.primitive import Primitive
from plax.core.key_reuse_signatures import KeyReuseSignature, Sink
from plax.core.rules import abstract_eval_rules, batch_rules, key_reuse_rules, register_lowering
from plax.first_order.ad_util import defjvp
from plax.first_order.batch_util import bdim_at_front
from plax.lowering.inline import lower_fun
from plax.first_order.sharding_constraint import takes_out_sharding
from plax.higher_order.special import random_gamma_grad
from plax.random import threefry
from plax.random.distributions import draw_exponential, draw_rademacher
from plax.random.keys import check_key
from plax.random.samplers import (check_param_shapes, checked_float_dtype,
                                  checked_optional_shape, checked_shape, draw_normal,
                                  draw_uniform, result_shape)

__all__ = ["gamma", "loggamma", "beta", "dirichlet", "chisquare", "f", "t",
           "generalized_normal", "ball", "random_gamma_grad", "random_gamma_p"]

random_gamma_p = Primitive("random_gamma")


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
            x = draw_normal(pair[1], (), dtype)
            return pair[0], x, one + x * c

        _, x, v = lax.while_loop(lambda kxv: kxv[2] <= np.array(0, dtype), next_normal,
                                 (keys[1], np.array(0, dtype), np.array(-1, dtype)))
        U = draw_uniform(keys[2], 0.0, 1.0, (), dtype)
        return keys[0], x * x, v * v * v, U

    pair = threefry.split(key, (2,))
    _, _, V, _ = lax.while_loop(rejected, propose,
                                (pair[0], np.array(0, dtype), one, np.array(2, dtype)))
    if log_space:
        log_u = -draw_exponential(pair[1], (), dtype)
        log_boost = lax.select(boost | (log_u == 0), np.array(0, dtype), log_u * (one / alpha_orig))
        return jnp.log(d) + jnp.log(V) + log_boost
    u = one - draw_uniform(pair[1], 0.0, 1.0, (), dtype)
    return d * V * lax.select(boost, one, jnp.power(u, one / alpha_orig))


def _gamma_samples(key, a, *, log_space: bool):
    """Gamma samples of the shape parameters ``a`` (any shape): one key per element, split
    from ``key`` (or from each of a batch of keys leading ``a``'s dimensions, for its block)."""
    count = math.prod(a.shape)
    if count == 0:
        return jnp.zeros(a.shape, a.dtype)
    keys = threefry.split(key, (math.prod(a.shape[key.ndim:]),))
    keys = lax.reshape(keys, (count,))
    flat = jnp.reshape(a, (count,))
    samples = vmap(lambda k, x: _gamma_one(k, x, log_space))(keys, flat)
    return jnp.reshape(samples, a.shape)


def _gamma_abstract(key, a, *, log_space):
    if not dtypes.issubdtype(key.dtype, dtypes.prng_key) or key.shape != a.shape[:key.ndim]:
        raise TypeError(f"random_gamma takes a typed key array whose shape leads the shape "
                        f"parameters' ({a.str_short()}), got {key.str_short()}.")
    return a


def _gamma_batch(axis, vals, dims, *, log_space):
    key, a = (bdim_at_front(x, d, axis.size) for x, d in zip(vals, dims))
    return random_gamma_p.bind(key, a, log_space=log_space), 0


abstract_eval_rules[random_gamma_p] = _gamma_abstract
register_lowering(random_gamma_p, lower_fun(_gamma_samples))
defjvp(random_gamma_p, None,
       lambda t, sample, key, a, *, log_space: t * _gamma_sample_grad(sample, a, log_space))
batch_rules[random_gamma_p] = _gamma_batch
key_reuse_rules[random_gamma_p] = KeyReuseSignature(Sink(0))  # (as JAX: the key is consumed)


def _gamma_sample_grad(sample, a, log_space: bool):
    if log_space:  # d log(s) = ds / s; an exp that underflows counts as the smallest float
        s = jnp.exp(sample)
        s = lax.select(s == 0, jnp.full_like(s, dtypes.finfo(s.dtype).tiny), s)
        return random_gamma_grad(a, s) / s
    return random_gamma_grad(a, sample)


# --- the public samplers -------------------------------------------------------------------
@takes_out_sharding
def gamma(key, a, shape=None, dtype=None):
    """Gamma samples of shape parameter ``a`` (and scale 1); differentiable in ``a``."""
    key = check_key("gamma", key)
    dtype = checked_float_dtype(dtype, "gamma")
    return _gamma(key, a, checked_optional_shape(shape), dtype, False)


@takes_out_sharding
def loggamma(key, a, shape=None, dtype=None):
    """The logs of Gamma(a) samples, accurate for small ``a`` where the samples underflow."""
    key = check_key("loggamma", key)
    dtype = checked_float_dtype(dtype, "loggamma")
    return _gamma(key, a, checked_optional_shape(shape), dtype, True)


@jit(static_argnums=(2, 3, 4))
def _gamma(key, a, shape, dtype, log_space):
    shape = result_shape("gamma", shape, a)
    a = jnp.asarray(a).astype(dtype)
    if a.shape != shape:
        a = jnp.broadcast_to(a, shape)
    return random_gamma_p.bind(key, a, log_space=log_space)


@takes_out_sharding
def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples, as ratios of log-space gamma samples."""
    key = check_key("beta", key)
    dtype = checked_float_dtype(dtype, "beta")
    return _beta(key, a, b, checked_optional_shape(shape), dtype)


@jit(static_argnums=(3, 4))
def _beta(key, a, b, shape, dtype):
    shape = result_shape("beta", shape, a, b)
    keys = threefry.split(key, (2,))
    a = jnp.broadcast_to(jnp.asarray(a).astype(dtype), shape)
    b = jnp.broadcast_to(jnp.asarray(b).astype(dtype), shape)
    log_a = _gamma(keys[0], a, shape, dtype, True)
    log_b = _gamma(keys[1], b, shape, dtype, True)
    top = jnp.maximum(log_a, log_b)
    ga, gb = jnp.exp(log_a - top), jnp.exp(log_b - top)
    return ga / (ga + gb)


@takes_out_sharding
def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet samples (over the last axis of ``alpha``)."""
    key = check_key("dirichlet", key)
    dtype = checked_float_dtype(dtype, "dirichlet")
    if not np.ndim(alpha) >= 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{np.ndim(alpha)}")
    return _dirichlet(key, alpha, checked_optional_shape(shape), dtype)


@jit(static_argnums=(2, 3))
def _dirichlet(key, alpha, shape, dtype):
    if shape is None:
        shape = tuple(np.shape(alpha)[:-1])
    else:
        check_param_shapes("dirichlet", shape, np.shape(alpha)[:-1])
    alpha = jnp.asarray(alpha).astype(dtype)
    logs = _gamma(key, alpha, shape + np.shape(alpha)[-1:], dtype, True)
    # A softmax over the last axis (of the log-gamma samples).
    shifted = jnp.exp(logs - lax.stop_gradient(jnp.max(logs, axis=-1, keepdims=True)))
    return shifted / jnp.sum(shifted, axis=-1, keepdims=True)


@takes_out_sharding
def chisquare(key, df, shape=None, dtype=None):
    """Chi-square samples with ``df`` degrees of freedom."""
    key = check_key("chisquare", key)
    dtype = checked_float_dtype(dtype, "chisquare")
    shape = result_shape("chisquare", checked_optional_shape(shape), df)
    return _chisquare(key, df, shape, dtype)


@jit(static_argnums=(2, 3))
def _chisquare(key, df, shape, dtype):
    half = jnp.asarray(df).astype(dtype) / np.array(2, dtype)
    return jnp.exp(_gamma(key, half, shape, dtype, True)) * np.array(2, dtype)


@takes_out_sharding
def f(key, dfnum, dfden, shape=None, dtype=None):
    """F-distribution samples: a ratio of two scaled chi-squares."""
    key = check_key("f", key)
    dtype = checked_float_dtype(dtype, "f")
    shape = result_shape("f", checked_optional_shape(shape), dfnum, dfden)
    return _f(key, dfnum, dfden, shape, dtype)


@jit(static_argnums=(3, 4))
def _f(key, dfnum, dfden, shape, dtype):
    dfden, dfnum = jnp.asarray(dfden).astype(dtype), jnp.asarray(dfnum).astype(dtype)
    keys = threefry.split(key, (2,))
    num = _chisquare(keys[1], dfnum, shape, dtype) / dfnum
    den = _chisquare(keys[0], dfden, shape, dtype) / dfden
    return num / den


@takes_out_sharding
def t(key, df, shape=None, dtype=None):
    """Student's t samples with ``df`` degrees of freedom."""
    key = check_key("t", key)
    dtype = checked_float_dtype(dtype, "t")
    return _t(key, df, checked_optional_shape(shape), dtype)


@jit(static_argnums=(2, 3))
def _t(key, df, shape, dtype):
    shape = result_shape("t", shape, df)
    df = jnp.asarray(df).astype(dtype)
    keys = threefry.split(key, (2,))
    n = draw_normal(keys[0], shape, dtype)
    half = df / np.array(2, dtype)
    g = _gamma(keys[1], half, shape, dtype, False)
    return n * jnp.sqrt(half / g)


@takes_out_sharding
def generalized_normal(key, p, shape=(), dtype=None):
    """Samples of density proportional to ``exp(-|x|**p)``."""
    key = check_key("generalized_normal", key)
    dtype = checked_float_dtype(dtype, "generalized_normal")
    check_param_shapes("generalized_normal", checked_shape(shape), np.shape(p))
    return _generalized_normal(key, p, checked_shape(shape), dtype)


@jit(static_argnums=(2, 3))
def _generalized_normal(key, p, shape, dtype):
    keys = threefry.split(key, (2,))
    g = _gamma(keys[0], 1 / p, shape, dtype, False)
    r = draw_rademacher(keys[1], shape, dtype)
    return r * g ** (1 / p)


@takes_out_sharding
def ball(key, d, p=2, shape=(), dtype=None):
    """Points drawn uniformly from the unit ``p``-norm ball in ``d`` dimensions."""
    key = check_key("ball", key)
    dtype = checked_float_dtype(dtype, "ball")
    d = int(d)
    return _ball(key, p, d, checked_shape(shape), dtype)


@jit(static_argnums=(2, 3, 4))
def _ball(key, p, d, shape, dtype):
    keys = threefry.split(key, (2,))
    g = _generalized_normal(keys[0], p, (*shape, d), dtype)
    e = draw_exponential(keys[1], shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]
