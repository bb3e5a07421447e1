"""Permutations, choices, categorical draws and the remaining simple continuous samplers of
plax.random, each with JAX's signature and JAX's construction (the same order of key splits,
the same draws of bits), so that the same legacy key gives JAX's values.

* ``permutation`` shuffles with rounds of a stable sort keyed by fresh 32-bit random words
  (enough rounds that ties are unlikely, as JAX's static criterion decides).
* ``choice`` draws indices with ``randint`` (uniform, with replacement), a permutation
  (uniform, without replacement), inverse-CDF search in the cumulative sum of ``p`` (weighted,
  with replacement) or the Gumbel top-k trick (weighted, without replacement).
* ``categorical`` is the Gumbel-max trick (top-k of the perturbed logits without replacement).
* ``geometric``, ``lognormal``, ``triangular``, ``rayleigh`` and ``wald`` transform uniform and
  normal draws; ``clone`` is the identity on legacy keys.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.numpy import util
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.trace import concrete_or_error
from plax.first_order.sharding_constraint import takes_out_sharding
from plax.random import threefry
from plax.random.distributions import draw_gumbel
from plax.random.keys import check_key
from plax.random.samplers import (check_param_shapes, checked_float_dtype, checked_shape,
                                  draw_normal, draw_uniform, randint)

__all__ = ["permutation", "choice", "categorical", "geometric", "lognormal", "triangular",
           "rayleigh", "wald"]





def _gumbel_mode(mode):
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return mode


# --- permutation ---------------------------------------------------------------------------
@takes_out_sharding
def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` (an integer ``x``) or of the slices of the array
    ``x`` along ``axis``; ``independent=True`` shuffles every 1-D lane along ``axis`` with its
    own order instead of one order for all."""
    key = check_key("permutation", key)
    util.check_arraylike("permutation", x)
    axis = util.canonicalize_axis(axis, np.ndim(x) or 1)
    if not np.ndim(x):
        if not dtypes.is_integer(dtypes.result_type(x)):
            raise TypeError("x must be an integer or at least 1-dimensional")
        n = concrete_or_error(int, x, "argument x of jax.random.permutation()")
        return _shuffle(key, jnp.arange(n), axis)
    x = jnp.asarray(x)
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, order, axis, unique_indices=True)


@jit(static_argnums=(2,))
def _shuffle(key, x, axis):
    # Sorting by random 32-bit words is a uniform shuffle once no two elements tie in the
    # concatenation of the words of all rounds; JAX fixes the number of rounds statically so
    # that ties are unlikely: ceil(3 * log(n) / log(2**32 - 1)).
    size = math.prod(x.shape)
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = threefry.split(key, (2,))  # (a split ends in an optimization barrier)
        key, subkey = keys[0], keys[1]
        words = threefry.random_bits(subkey, 32, x.shape)
        _, x = lax.sort_key_val(words, x, axis)
    return x


