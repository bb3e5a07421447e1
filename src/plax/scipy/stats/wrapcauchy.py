"""The wrapped Cauchy distribution on [0, 2 pi] with shape 0 < c < 1."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy.stats._common import LOG_2PI, nan_unless, promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, c):
    """Log of (1 - c**2) / (2 pi (1 + c**2 - 2 c cos(x))); -inf outside [0, 2 pi]."""
    x, c = promote("wrapcauchy.logpdf", x, c)
    c2 = jnp.square(c)
    denom = jnp.subtract(jnp.add(1, c2), jnp.multiply(jnp.multiply(2, c), jnp.cos(x)))
    out = jnp.subtract(jnp.log1p(jnp.negative(c2)), jnp.add(LOG_2PI, jnp.log(denom)))
    out = jnp.where(jnp.logical_or(jnp.less(x, 0), jnp.greater(x, 2 * np.pi)), -np.inf, out)
    return nan_unless(jnp.logical_and(jnp.greater(c, 0), jnp.less(c, 1)), out)


def pdf(x, c):
    """The wrapped Cauchy density at ``x``."""
    return lax.exp(logpdf(x, c))
