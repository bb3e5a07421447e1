"""plax.scipy.stats: densities, distribution functions and quantiles of SciPy's common
distributions, plus a few summary statistics, on plax arrays."""
from plax.scipy.stats import (beta, cauchy, chi2, expon, gamma, gumbel_l, gumbel_r,  # noqa: F401
                              laplace, logistic, norm, pareto, uniform)