# --- choice --------------------------------------------------------------------------------
def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Random samples of ``shape`` from the entries of ``a`` along ``axis`` (or from
    ``arange(a)`` for an integer ``a``), with or without replacement, uniform or with the
    probabilities ``p`` (a 1-D vector of length ``a.shape[axis]``). ``mode`` ("low"/"high")
    is the Gumbel mode used for weighted draws without replacement."""
    key = check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
    util.check_arraylike("choice", a)
    arr = jnp.asarray(a)
    if arr.ndim == 0:
        n_inputs = concrete_or_error(int, a, "The error occurred in jax.random.choice()")
    else:
        axis = util.canonicalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    shape = checked_shape(shape)
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
        else:
            slices = (slice(None),) * axis + (slice(n_draws),)
            result = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)[slices]
    else:
        util.check_arraylike("choice", p)
        p_arr, = util.promote_dtypes_inexact(p)
        p_arr = jnp.asarray(p_arr)
        if p_arr.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as "
                             f"a.shape[axis]. p has shape {p_arr.shape} and a.shape[axis] is "
                             f"{n_inputs}.")
        if replace:
            ind = _choice_cdf(key, p_arr, shape)
        else:
            ind = _choice_top_k(key, p_arr, n_draws, _gumbel_mode(mode))
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    return result.reshape(shape if arr.ndim == 0 else
                          arr.shape[:axis] + tuple(shape) + arr.shape[axis + 1:])


@jit(static_argnums=(2,))
def _choice_cdf(key, p, shape):
    cdf = jnp.cumsum(p)
    r = cdf[-1] * (1 - draw_uniform(key, 0.0, 1.0, shape, cdf.dtype))
    return jnp.searchsorted(cdf, r).astype(int)


@jit(static_argnums=(2, 3))
def _choice_top_k(key, p, k, mode):
    g = draw_gumbel(key, (p.shape[0],), p.dtype, mode) + jnp.log(p)
    return lax.top_k(g, k)[1].astype(int)


# --- categorical ---------------------------------------------------------------------------
@takes_out_sharding
def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Category indices drawn with probabilities ``softmax(logits, axis)``: the Gumbel-max
    trick, or the Gumbel top-k trick when ``replace=False`` (then the leading dimensions of
    ``shape`` beyond the batch shape count the distinct samples per distribution). The result
    has ``shape``, by default the shape of ``logits`` without ``axis``."""
    key = check_key("categorical", key)
    util.check_arraylike("categorical", logits)
    logits = jnp.asarray(logits)
    axis = concrete_or_error(operator.index, axis, "The axis argument of categorical")
    batch_shape = tuple(np.delete(logits.shape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = checked_shape(shape)
        check_param_shapes("categorical", shape, batch_shape)
    dtype = checked_float_dtype(logits.dtype, "gumbel")
    mode = _gumbel_mode(mode)
    prefix = shape[:len(shape) - len(batch_shape)]
    if not replace:
        k = math.prod(prefix)
        if k > logits.shape[axis]:
            raise ValueError(f"Number of samples without replacement ({k}) cannot exceed "
                             f"number of categories ({logits.shape[axis]}).")
        if shape != prefix + batch_shape:
            raise ValueError(f"categorical with replace=False needs the trailing dimensions of "
                             f"shape {shape} to equal the batch shape {batch_shape}.")
        return _categorical_top_k(key, logits, shape, prefix, axis, dtype, mode)
    return _categorical_max(key, logits, shape, batch_shape, axis, dtype, mode)


@jit(static_argnums=(2, 3, 4, 5, 6))
def _categorical_max(key, logits, shape, batch_shape, axis, dtype, mode):
    ndim = logits.ndim
    if axis >= 0:
        axis -= ndim
    prefix = shape[:len(shape) - len(batch_shape)]
    noise_shape = list(shape[len(shape) - len(batch_shape):])
    noise_shape.insert(axis % ndim, logits.shape[axis])
    noise = draw_gumbel(key, (*prefix, *noise_shape), dtype, mode)
    return jnp.argmax(noise + lax.expand_dims(logits, tuple(range(len(prefix)))), axis=axis)


@jit(static_argnums=(2, 3, 4, 5, 6))
def _categorical_top_k(key, logits, shape, prefix, axis, dtype, mode):
    logits = logits + draw_gumbel(key, logits.shape, dtype, mode)
    _, indices = lax.top_k(jnp.moveaxis(logits, axis, -1), math.prod(prefix))
    # indices: batch_shape + (k,); the k samples lead the result.
    last = indices.ndim - 1
    return lax.reshape(indices, shape, (last, *range(last)))


# --- simple continuous and integer samplers ------------------------------------------------
def _check_broadcast_shapes(name, shape, *args):
    shapes = [np.shape(a) for a in args]
    if shape is None:
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError("Incompatible shapes for broadcasting: shapes="
                             f"{[tuple(s) for s in shapes]}") from None
    shape = checked_shape(shape)
    check_param_shapes(name, shape, *shapes)
    return shape


def _check_all_safe_to_cast(name, dtype, *args):
    for arg in args:
        src = dtypes.result_type(arg)
        if src != dtype and dtypes.result_type(arg, dtype) != dtype:
            raise dtypes.TypePromotionError(f"In arguments to {name}, cannot safely cast "
                                            f"argument of type {src} to {dtype}")


def _user_dtype(dtype, default):
    return np.dtype(default) if dtype is None else dtypes.canonicalize_user_dtype(dtype)


@takes_out_sharding
def geometric(key, p, shape=None, dtype=None):
    """Geometric samples: the number of Bernoulli(``p``) trials up to the first success
    (integers >= 1, int32 by default, int64 with x64)."""
    key = check_key("geometric", key)
    dtype = _user_dtype(dtype, dtypes.default_int_dtype())
    if not dtypes.is_integer(dtype):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = _check_broadcast_shapes("geometric", shape, p)
    util.check_arraylike("geometric", p)
    return _geometric(key, p, shape, dtype)


@jit(static_argnums=(2, 3))
def _geometric(key, p, shape, dtype):
    p, = util.promote_dtypes_inexact(p)
    u = draw_uniform(key, 0.0, 1.0, shape, p.dtype)
    u = jnp.where(u == 0, 1, u)  # as JAX: a draw of 0 counts as 1 (no infinite log)
    log_q = jnp.broadcast_to(lax.log1p(-p), shape)
    return (lax.floor(lax.div(lax.log(u), log_q)) + 1).astype(dtype)


@takes_out_sharding
def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """Log-normal samples: ``exp(sigma * normal)`` (complex dtypes use complex normals); the
    shape defaults to that of ``sigma``."""
    key = check_key("lognormal", key)
    dtype = _user_dtype(dtype, dtypes.default_float_dtype())
    if not dtypes.is_inexact(dtype):
        raise ValueError(f"dtype argument to `lognormal` must be a float or complex dtype, "
                         f"got {dtype}")
    shape = _check_broadcast_shapes("lognormal", shape, sigma)
    _check_all_safe_to_cast("lognormal", dtype, sigma)
    return _lognormal(key, sigma, shape, dtype)


@jit(static_argnums=(2, 3))
def _lognormal(key, sigma, shape, dtype):
    return lax.exp(draw_normal(key, shape, dtype) * lax.convert_element_type(sigma, dtype))


@takes_out_sharding
def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular samples on ``[left, right]`` with peak ``mode`` (inverse-CDF of one uniform
    draw); the shape defaults to the broadcast of the parameters."""
    key = check_key("triangular", key)
    dtype = checked_float_dtype(dtype, "triangular")
    shape = _check_broadcast_shapes("triangular", shape, left, mode, right)
    _check_all_safe_to_cast("triangular", dtype, left, mode, right)
    return _triangular(key, left, mode, right, shape, dtype)


@jit(static_argnums=(4, 5))
def _triangular(key, left, mode, right, shape, dtype):
    left, mode, right = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape)
                         for v in (left, mode, right))
    fc = (mode - left) / (right - left)
    u = draw_uniform(key, 0.0, 1.0, shape, dtype)
    below = left + lax.sqrt(u * (right - left) * (mode - left))
    above = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, below, above)


@takes_out_sharding
def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh samples of ``scale``: ``scale * sqrt(-2 log u)``; the shape defaults to that
    of ``scale``."""
    key = check_key("rayleigh", key)
    dtype = checked_float_dtype(dtype, "rayleigh")
    shape = _check_broadcast_shapes("rayleigh", shape, scale)
    _check_all_safe_to_cast("rayleigh", dtype, scale)
    return _rayleigh(key, scale, shape, dtype)


@jit(static_argnums=(2, 3))
def _rayleigh(key, scale, shape, dtype):
    u = draw_uniform(key, 0.0, 1.0, shape, dtype)
    scale = jnp.broadcast_to(jnp.asarray(scale).astype(dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), np.array(-2, dtype))))


@takes_out_sharding
def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) samples of ``mean`` and unit shape parameter, from one normal
    and one uniform draw (Michael, Schucany and Haas); the shape defaults to that of
    ``mean``."""
    key = check_key("wald", key)
    dtype = checked_float_dtype(dtype, "wald")
    shape = _check_broadcast_shapes("wald", shape, mean)
    _check_all_safe_to_cast("wald", dtype, mean)
    return _wald(key, mean, shape, dtype)


@jit(static_argnums=(2, 3))
def _wald(key, mean, shape, dtype):
    keys = threefry.split(key, (2,))
    mean = jnp.broadcast_to(jnp.asarray(mean).astype(dtype), shape)
    v = draw_normal(keys[0], shape, dtype)
    z = draw_uniform(keys[1], 0.0, 1.0, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    root = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * root
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)
