"""The negative binomial distribution: failures before the ``n``-th Bernoulli(p) success."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """log(C(k + n - 1, k) p**n (1 - p)**k) for k - loc >= 0, -inf below."""
    k, n, p, loc = promote("nbinom.logpmf", k, n, p, loc)
    y = jnp.subtract(k, loc)
    log_choose = jnp.subtract(special.gammaln(jnp.add(n, y)),
                              jnp.add(special.gammaln(n), special.gammaln(jnp.add(y, 1))))
    out = jnp.add(log_choose, jnp.add(special.xlogy(n, p), special.xlog1py(y, jnp.negative(p))))
    return jnp.where(jnp.less(y, 0), -np.inf, out)


def pmf(k, n, p, loc=0):
    """The negative binomial probability of ``k``."""
    return lax.exp(logpmf(k, n, p, loc))
