"""gaussian_kde: a Gaussian kernel density estimate over a (weighted) sample, as SciPy's class;
a frozen pytree whose leaves are its arrays, so it passes through jit, vmap and grad."""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import numpy as np

from plax import numpy as jnp
from plax import random
from plax.api.jit import jit
from plax.api.vmap import vmap
from plax.core import dtypes
from plax.core.trace import get_aval
from plax.numpy.util import check_arraylike, promote_dtypes_inexact
from plax.scipy import linalg, special
from plax.tree_util import register_pytree_node_class

__all__ = ["gaussian_kde"]

_LOG_2PI = float(np.log(2 * np.pi))


def _is_complex(x) -> bool:
    return dtypes.issubdtype(get_aval(x).dtype, np.complexfloating)


def _bandwidth_factor(kde, bw_method, d):
    """The factor scaling the data's covariance into the kernel's: Scott's n_eff**(-1/(d+4)),
    Silverman's (n_eff (d+2)/4)**(-1/(d+4)), a given scalar, or bw_method(kde)."""
    if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
        return jnp.power(kde.neff, -1.0 / (d + 4))
    if isinstance(bw_method, str) and bw_method == "silverman":
        return jnp.power(kde.neff * (d + 2) / 4.0, -1.0 / (d + 4))
    if jnp.isscalar(bw_method) and not isinstance(bw_method, str):
        return bw_method
    if callable(bw_method):
        return bw_method(kde)
    raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable; "
                     f"got {bw_method!r}.")


