"""The beta distribution on [loc, loc + scale] with shape parameters ``a`` and ``b``."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import nan_unless, promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, b, loc=0, scale=1):
    """Log of the beta density at ``x`` (-inf outside the support, NaN for a, b or scale
    not positive)."""
    x, a, b, loc, scale = promote("beta.logpdf", x, a, b, loc, scale)
    y = standardize(x, loc, scale)
    body = jnp.add(special.xlogy(jnp.subtract(a, 1), y),
                   special.xlog1py(jnp.subtract(b, 1), jnp.negative(y)))
    log_norm = jnp.add(special.betaln(a, b), jnp.log(scale))
    out = jnp.where(jnp.logical_or(jnp.less(y, 0), jnp.greater(y, 1)), -np.inf,
                    jnp.subtract(body, log_norm))
    valid = jnp.logical_and(jnp.logical_and(jnp.greater(a, 0), jnp.greater(b, 0)),
                            jnp.greater(scale, 0))
    return nan_unless(valid, out)


def pdf(x, a, b, loc=0, scale=1):
    """The beta density at ``x``."""
    return lax.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    """The beta CDF, the regularized incomplete beta function of the standardized ``x``."""
    x, a, b, loc, scale = promote("beta.cdf", x, a, b, loc, scale)
    y = jnp.clip(standardize(x, loc, scale), 0, 1)
    return special.betainc(a, b, y)


def logcdf(x, a, b, loc=0, scale=1):
    """Log of the beta CDF."""
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """The beta survival function, I_{1 - y}(b, a) for the standardized ``y``."""
    x, a, b, loc, scale = promote("beta.sf", x, a, b, loc, scale)
    y = jnp.clip(standardize(x, loc, scale), 0, 1)
    return special.betainc(b, a, jnp.subtract(1, y))


def logsf(x, a, b, loc=0, scale=1):
    """Log of the beta survival function."""
    return jnp.log(sf(x, a, b, loc, scale))
