"""The Laplace (double exponential) distribution."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy.stats._common import LOG_2, promote, standardize

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, loc=0, scale=1):
    """Log of the Laplace density at ``x``."""
    x, loc, scale = promote("laplace.logpdf", x, loc, scale)
    z = standardize(x, loc, scale)
    return jnp.negative(jnp.add(jnp.add(LOG_2, jnp.log(scale)), jnp.abs(z)))


def pdf(x, loc=0, scale=1):
    """The Laplace density at ``x``."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The Laplace CDF: exp(z) / 2 below ``loc``, 1 - exp(-z) / 2 above."""
    x, loc, scale = promote("laplace.cdf", x, loc, scale)
    z = standardize(x, loc, scale)
    half_tail = jnp.multiply(0.5, jnp.exp(jnp.negative(jnp.abs(z))))
    return jnp.where(jnp.less(z, 0), half_tail, jnp.subtract(1, half_tail))
