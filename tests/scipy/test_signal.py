"""plax.scipy.signal against scipy.signal: convolve/correlate (direct and FFT), the 2-D forms
with every boundary, fftconvolve over chosen axes, detrend; dtypes, grads, jit, errors."""
import numpy as np
import pytest
import scipy.signal as ss

import plax
import plax.scipy.signal as ps
from plax.test_util import check_grads

RNG = np.random.default_rng(0)
A = RNG.normal(size=(5, 6)).astype(np.float32)
B = RNG.normal(size=(3, 2)).astype(np.float32)
TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_nd_convolve_and_correlate_match_scipy(mode):
    for f, ref in [(ps.convolve, ss.convolve), (ps.correlate, ss.correlate)]:
        for x, y in [(A, B), (B, A)]:
            np.testing.assert_allclose(f(x, y, mode=mode), ref(x, y, mode=mode), **TOL)
        np.testing.assert_allclose(f(A, B, mode=mode, method="fft"), ref(A, B, mode=mode), **TOL)
    v, w = RNG.normal(size=7), RNG.normal(size=4)
    np.testing.assert_allclose(ps.convolve(v, w, mode), ss.convolve(v, w, mode), **TOL)
    cube = RNG.normal(size=(4, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(ps.convolve(cube, cube[:2, :2, :3], mode),
                               ss.convolve(cube, cube[:2, :2, :3], mode), **TOL)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("boundary", ["fill", "wrap", "symm"])
def test_2d_forms_match_scipy(mode, boundary):
    for f, ref in [(ps.convolve2d, ss.convolve2d), (ps.correlate2d, ss.correlate2d)]:
        np.testing.assert_allclose(f(A, B, mode=mode, boundary=boundary),
                                   ref(A, B, mode=mode, boundary=boundary), **TOL)
        if mode == "valid":  # the larger input may come second
            np.testing.assert_allclose(f(B, A, mode=mode), ref(B, A, mode=mode), **TOL)
    np.testing.assert_allclose(ps.convolve2d(A, B, fillvalue=2.5), ss.convolve2d(A, B, fillvalue=2.5),
                               **TOL)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve_matches_scipy(mode):
    np.testing.assert_allclose(ps.fftconvolve(A, B, mode), ss.fftconvolve(A, B, mode), **TOL)
    rows = np.repeat(B[:, :1], 6, axis=1)  # axis 1 is not transformed: sizes agree there
    np.testing.assert_allclose(ps.fftconvolve(A, rows, mode, axes=0),
                               ss.fftconvolve(A, rows, mode, axes=0), **TOL)
    c = (A + 1j * A[::-1]).astype(np.complex64)
    np.testing.assert_allclose(ps.fftconvolve(c, B, mode), ss.fftconvolve(c, B, mode), **TOL)


def test_complex_dtypes_detrend_and_composition():
    c = (A + 1j * A[::-1]).astype(np.complex64)
    np.testing.assert_allclose(ps.correlate(c, B), ss.correlate(c, B), **TOL)
    np.testing.assert_allclose(ps.correlate2d(c, B, mode="same"), ss.correlate2d(c, B, mode="same"),
                               **TOL)
    assert ps.convolve(np.arange(4), np.arange(3)).dtype == np.float32  # inexact, as JAX
    for kw in [{}, {"axis": 0, "type": "constant"}, {"bp": [2, 4]}, {"bp": 3}]:
        np.testing.assert_allclose(ps.detrend(A, **kw), ss.detrend(A, **kw), atol=1e-5)
    with plax.enable_x64():
        x, k = RNG.normal(size=(6, 5)), RNG.normal(size=(3, 3))
        check_grads(lambda x, k: ps.convolve(x, k, mode="same"), (x, k), 1)
        check_grads(lambda x, k: ps.fftconvolve(x, k), (x, k), 1)
        check_grads(lambda x: ps.detrend(x), (x,), 1)
    jitted = plax.jit(lambda x, k: ps.correlate2d(x, k, boundary="wrap"))
    np.testing.assert_allclose(jitted(A, B), ss.correlate2d(A, B, boundary="wrap"), **TOL)
    batched = plax.vmap(lambda x: ps.convolve(x, B, mode="valid"))(np.stack([A, 2 * A]))
    np.testing.assert_allclose(batched[1], ss.convolve(2 * A, B, mode="valid"), **TOL)


def test_errors():
    with pytest.raises(ValueError, match="same number of dimensions"):
        ps.convolve(A, np.ones(3))
    with pytest.raises(ValueError, match="One input must be smaller than the other"):
        ps.convolve(np.ones((2, 5)), np.ones((3, 2)), mode="valid")
    with pytest.raises(ValueError, match="only supports 2-dimensional inputs"):
        ps.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="boundary must be"):
        ps.convolve2d(A, B, boundary="reflect")
    with pytest.raises(ValueError, match="mode must be one of"):
        ps.correlate(A, B, mode="middle")
    with pytest.raises(ValueError, match="method"):
        ps.convolve(A, B, method="overlap")
    with pytest.raises(ValueError, match="mapped axes must have same shape"):
        ps.fftconvolve(A, B, axes=0)
    with pytest.raises(ValueError, match="trend type"):
        ps.detrend(A, type="quadratic")
