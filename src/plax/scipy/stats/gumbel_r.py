"""The right-skewed Gumbel (extreme value of maxima) distribution."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy.stats._common import nan_unless, promote, standardize_positive

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """Log of the density: -(z + exp(-z)) - log(scale)."""
    x, loc, scale = promote("gumbel_r.logpdf", x, loc, scale)
    z = standardize_positive(x, loc, scale)
    return jnp.negative(jnp.add(jnp.add(z, jnp.exp(jnp.negative(z))), jnp.log(scale)))


def pdf(x, loc=0, scale=1):
    """The Gumbel density at ``x``."""
    return lax.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """Log of the CDF: -exp(-z)."""
    x, loc, scale = promote("gumbel_r.logcdf", x, loc, scale)
    return jnp.negative(jnp.exp(jnp.negative(standardize_positive(x, loc, scale))))


def cdf(x, loc=0, scale=1):
    """The CDF exp(-exp(-z))."""
    return lax.exp(logcdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """The survival function 1 - exp(-exp(-z))."""
    x, loc, scale = promote("gumbel_r.sf", x, loc, scale)
    z = standardize_positive(x, loc, scale)
    return jnp.negative(jnp.expm1(jnp.negative(jnp.exp(jnp.negative(z)))))


def logsf(x, loc=0, scale=1):
    """Log of the survival function."""
    return jnp.log(sf(x, loc, scale))


def ppf(p, loc=0, scale=1):
    """The quantile function loc - scale * log(-log(p)) (NaN outside (0, 1))."""
    p, loc, scale = promote("gumbel_r.ppf", p, loc, scale)
    z = jnp.negative(jnp.log(jnp.negative(jnp.log(p))))
    z = nan_unless(jnp.logical_and(jnp.greater(p, 0), jnp.less(p, 1)), z)
    return jnp.add(jnp.multiply(z, scale), loc)
