"""plax.scipy.signal's stft, istft, welch and csd against scipy.signal (windows by name, tuple
and array; nperseg, noverlap, nfft, detrend, boundary, padded, scaling, average, axes), the
round trip stft -> istft, jit/vmap/grad, and the errors for bad arguments."""
import warnings

import numpy as np
import pytest
import scipy.signal as sg

import plax
from plax.scipy import signal as S
from helpers import close

F32, F64, C64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64)
RNG = np.random.default_rng(7)
X = RNG.normal(size=(3, 100)).astype(np.float32)
X3 = RNG.normal(size=(4, 50, 3)).astype(np.float32)


def _reference(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (SciPy warns where nperseg exceeds the input)
        return fn(*args, **kwargs)


def _same(ours, want, rtol=2e-5, atol=2e-6):
    assert len(ours) == len(want)
    for o, w in zip(ours, want):
        w = np.asarray(w)
        dtype = np.dtype(np.complex64) if w.dtype.kind == "c" else F32
        close(o, w, o.dtype if o.dtype in (F64, np.complex128) else dtype, rtol, atol)


STFT_CASES = [
    ("default", X, dict(nperseg=16)),
    ("axis0", X.T, dict(nperseg=16, axis=0)),
    ("axis1 of 3d", X3, dict(nperseg=16, axis=1)),
    ("hamming nfft detrend", X, dict(nperseg=16, noverlap=5, nfft=20, window="hamming",
                                     detrend="linear")),
    ("even unpadded", X, dict(nperseg=16, boundary="even", padded=False)),
    ("odd", X, dict(nperseg=12, noverlap=3, boundary="odd")),
    ("constant", X, dict(nperseg=16, boundary="constant", fs=10.0)),
    ("no boundary", X, dict(nperseg=16, boundary=None, padded=False)),
    ("tukey tuple", X, dict(nperseg=16, window=("tukey", 0.3))),
    ("array window", X, dict(nperseg=16, window=np.hanning(16))),
    ("two-sided", X, dict(nperseg=16, return_onesided=False)),
    ("complex", X + 1j * X[::-1], dict(nperseg=16)),
    ("short input", X[:, :5], dict()),
]


@pytest.mark.parametrize("name,x,kw", STFT_CASES, ids=[c[0] for c in STFT_CASES])
def test_stft_like_scipy(name, x, kw):
    want = _reference(sg.stft, x, **kw)
    if name == "complex":  # SciPy gives complex input two-sided spectra only when asked
        want = _reference(sg.stft, x, return_onesided=False, **kw)
    _same(S.stft(x, **kw), want)


WELCH_CASES = [
    ("default", X, dict()),
    ("axis1 of 3d", X3, dict(nperseg=16, axis=1)),
    ("median", X, dict(nperseg=16, average="median")),
    ("spectrum fs nfft odd", X, dict(nperseg=16, scaling="spectrum", fs=10.0, nfft=21)),
    ("linear detrend", X, dict(nperseg=20, noverlap=15, detrend="linear", window="blackman")),
    ("no detrend", X + 3, dict(nperseg=16, detrend=False)),
    ("callable detrend", X, dict(nperseg=16, detrend=lambda d: d - d.mean(axis=-1,
                                                                         keepdims=True))),
    ("array window", X, dict(window=np.hanning(20), noverlap=3)),
    ("two-sided", X, dict(nperseg=16, return_onesided=False)),
    ("one segment", X[:, :16], dict(nperseg=16)),
    ("short input", X[:, :5], dict()),
]


@pytest.mark.parametrize("name,x,kw", WELCH_CASES, ids=[c[0] for c in WELCH_CASES])
def test_welch_like_scipy(name, x, kw):
    _same(S.welch(x, **kw), _reference(sg.welch, x, **kw), atol=1e-6)


def test_welch_complex_is_two_sided_and_real():
    x = X + 1j * X[::-1]
    f, p = S.welch(x, nperseg=16)
    assert p.dtype == F32 and p.shape == (3, 16)
    _same((f, p), _reference(sg.welch, x, nperseg=16, return_onesided=False), atol=1e-6)


CSD_CASES = [
    ("3d, y shorter", X3, X3[:, :40] * 2 + 1, dict(nperseg=16, axis=1)),
    ("median tukey", X, X[::-1] ** 2, dict(nperseg=16, average="median",
                                           window=("tukey", 0.3))),
    ("spectrum", X, np.roll(X, 3, axis=-1), dict(nperseg=32, scaling="spectrum")),
]


@pytest.mark.parametrize("name,x,y,kw", CSD_CASES, ids=[c[0] for c in CSD_CASES])
def test_csd_like_scipy(name, x, y, kw):
    _same(S.csd(x, y, **kw), _reference(sg.csd, x, y, **kw), atol=1e-6)


def test_csd_broadcasts_and_complex():
    f, p = S.csd(X3[:1], X3, nperseg=16, axis=1)
    want = _reference(sg.csd, np.broadcast_to(X3[:1], X3.shape), X3, nperseg=16, axis=1)
    _same((f, p), want, atol=1e-6)
    # complex y: two-sided
    _same(S.csd(X, 1j * X, nperseg=16),
          _reference(sg.csd, X, 1j * X, nperseg=16, return_onesided=False), atol=1e-6)
    # y None is x's own (real) spectrum
    _, own = S.csd(X, None, nperseg=16)
    assert own.dtype == F32
    close(own, _reference(sg.welch, X, nperseg=16)[1], F32, 2e-5, 1e-6)


def _stft_of(x, **kw):
    return _reference(sg.stft, x, **kw)[2]


ISTFT_CASES = [
    ("default", _stft_of(X, nperseg=16), dict(nperseg=16)),
    ("inferred nperseg", _stft_of(X, nperseg=16), dict()),
    ("no boundary", _stft_of(X, nperseg=16), dict(nperseg=16, boundary=False)),
    ("hamming nfft", _stft_of(X, nperseg=16, noverlap=12, nfft=20, window="hamming"),
     dict(nperseg=16, noverlap=12, nfft=20, window="hamming")),
    ("two-sided", _stft_of(X, nperseg=16, return_onesided=False),
     dict(nperseg=16, input_onesided=False)),
    ("time axis first", np.moveaxis(_stft_of(X, nperseg=16, return_onesided=False), -1, 0),
     dict(nperseg=16, input_onesided=False, time_axis=0, freq_axis=-1)),
    ("3d", _stft_of(X3, nperseg=16, axis=1), dict(nperseg=16, time_axis=-1, freq_axis=1)),
    ("3d time first", np.moveaxis(_stft_of(X3, nperseg=16, axis=1), -1, 0),
     dict(nperseg=16, time_axis=0, freq_axis=2)),
    ("boxcar", _stft_of(X, nperseg=16, window="boxcar", noverlap=4),
     dict(nperseg=16, window="boxcar", noverlap=4)),
]


@pytest.mark.parametrize("name,Z,kw", ISTFT_CASES, ids=[c[0] for c in ISTFT_CASES])
def test_istft_like_scipy(name, Z, kw):
    # (both give the times along the output's first axis, for a batch the batch axis)
    # strict promotion: complex segments and the real window never mix implicitly
    with plax.numpy_dtype_promotion("strict"):
        got = S.istft(Z, **kw)
    _same(got, _reference(sg.istft, Z, **kw))


def test_round_trip_and_transformations():
    forward = lambda x: S.stft(x, nperseg=16)[2]  # noqa: E731
    back = lambda z: S.istft(z, nperseg=16)[1][..., :100]  # noqa: E731
    close(plax.jit(lambda x: back(forward(x)))(X), X, F32, 1e-5, 1e-5)
    # vmap over the batch matches the batched call
    close(plax.vmap(forward)(X), np.asarray(forward(X)), C64, 1e-6, 1e-6)
    close(plax.vmap(lambda x: S.welch(x, nperseg=16)[1])(X),
          _reference(sg.welch, X, nperseg=16)[1], F32, 2e-5, 1e-6)
    # the gradient of the round trip is the identity's
    close(plax.grad(lambda x: back(forward(x)).sum())(X), np.ones_like(X), F32, 1e-5, 1e-5)
    # d/dx of sum(Pxx) by central differences in one direction
    with plax.enable_x64():
        x = X.astype(np.float64)
        direction = RNG.normal(size=x.shape)
        f = lambda x: S.welch(x, nperseg=16, scaling="spectrum")[1].sum()  # noqa: E731
        eps = 1e-6
        numeric = (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)
        analytic = np.sum(np.asarray(plax.grad(f)(x)) * direction)
        np.testing.assert_allclose(analytic, float(numeric), rtol=1e-6)
        f64, t64, z64 = S.stft(x, nperseg=16)
        assert (f64.dtype, t64.dtype, z64.dtype) == (F64, F64, np.complex128)


def test_empty_input():
    f, p = S.welch(np.zeros((3, 0), np.float32))
    assert f.shape == p.shape == (3, 0)


ERRORS = [
    (lambda: S.welch(X, window=np.ones(10), nperseg=16), "different from length of window"),
    (lambda: S.welch(X, nperseg=16, noverlap=16), "noverlap must be less than nperseg"),
    (lambda: S.welch(X, nperseg=16, nfft=8), "nfft must be greater than or equal to nperseg"),
    (lambda: S.welch(X, nperseg=0), "nperseg must be a positive integer"),
    (lambda: S.stft(X, boundary="foo"), "Unknown boundary option"),
    (lambda: S.welch(X, scaling="foo"), "Unknown scaling"),
    (lambda: S.welch(X, average="foo"), "average must be"),
    (lambda: S.welch(X, axis=2), "out of bounds"),
    (lambda: S.istft(np.zeros(9, np.complex64)), "at least 2d"),
    (lambda: S.istft(np.zeros((9, 4), np.complex64), time_axis=1, freq_axis=1),
     "differing time and frequency axes"),
    (lambda: S.istft(np.zeros((9, 4), np.complex64), nperseg=16, window=np.ones(8)),
     "window must have length of 16"),
    (lambda: S.istft(np.zeros((9, 4), np.complex64), nperseg=16, noverlap=16),
     "noverlap must be less than nperseg"),
    (lambda: S.istft(np.zeros((9, 4), np.complex64), nperseg=16, nfft=8),
     "must be longer than nperseg"),
]


@pytest.mark.parametrize("call,match", ERRORS, ids=[e[1] for e in ERRORS])
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("name, fun", [
    ("detrend", lambda x: S.detrend(x, bp=[10, 30])),
    ("welch", lambda x: S.welch(x, nperseg=16)[1]),
    ("welch_median_complex", lambda x: S.welch(x.astype(np.complex64), nperseg=16,
                                                  average="median", detrend="linear")[1]),
    ("csd", lambda x: S.csd(x, x[:1], nperseg=16, scaling="spectrum")[1]),
    ("istft", lambda x: S.istft(S.stft(x, nperseg=16)[2], nperseg=16)[1]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_spectral_functions_under_strict_rank_and_dtype_promotion(name, fun):
    # JAX's own signal tests run with both strict: the library keeps ranks and dtypes explicit
    x = np.random.default_rng(0).normal(size=(2, 64)).astype(np.float32)
    want = np.asarray(fun(x))
    with plax.numpy_rank_promotion("raise"), plax.numpy_dtype_promotion("strict"):
        got = np.asarray(fun(x))
    np.testing.assert_array_equal(got, want)
    assert np.all(np.isfinite(got))
