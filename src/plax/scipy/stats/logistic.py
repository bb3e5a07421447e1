"""The logistic distribution, whose CDF is the logistic sigmoid of (x - loc) / scale."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    """Log of the logistic density at ``x``."""
    x, loc, scale = promote("logistic.logpdf", x, loc, scale)
    a = jnp.abs(standardize(x, loc, scale))  # the density is even in z
    return jnp.negative(jnp.add(jnp.add(a, jnp.multiply(2, jnp.log1p(jnp.exp(jnp.negative(a))))),
                                jnp.log(scale)))


def pdf(x, loc=0, scale=1):
    """The logistic density at ``x``."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The logistic CDF expit((x - loc) / scale)."""
    x, loc, scale = promote("logistic.cdf", x, loc, scale)
    return special.expit(standardize(x, loc, scale))


def sf(x, loc=0, scale=1):
    """The logistic survival function expit(-(x - loc) / scale)."""
    x, loc, scale = promote("logistic.sf", x, loc, scale)
    return special.expit(lax.neg(standardize(x, loc, scale)))


def ppf(x, loc=0, scale=1):
    """The logistic quantile function loc + scale * logit(q)."""
    x, loc, scale = promote("logistic.ppf", x, loc, scale)
    return jnp.add(jnp.multiply(special.logit(x), scale), loc)


def isf(x, loc=0, scale=1):
    """The inverse of sf: loc - scale * logit(q)."""
    x, loc, scale = promote("logistic.isf", x, loc, scale)
    return jnp.subtract(loc, jnp.multiply(special.logit(x), scale))
