"""Student's t distribution with ``df`` degrees of freedom."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import LOG_PI, log_abs, promote, standardize

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1):
    """Log of the Student's t density at ``x``."""
    x, df, loc, scale = promote("t.logpdf", x, df, loc, scale)
    z = standardize(x, loc, scale)
    half_df1 = jnp.multiply(jnp.add(df, 1), 0.5)
    log_norm = jnp.subtract(
        jnp.subtract(special.gammaln(half_df1), special.gammaln(jnp.multiply(df, 0.5))),
        jnp.multiply(0.5, jnp.add(jnp.log(df), LOG_PI)))
    kernel = jnp.multiply(half_df1, jnp.log1p(jnp.divide(jnp.square(z), df)))
    return jnp.subtract(jnp.subtract(log_norm, kernel), log_abs(scale))


def pdf(x, df, loc=0, scale=1):
    """The Student's t density at ``x``."""
    return lax.exp(logpdf(x, df, loc, scale))