@register_pytree_node_class
@dataclasses.dataclass(frozen=True, init=False, slots=True)
class gaussian_kde:
    """A Gaussian kernel density estimate, as ``scipy.stats.gaussian_kde``.

    ``dataset`` is (n,) for one dimension or (d, n); ``bw_method`` is "scott" (the default),
    "silverman", a scalar factor, or a callable taking the estimate and returning the factor;
    ``weights`` (n,) weigh the points (they are normalised to sum to 1)."""
    neff: Any
    dataset: Any
    weights: Any
    covariance: Any
    inv_cov: Any

    def __init__(self, dataset, bw_method=None, weights=None):
        check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if _is_complex(dataset):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements; got shape "
                             f"{dataset.shape}.")
        d, n = dataset.shape
        if weights is None:
            (dataset,) = promote_dtypes_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        else:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = promote_dtypes_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional; got shape "
                                 f"{weights.shape}.")
            if weights.shape[0] != n:
                raise ValueError(f"`weights` input should be of length n (the dataset has "
                                 f"n={n} points); got {weights.shape[0]}.")
        self._set("dataset", dataset)
        self._set("weights", weights)
        self._set("neff", 1 / jnp.sum(jnp.square(weights)))
        factor = _bandwidth_factor(self, bw_method, d)
        data_cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=True, bias=False, aweights=weights))
        self._set("covariance", data_cov * jnp.square(factor))
        self._set("inv_cov", jnp.linalg.inv(data_cov) / jnp.square(factor))

    def _set(self, name, value):
        object.__setattr__(self, name, value)  # the dataclass is frozen to everyone else

    def tree_flatten(self):
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        for field, value in zip(("neff", "dataset", "weights", "covariance", "inv_cov"),
                                children):
            kde._set(field, value)
        return kde

    @property
    def d(self):
        """The number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self):
        """The number of data points."""
        return self.dataset.shape[1]

    def evaluate(self, points):
        """The estimated density at ``points``: (d, m), or (m,) when d == 1, or one point
        (d,); an array of m values."""
        check_arraylike("evaluate", points)
        return _kernel_sum(False, self, self._points(points))

    def __call__(self, points):
        return self.evaluate(points)

    def pdf(self, x):
        """The estimated density at ``x`` (as evaluate)."""
        return self.evaluate(x)

    def logpdf(self, x):
        """The log of the estimated density at ``x``, summed in log space (no underflow far
        from the data)."""
        check_arraylike("logpdf", x)
        return _kernel_sum(True, self, self._points(x))

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times the Gaussian N(``mean``, ``cov``)."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}: got shape {mean.shape}.")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}: got shape "
                             f"{cov.shape}, expected {(self.d, self.d)}.")
        chol, norm = _summed_gaussian(self.covariance + cov, self.d)
        return _gaussian_overlap(chol, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low, high):
        """The probability mass between the scalars ``low`` and ``high`` (1-D data only)."""
        return _integrate_box_1d(self, low, high)

    def integrate_kde(self, other):
        """The integral of the product of this density and ``other``'s."""
        if other.d != self.d:
            raise ValueError(f"KDEs are not the same dimensionality: {self.d} and {other.d}.")
        chol, norm = _summed_gaussian(self.covariance + other.covariance, self.d)
        small, large = (self, other) if self.n < other.n else (other, self)
        overlap = partial(_gaussian_overlap, chol, norm, large.dataset, large.weights)
        return jnp.sum(vmap(overlap, in_axes=1)(small.dataset) * small.weights)

    def resample(self, key, shape=()):
        """Draws from the estimate under ``key``: data points picked by weight, each moved by
        kernel noise; an array of shape (d,) + ``shape``."""
        return _resample(self, key, shape)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        """Not available (as in JAX): only integrate_box_1d is."""
        del low_bounds, high_bounds, maxpts
        raise NotImplementedError("only 1D box integrations are supported; use "
                                  "`integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        """Not available (as in JAX, the estimate is immutable): build a new gaussian_kde
        with the wanted ``bw_method`` instead."""
        del bw_method
        raise NotImplementedError("dynamically changing the bandwidth method is not "
                                  "supported: construct a new gaussian_kde with the wanted "
                                  "bw_method.")

    def _points(self, points):
        """``points`` as (d, m)."""
        if _is_complex(points):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d == self.d:
            return points
        if d == 1 and m == self.d:  # one point, given as a vector
            return jnp.reshape(points, (self.d, 1))
        raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}: pass "
                         f"points of shape ({self.d}, m).")


def _summed_gaussian(cov, d):
    """The Cholesky factor of ``cov`` and the Gaussian's normaliser 1 / sqrt((2 pi)**d |cov|)."""
    chol = linalg.cho_factor(cov)
    norm = 1.0 / (jnp.sqrt(2 * np.pi) ** d * jnp.prod(jnp.diag(chol[0])))
    return chol, norm


def _gaussian_overlap(chol, norm, centres, weights, mean):
    """sum_i weights_i N(mean; centres_i, cov) for cov given by its Cholesky factor."""
    diff = centres - mean[:, None]
    quad = jnp.sum(diff * linalg.cho_solve(chol, diff), axis=0)
    return norm * jnp.sum(jnp.exp(-0.5 * quad) * weights)


@partial(jit, static_argnums=0)
def _kernel_sum(in_log, kde, points):
    """sum_i w_i N(x; data_i, covariance) at each point x (a column of ``points``), or its log."""
    data, weights, x, precision = promote_dtypes_inexact(kde.dataset, kde.weights, points,
                                                         kde.inv_cov)
    d = data.shape[0]
    whiten = linalg.cholesky(precision, lower=True)           # precision = W W^T
    data, x = jnp.dot(data.T, whiten), jnp.dot(x.T, whiten)   # (n, d), (m, d)
    log_norm = jnp.sum(jnp.log(jnp.diag(whiten))) - 0.5 * d * _LOG_2PI
    sq = jnp.sum(jnp.square(x[:, None, :] - data[None, :, :]), axis=-1)   # (m, n)
    log_kernel = log_norm - 0.5 * sq
    if in_log:
        return special.logsumexp(log_kernel + jnp.log(weights), axis=1)
    return jnp.sum(weights * jnp.exp(log_kernel), axis=1)


@jit
def _integrate_box_1d(kde, low, high):
    if kde.d != 1:
        raise ValueError(f"integrate_box_1d() only handles 1D pdfs; this one has d={kde.d}.")
    if np.ndim(low) != 0 or np.ndim(high) != 0:
        raise ValueError("the limits of integration in integrate_box_1d must be scalars; got "
                         f"shapes {np.shape(low)} and {np.shape(high)}.")
    sigma = jnp.squeeze(jnp.sqrt(kde.covariance))
    upper = special.ndtr(jnp.squeeze((high - kde.dataset) / sigma))
    lower = special.ndtr(jnp.squeeze((low - kde.dataset) / sigma))
    return jnp.sum(kde.weights * (upper - lower))


@partial(jit, static_argnames=("shape",))
def _resample(kde, key, shape):
    pick_key, noise_key = random.split(key)
    picked = random.choice(pick_key, kde.n, shape=shape, p=kde.weights)
    noise = random.multivariate_normal(noise_key, jnp.zeros(kde.d, kde.covariance.dtype),
                                       kde.covariance, shape=shape, dtype=kde.dataset.dtype)
    # (the noise's axes all reversed, as JAX does: (d,) + shape for a rank-0 or rank-1 shape)
    return kde.dataset[:, picked] + noise.T
