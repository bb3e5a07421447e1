"""The beta-binomial distribution: binomial counts whose success probability is Beta(a, b)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import nan_unless, promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, a, b, loc=0):
    """log(C(n, k) B(k + a, n - k + b) / B(a, b)) at k = floor(k - loc), -inf outside
    [0, n]; NaN unless n >= 0, a > 0 and b > 0."""
    k, n, a, b, loc = promote("betabinom.logpmf", k, n, a, b, loc)
    y = jnp.floor(jnp.subtract(k, loc))
    rest = jnp.subtract(n, y)
    log_choose = jnp.subtract(special.gammaln(jnp.add(n, 1)),
                              jnp.add(special.gammaln(jnp.add(y, 1)),
                                      special.gammaln(jnp.add(rest, 1))))
    out = jnp.add(log_choose, jnp.subtract(special.betaln(jnp.add(y, a), jnp.add(rest, b)),
                                           special.betaln(a, b)))
    out = jnp.where(jnp.logical_or(jnp.less(y, 0), jnp.greater(y, n)), -np.inf, out)
    valid = jnp.logical_and(jnp.greater_equal(n, 0),
                            jnp.logical_and(jnp.greater(a, 0), jnp.greater(b, 0)))
    return nan_unless(valid, out)


def pmf(k, n, a, b, loc=0):
    """The beta-binomial probability of ``k``."""
    return lax.exp(logpmf(k, n, a, b, loc))
