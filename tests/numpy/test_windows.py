"""plax.numpy window functions against NumPy (values) and JAX 0.10 (float32 results)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.errors import ConcretizationTypeError
from plax.test_util import check_grads

F32 = np.dtype(np.float32)
SIZES = [0, 1, 2, 5, 12, 51]


def close(out, want, rtol=1e-5, atol=2e-6):
    assert isinstance(out, plax.Array), type(out)
    assert out.dtype == F32, out.dtype
    assert out.shape == np.shape(want), (out.shape, np.shape(want))
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
@pytest.mark.parametrize("M", SIZES)
def test_windows_match_numpy(name, M):
    close(getattr(jnp, name)(M), getattr(np, name)(M))


@pytest.mark.parametrize("M", SIZES)
@pytest.mark.parametrize("beta", [0.0, 3.0, 8.6, 14.0])
def test_kaiser_matches_numpy(M, beta):
    close(jnp.kaiser(M, beta), np.kaiser(M, beta), rtol=2e-5, atol=1e-6)


def test_kaiser_large_beta_does_not_overflow():
    # float32 I0(200) overflows; the ratio is computed in log space (JAX returns NaN here)
    out = np.asarray(jnp.kaiser(7, 200.0))
    assert np.all(np.isfinite(out)) and out[3] == 1.0
    np.testing.assert_allclose(out, np.kaiser(7, 200.0), rtol=1e-4, atol=1e-30)


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning", "kaiser"])
def test_window_m_types(name):
    f = getattr(jnp, name)
    args = (4.0,) if name == "kaiser" else ()
    close(f(np.int64(6), *args), getattr(np, name)(6, *args), rtol=2e-5, atol=1e-6)
    close(f(plax.numpy.asarray(6), *args), getattr(np, name)(6, *args), rtol=2e-5, atol=1e-6)
    close(f(-3, *args), np.zeros(0))
    with pytest.raises(TypeError, match="M must be an integer"):
        f("6", *args)
    with pytest.raises(TypeError, match="M must be a real scalar"):
        f(np.array([6, 7]), *args)
    with pytest.raises(ConcretizationTypeError, match="window length"):
        plax.jit(lambda m: f(m, *args))(6)


def test_windows_jit():
    for name in ["bartlett", "blackman", "hamming", "hanning"]:
        close(plax.jit(getattr(jnp, name), static_argnums=0)(9), getattr(np, name)(9))
    f = plax.jit(jnp.kaiser, static_argnums=0)
    close(f(9, np.float32(5.0)), np.kaiser(9, 5.0), rtol=2e-5, atol=1e-6)


def test_kaiser_grad_and_errors():
    check_grads(lambda b: jnp.kaiser(8, b), (np.float32(3.0),), order=1, atol=1e-2, rtol=1e-2)
    g = plax.grad(lambda b: jnp.kaiser(5, b).sum())(3.0)
    want = (np.kaiser(5, 3.001).sum() - np.kaiser(5, 2.999).sum()) / 0.002
    np.testing.assert_allclose(float(g), want, rtol=1e-3)
    with pytest.raises(ValueError, match="beta must be a scalar"):
        jnp.kaiser(5, np.ones(2))
    with pytest.raises(TypeError, match="kaiser requires ndarray or scalar"):
        jnp.kaiser(5, [1.0])
