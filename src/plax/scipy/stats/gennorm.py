"""The generalized normal distribution, density proportional to exp(-|x|**beta)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import LOG_2, promote

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, beta):
    """Log of the density beta / (2 gamma(1 / beta)) exp(-|x|**beta)."""
    x, beta = promote("gennorm.logpdf", x, beta)
    log_norm = jnp.subtract(jnp.log(beta), jnp.add(LOG_2, special.gammaln(jnp.reciprocal(beta))))
    return jnp.subtract(log_norm, jnp.power(jnp.abs(x), beta))


def pdf(x, beta):
    """The generalized normal density at ``x``."""
    return lax.exp(logpdf(x, beta))


def cdf(x, beta):
    """The CDF 1/2 + sign(x) P(1 / beta, |x|**beta) / 2."""
    x, beta = promote("gennorm.cdf", x, beta)
    half_p = jnp.multiply(0.5, special.gammainc(jnp.reciprocal(beta), jnp.power(jnp.abs(x), beta)))
    return jnp.add(0.5, jnp.multiply(jnp.sign(x), half_p))
