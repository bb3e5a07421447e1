"""The gamma distribution with shape ``a`` on [loc, inf)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, loc=0, scale=1):
    """Log of the gamma density at ``x`` (-inf below ``loc``)."""
    x, a, loc, scale = promote("gamma.logpdf", x, a, loc, scale)
    y = standardize(x, loc, scale)
    out = jnp.subtract(jnp.subtract(special.xlogy(jnp.subtract(a, 1), y), y),
                       jnp.add(special.gammaln(a), jnp.log(scale)))
    return jnp.where(jnp.less(x, loc), -np.inf, out)


def pdf(x, a, loc=0, scale=1):
    """The gamma density at ``x``."""
    return lax.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    """The gamma CDF, the regularized lower incomplete gamma function P(a, y)."""
    x, a, loc, scale = promote("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, jnp.maximum(standardize(x, loc, scale), 0))


def logcdf(x, a, loc=0, scale=1):
    """Log of the gamma CDF."""
    return jnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    """The gamma survival function, the upper incomplete gamma function Q(a, y)."""
    x, a, loc, scale = promote("gamma.sf", x, a, loc, scale)
    y = standardize(x, loc, scale)
    return jnp.where(jnp.less(y, 0), 1, special.gammaincc(a, jnp.maximum(y, 0)))


def logsf(x, a, loc=0, scale=1):
    """Log of the gamma survival function."""
    return jnp.log(sf(x, a, loc, scale))
