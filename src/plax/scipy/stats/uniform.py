"""The uniform distribution on [loc, loc + scale]."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy.stats._common import promote

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """Log of the uniform density: -log(scale) on [loc, loc + scale], -inf elsewhere."""
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    outside = jnp.logical_or(jnp.less(x, loc), jnp.greater(x, jnp.add(loc, scale)))
    out = jnp.where(outside, -np.inf, jnp.negative(jnp.log(scale)))
    return jnp.where(jnp.isnan(x), np.nan, out)


def pdf(x, loc=0, scale=1):
    """The uniform density at ``x``."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The uniform CDF, (x - loc) / scale clipped to [0, 1]."""
    x, loc, scale = promote("uniform.cdf", x, loc, scale)
    frac = jnp.divide(jnp.subtract(x, loc), scale)
    return jnp.where(jnp.less(x, loc), 0, jnp.where(jnp.greater(x, jnp.add(loc, scale)), 1, frac))


def ppf(q, loc=0, scale=1):
    """The uniform quantile function loc + q * scale (NaN outside [0, 1])."""
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    out = jnp.add(loc, jnp.multiply(q, scale))
    return jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), np.nan, out)
