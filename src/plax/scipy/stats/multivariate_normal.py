"""The multivariate normal distribution N(mean, cov), through the Cholesky factor of cov."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.numpy.util import check_arraylike, promote_dtypes_inexact
from plax.scipy.stats._common import LOG_2PI

__all__ = ["logpdf", "pdf"]


def logpdf(x, mean, cov, allow_singular=None):
    """Log of the density at ``x`` (..., n) of N(``mean``, ``cov``): ``cov`` is an n x n
    matrix (or a batch of them) or a scalar variance shared by every coordinate; with a
    scalar ``mean`` the distribution is univariate. A covariance that is not positive
    definite gives NaN."""
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf is "
                                  "not supported: pass a positive-definite covariance.")
    check_arraylike("multivariate_normal.logpdf", x, mean, cov)
    x, mean, cov = (jnp.asarray(v) for v in promote_dtypes_inexact(x, mean, cov))
    if mean.ndim == 0:  # univariate, with variance cov
        return -0.5 * jnp.square(x - mean) / cov - 0.5 * (LOG_2PI + jnp.log(cov))
    n = mean.shape[-1]
    diff = x - mean
    if cov.ndim == 0:  # cov * I
        return (-0.5 * jnp.sum(jnp.square(diff), axis=-1) / cov
                - 0.5 * n * (LOG_2PI + jnp.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf got incompatible shapes: mean {mean.shape} "
                         f"needs cov of shape (..., {n}, {n}) or a scalar, got {cov.shape}.")
    factor = jnp.linalg.cholesky(cov)
    batch = jnp.broadcast_shapes(diff.shape[:-1], cov.shape[:-2])
    factor = jnp.broadcast_to(factor, batch + (n, n))
    diff = jnp.broadcast_to(diff, batch + (n,))
    y = lax.linalg.triangular_solve(factor, diff, left_side=True, lower=True)
    log_det = jnp.sum(jnp.log(jnp.abs(jnp.diagonal(factor, axis1=-2, axis2=-1))), axis=-1)
    return -0.5 * jnp.sum(jnp.square(y), axis=-1) - 0.5 * n * LOG_2PI - log_det


def pdf(x, mean, cov, allow_singular=None):
    """The density at ``x`` of N(``mean``, ``cov``) (see logpdf)."""
    return lax.exp(logpdf(x, mean, cov, allow_singular))
