"""plax.scipy.stats: densities, distribution functions and quantiles of SciPy's common
distributions, plus a few summary statistics, on plax arrays."""
from plax.scipy.stats import (bernoulli, beta, betabinom, binom, cauchy, chi2,  # noqa: F401
                              dirichlet, expon, gamma, gennorm, geom, gumbel_l, gumbel_r, laplace,
                              logistic, multinomial, nbinom, norm, pareto, poisson, t, truncnorm, uniform,
                              vonmises, wrapcauchy)
from plax.scipy.stats._descriptive import ModeResult, mode, rankdata, sem  # noqa: F401
