"""plax.random.multivariate_normal and plax.random.orthogonal: JAX 0.10.2's values for fixed
keys (hard-coded, from running the same calls under JAX), sample statistics, dtypes (x64),
batches, jit/vmap and the errors for bad parameters."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random as R

MEAN = np.array([1.0, -1.0, 0.5], np.float32)
COV = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.5]], np.float32)

# What JAX 0.10.2 returns for random.multivariate_normal(PRNGKey(0), MEAN, COV, (2,), method=m).
JAX_MVN = {
    "cholesky": [[3.29476, 1.46815, 0.69955], [0.88882, -0.86308, -0.13192]],
    "eigh": [[0.91259, 0.42703, 2.2273], [2.25943, -0.27866, 0.65464]],
    "svd": [[-0.48924, -3.40926, -0.68403], [1.13378, -0.85339, -0.13471]],
}


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_gives_jax_values(method):
    x = R.multivariate_normal(R.PRNGKey(0), MEAN, COV, (2,), method=method)
    assert x.dtype == np.float32 and x.shape == (2, 3)
    np.testing.assert_allclose(np.asarray(x), JAX_MVN[method], atol=2e-5)


def test_multivariate_normal_batched_covariance_and_typed_key():
    mean = np.array([0.5, -1.0], np.float32)
    cov = np.array([[1.0, 0.3], [0.3, 0.5]], np.float32)
    x = R.multivariate_normal(R.key(1), mean, np.stack([cov, 2 * cov]))
    np.testing.assert_allclose(np.asarray(x), [[0.34556, -0.99209], [0.30769, -1.19808]],
                               atol=2e-5)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_statistics(method):
    x = np.asarray(R.multivariate_normal(R.PRNGKey(7), MEAN, COV, (20000,), method=method))
    np.testing.assert_allclose(x.mean(axis=0), MEAN, atol=0.04)
    np.testing.assert_allclose(np.cov(x.T), COV, atol=0.06)


def test_multivariate_normal_dtypes():
    k = R.PRNGKey(0)
    assert R.multivariate_normal(k, np.array([1, 2]), np.eye(2, dtype=np.int32)).dtype == np.float32
    with plax.enable_x64():
        assert R.multivariate_normal(k, MEAN, COV).dtype == np.float32
        assert R.multivariate_normal(k, np.array([1, 2]), np.eye(2, dtype=int)).dtype == np.float64
        assert R.multivariate_normal(k, MEAN, COV, dtype=jnp.float64).dtype == np.float64


def test_multivariate_normal_jit_and_vmap():
    keys = R.split(R.PRNGKey(0), 3)
    f = plax.jit(lambda k, m: R.multivariate_normal(k, m, COV))
    out = plax.vmap(f, in_axes=(0, None))(keys, MEAN)
    want = np.stack([np.asarray(R.multivariate_normal(k, MEAN, COV)) for k in keys])
    np.testing.assert_allclose(np.asarray(out), want, atol=1e-6)


def test_multivariate_normal_errors():
    k = R.PRNGKey(0)
    with pytest.raises(ValueError, match=r"method must be one of \{'svd', 'eigh', 'cholesky'\}"):
        R.multivariate_normal(k, MEAN, COV, method="foo")
    with pytest.raises(ValueError, match="requires mean.ndim >= 1, got mean.ndim == 0"):
        R.multivariate_normal(k, 1.0, COV)
    with pytest.raises(ValueError, match="requires cov.ndim >= 2, got cov.ndim == 1"):
        R.multivariate_normal(k, MEAN, COV[0])
    with pytest.raises(ValueError, match=r"requires cov.shape == \(..., n, n\) for n=3"):
        R.multivariate_normal(k, MEAN, COV[:2, :2])
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        R.multivariate_normal(k, MEAN, np.stack([COV, COV]), shape=(3,))


# What JAX 0.10.2 returns for random.orthogonal(...).
JAX_ORTHOGONAL = [[0.95541, 0.29414, 0.026], [-0.04629, 0.23614, -0.97062],
                  [-0.29163, 0.92613, 0.23923]]
JAX_ORTHOGONAL_C64 = [[0.36478 - 0.88739j, -0.28079 + 0.02499j],
                      [-0.27183 + 0.07468j, -0.65181 - 0.70404j]]
JAX_ORTHOGONAL_BATCH = [[[-0.75053, 0.66084], [-0.66084, -0.75053]],
                        [[0.50909, -0.86072], [0.86072, 0.50909]]]
JAX_ORTHOGONAL_3x2 = [[-0.12035, 0.59596], [-0.10596, -0.8029], [0.98706, -0.01353]]


def test_orthogonal_gives_jax_values():
    q = R.orthogonal(R.PRNGKey(0), 3)
    assert q.dtype == np.float32 and q.shape == (3, 3)
    np.testing.assert_allclose(np.asarray(q), JAX_ORTHOGONAL, atol=2e-5)
    c = R.orthogonal(R.PRNGKey(0), 2, dtype=jnp.complex64)
    assert c.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(c), JAX_ORTHOGONAL_C64, atol=2e-5)
    np.testing.assert_allclose(np.asarray(R.orthogonal(R.key(1), 2, (2,))), JAX_ORTHOGONAL_BATCH,
                               atol=2e-5)
    tall = R.orthogonal(R.key(1), 3, m=2)
    np.testing.assert_allclose(np.asarray(tall), JAX_ORTHOGONAL_3x2, atol=2e-5)
    wide = R.orthogonal(R.key(1), 2, m=3)
    np.testing.assert_allclose(np.asarray(wide), np.asarray(tall).T, atol=2e-5)


def test_orthogonal_is_orthogonal_and_haar():
    q = np.asarray(R.orthogonal(R.PRNGKey(2), 4, (500,)))
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), q.shape),
                               atol=1e-5)
    # Haar: each entry has mean 0 and variance 1/n; the determinant is +1 or -1 equally often.
    assert abs(q.mean()) < 0.02 and abs((q ** 2).mean() - 0.25) < 0.01
    assert abs(np.sign(np.linalg.det(q)).mean()) < 0.15
    with plax.enable_x64():
        assert R.orthogonal(R.PRNGKey(0), 2).dtype == np.float64


def test_orthogonal_errors():
    with pytest.raises(ValueError, match="dtype argument to `orthogonal` must be a float"):
        R.orthogonal(R.PRNGKey(0), 2, dtype=jnp.int32)
    with pytest.raises(TypeError, match="integer"):
        R.orthogonal(R.PRNGKey(0), 2.5)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_batch_shape_under_rank_promotion_raise(method):
    """A mean without the batch dimensions broadcasts inside the sampler, so the flag
    jax_numpy_rank_promotion='raise' (which governs the caller's code) does not refuse it.
    A singular covariance gives NaN by Cholesky and exact copies by the other two."""
    with plax.numpy_rank_promotion("raise"):
        x = np.asarray(R.multivariate_normal(R.key(0), jnp.zeros(2), jnp.ones((2, 2)), (10,),
                                             method=method))
    assert x.shape == (10, 2)
    if method == "cholesky":
        assert np.isnan(x).all()
    else:
        np.testing.assert_allclose(x[:, 0], x[:, 1], atol=1e-5)
