"""Samplers that need linear algebra: multivariate normal vectors and random orthogonal
matrices, drawn as JAX draws them (the same key gives JAX's values)."""
from __future__ import annotations

import operator

import numpy as np

from plax import numpy as jnp
from plax.api.jit import jit
from plax.first_order.sharding_constraint import takes_out_sharding
from plax.numpy.util import promote_dtypes_inexact
from plax.random.keys import check_key
from plax.random.samplers import (check_param_shapes, checked_float_dtype,
                                  checked_optional_shape, checked_shape, draw_normal)

__all__ = ["multivariate_normal", "orthogonal"]

_METHODS = ("svd", "eigh", "cholesky")


@takes_out_sharding
def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Normal vectors with mean ``mean`` (..., n) and covariance ``cov`` (..., n, n): the
    covariance's factor (Cholesky, or from its eigendecomposition or SVD, ``method``) applied
    to standard normal draws. ``shape`` is the batch shape (default: that of the broadcast
    parameters); the result has shape ``shape + (n,)``."""
    if method not in _METHODS:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    key = check_key("multivariate_normal", key)
    mean, cov = (jnp.asarray(x) for x in promote_dtypes_inexact(mean, cov))
    dtype = mean.dtype if dtype is None else checked_float_dtype(dtype, "multivariate_normal")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but "
                         f"got cov.shape == {cov.shape}.")
    shape = checked_optional_shape(shape)
    if shape is None:
        shape = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    else:
        check_param_shapes("normal", shape, mean.shape[:-1], cov.shape[:-2])
    return _multivariate_normal(key, mean, cov, shape, np.dtype(dtype), method)


@jit(static_argnums=(3, 4, 5))
def _multivariate_normal(key, mean, cov, shape, dtype, method):
    if method == "cholesky":
        factor = jnp.linalg.cholesky(cov)
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w)[..., None, :]
    else:
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s)[..., None, :]
    z = draw_normal(key, shape + mean.shape[-1:], dtype)
    out = jnp.einsum("...ij,...j->...i", factor, z)
    # the leading batch dimensions explicitly (so jax_numpy_rank_promotion='raise' is fine)
    return mean.reshape((1,) * (out.ndim - mean.ndim) + mean.shape) + out


@takes_out_sharding
def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Random matrices with orthonormal columns (or rows), uniform in the Haar measure: n x n
    (n x ``m`` when given) with batch ``shape``, from the QR factorisation of a normal draw
    with the signs of R's diagonal moved into Q."""
    key = check_key("orthogonal", key)
    dtype = checked_float_dtype(dtype, "orthogonal", kinds=("float", "complex"))
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    return _orthogonal(key, n, m, checked_shape(shape), dtype)


@jit(static_argnums=(1, 2, 3, 4))
def _orthogonal(key, n, m, shape, dtype):
    z = draw_normal(key, shape + (max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    phase = d / jnp.abs(d).astype(d.dtype)
    q = q * phase[..., None, :]
    return q if n >= m else jnp.swapaxes(q, -1, -2)
