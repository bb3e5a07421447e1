"""plax.scipy.fft's DCT (type 2) and its inverse against scipy.fft: lengths, axes, norms,
complex and integer inputs, jit, derivatives, and the errors JAX raises."""
import numpy as np
import pytest
import scipy.fft as sfft

import plax
import plax.numpy as jnp
import plax.scipy.fft as pfft
from plax.test_util import check_grads

from helpers import x64_for

X = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
Y = np.random.default_rng(1).normal(size=(3, 4, 2)).astype(np.float32)

CASES = [  # (function name, input, keyword arguments)
    ("dct", X, {}), ("dct", X, {"norm": "ortho"}), ("dct", X, {"axis": 0, "n": 3}),
    ("dct", X, {"n": 8, "norm": "backward"}), ("dct", np.ones(1, np.float32), {}),
    ("idct", X, {}), ("idct", X, {"norm": "ortho", "axis": 0}), ("idct", X, {"n": 7}),
    ("idct", X, {"n": 2, "axis": -2}),
    ("dctn", Y, {}), ("dctn", Y, {"norm": "ortho", "axes": (0, 2)}), ("dctn", X, {"s": [3]}),
    ("dctn", Y, {"s": (2, 6), "axes": (2, 0)}),
    ("idctn", Y, {}), ("idctn", Y, {"norm": "ortho", "axes": [1]}), ("idctn", X, {"s": (6, 3)}),
]


@pytest.mark.parametrize("name,x,kwargs", CASES)
def test_matches_scipy(name, x, kwargs):
    out = getattr(pfft, name)(x, **kwargs)
    want = getattr(sfft, name)(x.astype(np.float64), **kwargs)
    assert out.dtype == np.float32 and out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("length", [1, 4, 7])
def test_every_length_and_the_round_trip(length):
    with x64_for(np.float64):
        x = np.random.default_rng(length).normal(size=length)
        out = pfft.dct(x)
        assert out.dtype == np.float64
        np.testing.assert_allclose(out, sfft.dct(x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(pfft.idct(sfft.dct(x)), x, rtol=1e-12, atol=1e-12)


def test_complex_and_integer_inputs():
    c = (X + 1j * X[::-1]).astype(np.complex64)
    out = pfft.dct(c, norm="ortho")
    assert out.dtype == np.complex64
    np.testing.assert_allclose(out, sfft.dct(c, norm="ortho"), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(pfft.idctn(c), sfft.idctn(c), rtol=2e-5, atol=2e-5)
    ints = np.arange(6).reshape(2, 3)
    assert pfft.dctn(ints).dtype == np.float32
    np.testing.assert_allclose(pfft.dctn(ints), sfft.dctn(ints), rtol=1e-5, atol=1e-5)
    assert pfft.idct(np.ones(3, np.float16)).dtype == np.float32  # as JAX: the FFT's precision


def test_under_jit():
    f = plax.jit(pfft.dctn, static_argnames=("axes", "norm"))
    np.testing.assert_allclose(f(Y, axes=(1, 2), norm="ortho"),
                               sfft.dctn(Y, axes=(1, 2), norm="ortho"), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(plax.jit(pfft.idct)(X), sfft.idct(X), rtol=2e-5, atol=2e-5)


def test_gradients():
    w = np.random.default_rng(2).normal(size=X.shape).astype(np.float32)
    # The orthonormal DCT is an orthogonal map: its transpose is its inverse.
    grad = plax.grad(lambda x: jnp.vdot(w, pfft.dct(x, norm="ortho")))(X)
    np.testing.assert_allclose(grad, sfft.idct(w, norm="ortho"), rtol=1e-5, atol=1e-5)
    check_grads(lambda x: pfft.dct(x, n=7), (X,), order=1)
    check_grads(lambda x: pfft.idctn(x, norm="ortho"), (Y,), order=1)


def test_errors_name_the_argument():
    with pytest.raises(NotImplementedError, match="Only DCT type 2 is implemented"):
        pfft.dct(X, type=3)
    with pytest.raises(ValueError, match="norm='forward' is not implemented"):
        pfft.idctn(X, norm="forward")
    with pytest.raises(ValueError, match="s must have at most x.ndim"):
        pfft.dctn(X, s=[1, 2, 3])
    with pytest.raises(ValueError, match="s and axes must have the same length"):
        pfft.dctn(X, s=[1, 2], axes=[0])
    with pytest.raises(ValueError, match="repeated axis"):
        pfft.idctn(X, axes=[0, -2])
    with pytest.raises(ValueError, match="length must be at least 1, got 0"):
        pfft.dct(X, n=0)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        pfft.dct([1.0, 2.0])
