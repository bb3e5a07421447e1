"""Pieces the distribution modules share: argument promotion and the standardised variable."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.numpy.util import promote_args_inexact

LOG_2PI = float(np.log(2 * np.pi))
LOG_PI = float(np.log(np.pi))
LOG_2 = float(np.log(2.0))


def promote(name: str, *args):
    """``args`` as one inexact dtype (ints and bools to the default float), ranks aligned."""
    return promote_args_inexact(name, *args)


def log_ndtr(z):
    """log(ndtr(z)) with enough terms of the tail series for double precision (the default
    three leave errors near 1e-11 just past the switch to the series)."""
    from plax.scipy import special
    return special.log_ndtr(z, series_order=8)


def standardize(x, loc, scale):
    """(x - loc) / scale."""
    return lax.div(lax.sub(x, loc), scale)


def log_abs(scale):
    """log|scale|: the log-densities written with it read a negative scale as its mirror."""
    return jnp.log(jnp.abs(scale))


def nan_unless(ok, value):
    """``value`` where ``ok``, NaN elsewhere."""
    return jnp.where(ok, value, np.nan)


def is_integer_valued(k):
    """True where ``k`` is a whole number (finite)."""
    return jnp.equal(k, jnp.floor(k))


def standardize_positive(x, loc, scale):
    """(x - loc) / scale, NaN where ``scale`` is not positive."""
    return nan_unless(jnp.greater(scale, 0), standardize(x, loc, scale))
