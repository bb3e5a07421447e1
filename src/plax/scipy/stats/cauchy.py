"""The Cauchy distribution with location ``loc`` and half-width ``scale``."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy.stats._common import promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    """Log of the Cauchy density at ``x``."""
    x, loc, scale = promote("cauchy.logpdf", x, loc, scale)
    z = standardize(x, loc, scale)
    # -(log(pi scale) + log1p(z z)), in JAX's order (its values and gradients round the same).
    log_norm = lax.log(lax.mul(lax.full_like(x, np.pi, shape=()), scale))
    return lax.neg(lax.add(log_norm, lax.log1p(lax.mul(z, z))))


def pdf(x, loc=0, scale=1):
    """The Cauchy density at ``x``."""
    return lax.exp(logpdf(x, loc, scale))


def _tail(z):
    """P(Z > z) for the standard Cauchy: atan(1/z)/pi for z > 0 keeps the tail accurate."""
    pos = jnp.greater(z, 0)
    safe = jnp.where(pos, z, 1)
    upper = jnp.divide(jnp.arctan(jnp.reciprocal(safe)), np.pi)
    return jnp.where(pos, upper, jnp.subtract(0.5, jnp.divide(jnp.arctan(z), np.pi)))


def cdf(x, loc=0, scale=1):
    """The Cauchy CDF P(X <= x)."""
    x, loc, scale = promote("cauchy.cdf", x, loc, scale)
    return _tail(jnp.negative(standardize(x, loc, scale)))


def logcdf(x, loc=0, scale=1):
    """Log of the Cauchy CDF."""
    return jnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """The Cauchy survival function P(X > x)."""
    x, loc, scale = promote("cauchy.sf", x, loc, scale)
    return _tail(standardize(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """Log of the Cauchy survival function."""
    return jnp.log(sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    """The Cauchy quantile function (NaN outside [0, 1])."""
    q, loc, scale = promote("cauchy.ppf", q, loc, scale)
    return _quantile(q, loc, scale, 1)


def isf(q, loc=0, scale=1):
    """The inverse of sf (NaN outside [0, 1])."""
    q, loc, scale = promote("cauchy.isf", q, loc, scale)
    return _quantile(q, loc, scale, -1)


def _quantile(q, loc, scale, sign):
    # tan(pi (q - 1/2)) = -1 / tan(pi q) = 1 / tan(pi (1 - q)): each form is accurate in its
    # own tail (1 - q is exact for q >= 1/2).
    upper = jnp.greater(q, 0.5)
    r = jnp.where(upper, jnp.subtract(1, q), q)
    z = jnp.reciprocal(jnp.tan(jnp.multiply(np.pi, r)))
    z = jnp.where(upper, z, jnp.negative(z))
    z = jnp.where(jnp.equal(q, 0.5), 0, z)
    z = jnp.where(jnp.equal(q, 0), -np.inf, jnp.where(jnp.equal(q, 1), np.inf, z))
    z = jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), np.nan, z)
    return jnp.add(jnp.multiply(z if sign > 0 else jnp.negative(z), scale), loc)
