"""The Bernoulli distribution: 1 with probability ``p``, else 0 (shifted by ``loc``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import nan_unless, promote

__all__ = ["logpmf", "pmf", "cdf", "ppf"]


def _valid_p(p):
    return jnp.logical_and(jnp.greater_equal(p, 0), jnp.less_equal(p, 1))


def logpmf(k, p, loc=0):
    """log(p) at k = loc + 1, log(1 - p) at k = loc; -inf outside [loc, loc + 1]."""
    k, p, loc = promote("bernoulli.logpmf", k, p, loc)
    n = jnp.subtract(k, loc)
    out = jnp.add(special.xlogy(n, p), special.xlog1py(jnp.subtract(1, n), jnp.negative(p)))
    outside = jnp.logical_or(jnp.less(n, 0), jnp.greater(n, 1))
    return jnp.where(outside, -np.inf, out)


def pmf(k, p, loc=0):
    """The Bernoulli probability of ``k``."""
    return lax.exp(logpmf(k, p, loc))


def cdf(k, p):
    """The Bernoulli CDF: 0 below 0, 1 - p on [0, 1), 1 from 1 on (NaN unless 0 <= p <= 1)."""
    k, p = promote("bernoulli.cdf", k, p)
    out = jnp.where(jnp.less(k, 0), 0, jnp.where(jnp.less(k, 1), jnp.subtract(1, p), 1))
    return nan_unless(jnp.logical_and(_valid_p(p), jnp.logical_not(jnp.isnan(k))), out)


def ppf(q, p):
    """The Bernoulli quantile function: 0 for q <= 1 - p, else 1 (NaN outside [0, 1])."""
    q, p = promote("bernoulli.ppf", q, p)
    out = jnp.where(jnp.greater(q, jnp.subtract(1, p)), 1, 0).astype(q.dtype)
    out = jnp.where(jnp.logical_and(_valid_p(p), _valid_p(q)), out, np.nan)
    return out
