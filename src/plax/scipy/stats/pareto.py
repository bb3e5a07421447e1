"""The Pareto distribution with shape ``b`` on [loc + scale, inf)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy.stats._common import promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, b, loc=0, scale=1):
    """Log of the Pareto density b / y**(b + 1) / scale (-inf below loc + scale)."""
    x, b, loc, scale = promote("pareto.logpdf", x, b, loc, scale)
    y = standardize(x, loc, scale)
    out = jnp.subtract(jnp.log(b), jnp.add(jnp.multiply(jnp.add(b, 1), jnp.log(y)), jnp.log(scale)))
    return jnp.where(jnp.less(x, jnp.add(loc, scale)), -np.inf, out)


def pdf(x, b, loc=0, scale=1):
    """The Pareto density at ``x``."""
    return lax.exp(logpdf(x, b, loc, scale))


def logsf(x, b, loc=0, scale=1):
    """Log of the Pareto survival function, -b log(y) (0 below loc + scale)."""
    x, b, loc, scale = promote("pareto.logsf", x, b, loc, scale)
    y = standardize(x, loc, scale)
    return jnp.where(jnp.less(x, jnp.add(loc, scale)), 0, jnp.negative(jnp.multiply(b, jnp.log(y))))


def sf(x, b, loc=0, scale=1):
    """The Pareto survival function y**-b."""
    return lax.exp(logsf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    """The Pareto CDF 1 - y**-b."""
    return jnp.negative(jnp.expm1(logsf(x, b, loc, scale)))


def logcdf(x, b, loc=0, scale=1):
    """Log of the Pareto CDF."""
    return jnp.log1p(jnp.negative(sf(x, b, loc, scale)))


def ppf(q, b, loc=0, scale=1):
    """The Pareto quantile function loc + scale * (1 - q)**(-1 / b) (NaN outside [0, 1])."""
    q, b, loc, scale = promote("pareto.ppf", q, b, loc, scale)
    y = jnp.power(jnp.subtract(1, q), jnp.negative(jnp.reciprocal(b)))
    y = jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), np.nan, y)
    return jnp.add(jnp.multiply(y, scale), loc)
