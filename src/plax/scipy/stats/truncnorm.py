"""The normal distribution truncated to [a, b] (in standardized units)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import LOG_2PI, log_abs, nan_unless, promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def _log1mexp(d):
    """log(1 - exp(d)) for d <= 0, accurate at both ends."""
    return jnp.where(jnp.greater(d, -np.log(2.0)), jnp.log(jnp.negative(jnp.expm1(d))),
                     jnp.log1p(jnp.negative(jnp.exp(d))))


def _log_mass(lo, hi):
    """log(Phi(hi) - Phi(lo)) for lo <= hi, without cancellation in either tail."""
    # Both ends in the lower tail: log Phi(hi) + log(1 - Phi(lo) / Phi(hi)); an interval in
    # the upper tail is its mirror image; one that straddles 0 has mass at least ~ its side.
    lower, upper = jnp.less_equal(hi, 0), jnp.greater_equal(lo, 0)
    tail_lo = jnp.where(upper, jnp.negative(hi), lo)
    tail_hi = jnp.where(upper, jnp.negative(lo), hi)
    log_hi = special.log_ndtr(tail_hi)
    tail = jnp.add(log_hi, _log1mexp(jnp.minimum(jnp.subtract(special.log_ndtr(tail_lo), log_hi), 0)))
    mid = jnp.log1p(jnp.negative(jnp.add(special.ndtr(lo), special.ndtr(jnp.negative(hi)))))
    return jnp.where(jnp.logical_or(lower, upper), tail, mid)


def logpdf(x, a, b, loc=0, scale=1):
    """Log of the truncated normal density at ``x`` (-inf outside [a, b], NaN unless a < b)."""
    x, a, b, loc, scale = promote("truncnorm.logpdf", x, a, b, loc, scale)
    y = standardize(x, loc, scale)
    out = jnp.subtract(jnp.multiply(-0.5, jnp.square(y)),
                       jnp.add(jnp.add(0.5 * LOG_2PI, log_abs(scale)), _log_mass(a, b)))
    outside = jnp.logical_or(jnp.less(y, a), jnp.greater(y, b))
    return nan_unless(jnp.less(a, b), jnp.where(outside, -np.inf, out))


def pdf(x, a, b, loc=0, scale=1):
    """The truncated normal density at ``x``."""
    return lax.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    """Log of the truncated normal CDF."""
    x, a, b, loc, scale = promote("truncnorm.logcdf", x, a, b, loc, scale)
    y = standardize(x, loc, scale)
    inner = jnp.subtract(_log_mass(a, jnp.clip(y, a, b)), _log_mass(a, b))
    out = jnp.where(jnp.less_equal(y, a), -np.inf, jnp.where(jnp.greater_equal(y, b), 0, inner))
    return nan_unless(jnp.less(a, b), out)


def cdf(x, a, b, loc=0, scale=1):
    """The truncated normal CDF."""
    return lax.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    """Log of the truncated normal survival function."""
    x, a, b, loc, scale = promote("truncnorm.logsf", x, a, b, loc, scale)
    y = standardize(x, loc, scale)
    inner = jnp.subtract(_log_mass(jnp.clip(y, a, b), b), _log_mass(a, b))
    out = jnp.where(jnp.less_equal(y, a), 0, jnp.where(jnp.greater_equal(y, b), -np.inf, inner))
    return nan_unless(jnp.less(a, b), out)


def sf(x, a, b, loc=0, scale=1):
    """The truncated normal survival function."""
    return lax.exp(logsf(x, a, b, loc, scale))
