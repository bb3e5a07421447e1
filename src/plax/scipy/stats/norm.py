"""The normal distribution N(loc, scale**2)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import log_ndtr, promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    """Log of the normal density at ``x``: (log(2 pi scale**2) + (x - loc)**2 / scale**2) / -2,
    in that order (JAX's: its values and gradients round the same)."""
    x, loc, scale = promote("norm.logpdf", x, loc, scale)
    var = lax.square(scale)
    log_norm = lax.log(lax.mul(lax.full_like(x, 2 * np.pi, shape=()), var))
    return lax.div(lax.add(log_norm, lax.div(lax.square(lax.sub(x, loc)), var)),
                   lax.full_like(x, -2, shape=()))


def pdf(x, loc=0, scale=1):
    """The normal density at ``x``."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The normal CDF P(X <= x)."""
    x, loc, scale = promote("norm.cdf", x, loc, scale)
    return special.ndtr(standardize(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """Log of the normal CDF, accurate in the lower tail."""
    x, loc, scale = promote("norm.logcdf", x, loc, scale)
    return log_ndtr(standardize(x, loc, scale))


def sf(x, loc=0, scale=1):
    """The normal survival function P(X > x)."""
    x, loc, scale = promote("norm.sf", x, loc, scale)
    return special.ndtr(lax.neg(standardize(x, loc, scale)))


def logsf(x, loc=0, scale=1):
    """Log of the normal survival function, accurate in the upper tail."""
    x, loc, scale = promote("norm.logsf", x, loc, scale)
    return log_ndtr(lax.neg(standardize(x, loc, scale)))


def ppf(q, loc=0, scale=1):
    """The normal quantile function, the inverse of cdf."""
    q, loc, scale = promote("norm.ppf", q, loc, scale)
    return jnp.add(jnp.multiply(special.ndtri(q), scale), loc)


def isf(q, loc=0, scale=1):
    """The inverse of sf: the x with P(X > x) = q."""
    q, loc, scale = promote("norm.isf", q, loc, scale)
    return jnp.add(jnp.multiply(jnp.negative(special.ndtri(q)), scale), loc)
