"""The normal distribution truncated to [a, b] (in standardized units)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import LOG_2PI, log_abs, log_ndtr, nan_unless, promote, standardize

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
    log_hi = log_ndtr(tail_hi)
    tail = jnp.add(log_hi, _log1mexp(jnp.minimum(jnp.subtract(log_ndtr(tail_lo), log_hi), 0)))
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


def _log_tails(name, x, a, b, loc, scale):
    """(log cdf, log sf) at ``x``. Each comes from the smaller of the two masses (a ratio of
    log-masses), the other from its complement, so both keep their precision in either tail."""
    x, a, b, loc, scale = promote(name, x, a, b, loc, scale)
    y = jnp.clip(standardize(x, loc, scale), a, b)
    total = _log_mass(a, b)
    lower, upper = jnp.subtract(_log_mass(a, y), total), jnp.subtract(_log_mass(y, b), total)
    half = -np.log(2.0)
    log_cdf = jnp.where(jnp.less(upper, half), _log1mexp(jnp.minimum(upper, 0)), lower)
    log_sf = jnp.where(jnp.less(lower, half), _log1mexp(jnp.minimum(lower, 0)), upper)
    y = standardize(x, loc, scale)
    at_or_below, at_or_above = jnp.less_equal(y, a), jnp.greater_equal(y, b)
    log_cdf = jnp.where(at_or_below, -np.inf, jnp.where(at_or_above, 0, log_cdf))
    log_sf = jnp.where(at_or_below, 0, jnp.where(at_or_above, -np.inf, log_sf))
    valid = jnp.less(a, b)
    return nan_unless(valid, log_cdf), nan_unless(valid, log_sf)


def logcdf(x, a, b, loc=0, scale=1):
    """Log of the truncated normal CDF."""
    return _log_tails("truncnorm.logcdf", x, a, b, loc, scale)[0]


def cdf(x, a, b, loc=0, scale=1):
    """The truncated normal CDF."""
    return lax.exp(_log_tails("truncnorm.cdf", x, a, b, loc, scale)[0])


def logsf(x, a, b, loc=0, scale=1):
    """Log of the truncated normal survival function."""
    return _log_tails("truncnorm.logsf", x, a, b, loc, scale)[1]


def sf(x, a, b, loc=0, scale=1):
    """The truncated normal survival function."""
    return lax.exp(_log_tails("truncnorm.sf", x, a, b, loc, scale)[1])
