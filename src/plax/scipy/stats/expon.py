"""The exponential distribution on [loc, inf) with mean loc + scale."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy.stats._common import promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """Log of the exponential density at ``x`` (-inf below ``loc``)."""
    x, loc, scale = promote("expon.logpdf", x, loc, scale)
    z = standardize(x, loc, scale)
    return jnp.where(jnp.less(x, loc), -np.inf, jnp.negative(jnp.add(z, jnp.log(scale))))


def pdf(x, loc=0, scale=1):
    """The exponential density at ``x``."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The exponential CDF 1 - exp(-(x - loc) / scale)."""
    x, loc, scale = promote("expon.cdf", x, loc, scale)
    z = standardize(x, loc, scale)
    return jnp.where(jnp.less(x, loc), 0, jnp.negative(jnp.expm1(jnp.negative(z))))


def logcdf(x, loc=0, scale=1):
    """Log of the exponential CDF."""
    x, loc, scale = promote("expon.logcdf", x, loc, scale)
    z = standardize(x, loc, scale)
    return jnp.where(jnp.less(x, loc), -np.inf, jnp.log(jnp.negative(jnp.expm1(jnp.negative(z)))))


def sf(x, loc=0, scale=1):
    """The exponential survival function exp(-(x - loc) / scale)."""
    return lax.exp(logsf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """Log of the exponential survival function."""
    x, loc, scale = promote("expon.logsf", x, loc, scale)
    z = standardize(x, loc, scale)
    return jnp.where(jnp.less(x, loc), 0, jnp.negative(z))


def ppf(q, loc=0, scale=1):
    """The exponential quantile function (NaN outside [0, 1])."""
    q, loc, scale = promote("expon.ppf", q, loc, scale)
    z = jnp.negative(jnp.log1p(jnp.negative(q)))
    z = jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), np.nan, z)
    return jnp.add(jnp.multiply(z, scale), loc)
