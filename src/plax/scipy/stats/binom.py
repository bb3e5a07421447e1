"""The binomial distribution: successes in ``n`` Bernoulli(p) trials."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """log(C(n, k) p**k (1 - p)**(n - k)) at k - loc in [0, n], -inf outside."""
    k, n, p, loc = promote("binom.logpmf", k, n, p, loc)
    y = jnp.subtract(k, loc)
    rest = jnp.subtract(n, y)
    log_choose = jnp.subtract(special.gammaln(jnp.add(n, 1)),
                              jnp.add(special.gammaln(jnp.add(y, 1)),
                                      special.gammaln(jnp.add(rest, 1))))
    out = jnp.add(log_choose, jnp.add(special.xlogy(y, p), special.xlog1py(rest, jnp.negative(p))))
    # (the support's upper end is k < n + 1, which for whole numbers is k <= n)
    outside = jnp.logical_or(jnp.less(y, 0), jnp.less_equal(jnp.add(rest, 1), 0))
    return jnp.where(outside, -np.inf, out)


def pmf(k, n, p, loc=0):
    """The binomial probability of ``k``."""
    return lax.exp(logpmf(k, n, p, loc))
