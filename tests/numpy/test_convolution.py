"""convolve and correlate against NumPy, under jit and vmap, with gradients."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("n,m", [(1, 1), (4, 3), (3, 4), (7, 2), (2, 8), (5, 5)])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_real_values_match_numpy(n, m, mode):
    a = RNG.standard_normal(n).astype(np.float32)
    v = RNG.standard_normal(m).astype(np.float32)
    for mine, theirs in [(jnp.convolve, np.convolve), (jnp.correlate, np.correlate)]:
        out = mine(a, v, mode=mode)
        assert out.dtype == np.float32
        np.testing.assert_allclose(np.asarray(out), theirs(a, v, mode=mode), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,m", [(4, 3), (2, 5)])
def test_complex_correlation_conjugates_the_kernel(n, m):
    a = (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(np.complex64)
    v = (RNG.standard_normal(m) + 1j * RNG.standard_normal(m)).astype(np.complex64)
    for mode in ("full", "same", "valid"):
        np.testing.assert_allclose(np.asarray(jnp.correlate(a, v, mode=mode)),
                                   np.correlate(a, v, mode=mode), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(jnp.convolve(a, v, mode=mode)),
                                   np.convolve(a, v, mode=mode), rtol=1e-5, atol=1e-5)


def test_integers_are_promoted_to_float_as_in_jax():
    out = jnp.convolve(np.arange(3), np.arange(5), mode="same")
    assert out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), [0.0, 1.0, 4.0, 7.0, 10.0])
    assert jnp.correlate(np.arange(3), np.arange(2)).dtype == np.float32


def test_jit_vmap_and_grad():
    a, v = jnp.arange(6.0), jnp.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(np.asarray(plax.jit(jnp.convolve)(a, v)),
                               np.convolve(np.arange(6.0), [1.0, -2.0, 0.5]), rtol=1e-6)
    batch = RNG.standard_normal((3, 6)).astype(np.float32)
    out = plax.vmap(lambda x: jnp.correlate(x, v, mode="same"))(batch)
    np.testing.assert_allclose(np.asarray(out),
                               np.stack([np.correlate(r, np.asarray(v), mode="same")
                                         for r in batch]), rtol=1e-5, atol=1e-5)
    check_grads(lambda a, v: jnp.convolve(a, v, mode="same"), (a, v), order=2,
                modes=["fwd", "rev"])


def test_errors():
    with pytest.raises(ValueError, match="only support 1-dimensional inputs"):
        jnp.convolve(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match="inputs cannot be empty"):
        jnp.correlate(np.ones(0), np.ones(2))
    with pytest.raises(ValueError, match="mode must be one of"):
        jnp.convolve(np.ones(3), np.ones(2), mode="wide")
