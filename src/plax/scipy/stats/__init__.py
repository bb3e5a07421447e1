"""plax.scipy.stats: densities, distribution functions and quantiles of SciPy's common
distributions, plus a few summary statistics, on plax arrays."""
from plax.scipy.stats import bernoulli, beta, betabinom, binom, cauchy, chi2  # noqa: F401
from plax.scipy.stats import dirichlet, expon, gamma, gennorm, geom  # noqa: F401
from plax.scipy.stats import gumbel_l, gumbel_r, laplace, logistic, multinomial  # noqa: F401
from plax.scipy.stats import multivariate_normal  # noqa: F401
from plax.scipy.stats import nbinom, norm, pareto, poisson, t, truncnorm  # noqa: F401
from plax.scipy.stats import uniform, vonmises, wrapcauchy  # noqa: F401
from plax.scipy.stats._descriptive import mode, rankdata, sem  # noqa: F401
from plax.scipy.stats.kde import gaussian_kde  # noqa: F401
