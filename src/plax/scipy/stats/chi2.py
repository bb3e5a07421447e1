"""The chi-squared distribution with ``df`` degrees of freedom: gamma(df / 2) with scale 2."""
from __future__ import annotations

from plax import numpy as jnp
from plax.scipy.stats import gamma as _gamma
from plax.scipy.stats._common import promote

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def _as_gamma(name, x, df, loc, scale):
    x, df, loc, scale = promote(name, x, df, loc, scale)
    return x, jnp.multiply(df, 0.5), loc, jnp.multiply(scale, 2)


def logpdf(x, df, loc=0, scale=1):
    """Log of the chi-squared density at ``x``."""
    return _gamma.logpdf(*_as_gamma("chi2.logpdf", x, df, loc, scale))


def pdf(x, df, loc=0, scale=1):
    """The chi-squared density at ``x``."""
    return _gamma.pdf(*_as_gamma("chi2.pdf", x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
    """The chi-squared CDF."""
    return _gamma.cdf(*_as_gamma("chi2.cdf", x, df, loc, scale))


def logcdf(x, df, loc=0, scale=1):
    """Log of the chi-squared CDF."""
    return _gamma.logcdf(*_as_gamma("chi2.logcdf", x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    """The chi-squared survival function."""
    return _gamma.sf(*_as_gamma("chi2.sf", x, df, loc, scale))


def logsf(x, df, loc=0, scale=1):
    """Log of the chi-squared survival function."""
    return _gamma.logsf(*_as_gamma("chi2.logsf", x, df, loc, scale))
