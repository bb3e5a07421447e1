"""plax.scipy.stats.multivariate_normal against scipy.stats.multivariate_normal."""
import numpy as np
import pytest
import scipy.stats as st

import plax
from plax.scipy.stats import multivariate_normal as mvn
from plax.test_util import check_grads

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 3)).astype(np.float32)
MEAN = np.array([0.1, -0.2, 0.3], np.float32)
A = RNG.normal(size=(3, 3))
COV = (A @ A.T + np.eye(3)).astype(np.float32)


def test_matches_scipy_for_every_covariance_form():
    ref = st.multivariate_normal(MEAN, COV)
    np.testing.assert_allclose(mvn.logpdf(X, MEAN, COV), ref.logpdf(X), rtol=1e-5)
    np.testing.assert_allclose(mvn.pdf(X, MEAN, COV), ref.pdf(X), rtol=1e-5)
    np.testing.assert_allclose(mvn.logpdf(X, MEAN, 2.0),
                               st.multivariate_normal(MEAN, 2.0 * np.eye(3)).logpdf(X), rtol=1e-5)
    np.testing.assert_allclose(mvn.logpdf(X[:, 0], 0.5, 2.0),
                               st.norm(0.5, np.sqrt(2.0)).logpdf(X[:, 0]), rtol=1e-5)
    covs = np.stack([COV, 2 * COV])  # a batch of covariances broadcasts against x
    np.testing.assert_allclose(mvn.logpdf(X[0], MEAN, covs),
                               [st.multivariate_normal(MEAN, c).logpdf(X[0]) for c in covs],
                               rtol=1e-5)
    assert np.isnan(np.asarray(mvn.logpdf(X, MEAN, -COV))).all()  # not positive definite


def test_grads_jit_vmap_and_errors():
    with plax.enable_x64():
        x, mean, cov = X.astype(np.float64), MEAN.astype(np.float64), COV.astype(np.float64)
        check_grads(lambda x, m, c: mvn.logpdf(x, m, c), (x, mean, cov), 1)
    jitted = plax.jit(mvn.logpdf)(X, MEAN, COV)
    np.testing.assert_allclose(jitted, st.multivariate_normal(MEAN, COV).logpdf(X), rtol=1e-5)
    mapped = plax.vmap(mvn.logpdf, (0, None, None))(X, MEAN, COV)
    np.testing.assert_allclose(mapped, jitted, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="allow_singular"):
        mvn.logpdf(X, MEAN, COV, allow_singular=True)
    with pytest.raises(ValueError, match="got incompatible shapes"):
        mvn.logpdf(X, MEAN, np.ones(3, np.float32))
