"""The geometric distribution: the number of Bernoulli(p) trials up to the first success."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, p, loc=0):
    """log((1 - p)**(k - 1) p) for k - loc >= 1, -inf below."""
    k, p, loc = promote("geom.logpmf", k, p, loc)
    n = jnp.subtract(k, loc)
    out = jnp.add(special.xlog1py(jnp.subtract(n, 1), jnp.negative(p)), jnp.log(p))
    return jnp.where(jnp.less(n, 1), -np.inf, out)


def pmf(k, p, loc=0):
    """The geometric probability of ``k``."""
    return lax.exp(logpmf(k, p, loc))
