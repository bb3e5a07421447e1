"""plax.random: counter-based pseudo-random numbers (Threefry-2x32), bit for bit as JAX's.

Keys are typed keys (dtype ``key<fry>``) made by ``key``, or legacy ``uint32[2]``
arrays made by ``PRNGKey``; ``split`` and ``fold_in`` derive new ones, and the
samplers turn a key of either kind into values. The layout of the bits follows
the flag ``jax_threefry_partitionable`` (on by default, as in JAX). ``impl='rbg'`` and
``'unsafe_rbg'`` (or the flag ``jax_default_prng_impl``) make keys of four words whose bits come
from XLA's RngBitGenerator (``rbg.py``).
"""
from plax.random.keys import (PRNGKey, clone, fold_in, key, key_data, key_dtype, key_impl,
                              split, wrap_key_data)
from plax.random.samplers import bits, normal, randint, uniform
from plax.random.distributions import (bernoulli, binomial, cauchy, double_sided_maxwell,
                                       exponential, gumbel, laplace, logistic, maxwell,
                                       multinomial, pareto, poisson, rademacher,
                                       truncated_normal, weibull_min)
from plax.random.discrete import (categorical, choice, geometric, lognormal, permutation,
                                  rayleigh, triangular, wald)
from plax.random.gamma_family import (ball, beta, chisquare, dirichlet, f, gamma, generalized_normal,
                               loggamma, random_gamma_p, t)
from plax.random.multivariate import multivariate_normal, orthogonal

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "split", "fold_in",
           "bits", "uniform", "normal", "randint", "bernoulli",
           "exponential", "gumbel", "laplace", "logistic", "cauchy", "rademacher", "maxwell",
           "truncated_normal", "pareto", "weibull_min", "double_sided_maxwell", "poisson",
           "binomial", "gamma", "loggamma", "beta", "dirichlet", "chisquare", "f", "t",
           "generalized_normal", "ball", "permutation", "choice", "categorical", "geometric",
           "lognormal", "triangular", "rayleigh", "wald", "clone", "multinomial",
           "multivariate_normal", "orthogonal", "random_gamma_p", "key_dtype"]
