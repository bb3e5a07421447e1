"""plax.scipy.linalg's special matrices against scipy.linalg's: values and dtypes, batches of
the array-built ones (and their derivatives, jit and vmap), exact constants for the
size-built ones, and the errors for bad input."""
import numpy as np
import pytest
import scipy.linalg as sla

import plax
import plax.scipy.linalg as sl
from plax.test_util import check_grads

from helpers import F32, grad_check_defaults

F64 = np.dtype(np.float64)
I32 = np.dtype(np.int32)


def _same(got, want, dtype=None, rtol=1e-6, atol=1e-6):
    assert isinstance(got, plax.Array), type(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)


# --- built from arrays --------------------------------------------------------------------------
@pytest.mark.parametrize("name, args, dtype", [
    ("circulant", ([1, 2, 3],), I32),
    ("circulant", ([1.5, -2.0, 3.0, 0.25],), F32),
    ("companion", ([1.0, 2.0, 3.0, 4.0],), F32),
    ("companion", ([2, 3],), F32),
    ("fiedler", ([1, 4, 12, 45],), I32),
    ("hankel", ([1, 2, 3],), I32),
    ("hankel", ([1.0, 2.0, 3.0], [3.0, 4.0, 5.0, 6.0]), F32),
    ("hankel", ([1, 2, 3, 7, 8], [8, 4, 5]), I32),
    ("leslie", ([0.1, 2.0, 1.0, 0.1], [0.2, 0.8, 0.7]), F32),
    ("leslie", ([1, 2, 3], [5, 6]), I32),
    ("toeplitz", ([1, 2, 3], [1, 4, 5, 6]), I32),
])
def test_array_built_matrices_match_scipy(name, args, dtype):
    got = getattr(sl, name)(*[np.asarray(a) for a in args])
    _same(got, getattr(sla, name)(*args), dtype)


@pytest.mark.parametrize("n", range(2, 9))
def test_fiedler_companion_matches_scipy(n):
    coeffs = np.arange(1.0, n + 1) * (-1.0) ** np.arange(n)
    _same(sl.fiedler_companion(coeffs), sla.fiedler_companion(coeffs), F32)
    roots = np.sort_complex(np.roots(coeffs))
    eig = np.sort_complex(np.linalg.eigvals(np.asarray(sl.fiedler_companion(coeffs), F64)))
    np.testing.assert_allclose(eig, roots, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("m, n", [(4, 1), (4, 3), (4, 6), (1, 3)])
def test_convolution_matrix_matches_scipy_and_numpy_convolve(mode, m, n):
    a = np.arange(1.0, m + 1)
    v = np.linspace(-1.0, 2.0, n)
    got = sl.convolution_matrix(a, n, mode)
    _same(got, sla.convolution_matrix(a, n, mode), F32)
    np.testing.assert_allclose(np.asarray(got) @ v, np.convolve(a, v, mode), rtol=1e-5,
                               atol=1e-5)


def test_array_built_matrices_batch_and_broadcast():
    c = np.arange(6.0).reshape(2, 3)
    _same(sl.circulant(c), np.stack([sla.circulant(r) for r in c]))
    _same(sl.companion(c + 1), np.stack([sla.companion(r) for r in c + 1]))
    _same(sl.fiedler(c), np.stack([sla.fiedler(r) for r in c]))
    _same(sl.hankel(c, np.array([9.0, 8.0])), np.stack([sla.hankel(r, [9.0, 8.0]) for r in c]))
    _same(sl.leslie(c, np.array([0.5, 0.25])),
          np.stack([sla.leslie(r, [0.5, 0.25]) for r in c]))
    _same(sl.convolution_matrix(c, 2, "same"),
          np.stack([sla.convolution_matrix(r, 2, "same") for r in c]))
    _same(sl.circulant(5), [[5]], I32)
    vm = plax.vmap(plax.jit(sl.circulant))(c)
    _same(vm, sl.circulant(c))


@pytest.mark.parametrize("fn, args", [
    (sl.circulant, (np.array([1.0, -2.0, 0.5]),)),
    (sl.hankel, (np.array([1.0, 2.0, 3.0]), np.array([3.0, -1.0, 0.5, 2.0]))),
    (sl.toeplitz, (np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0]))),
    (sl.companion, (np.array([2.0, -1.0, 0.5, 3.0]),)),
    (sl.fiedler, (np.array([1.0, 4.0, 12.0]),)),
    (sl.fiedler_companion, (np.array([2.0, -1.0, 0.5, 3.0, 1.5, -2.0]),)),
    (sl.leslie, (np.array([0.1, 2.0, 1.0]), np.array([0.2, 0.8]))),
    (lambda a: sl.convolution_matrix(a, 3, "same"), (np.array([1.0, 2.0, -1.0, 0.5]),)),
])
def test_array_built_matrices_are_differentiable(fn, args):
    with plax.enable_x64():
        check_grads(fn, args, 2, modes=["fwd", "rev"], **grad_check_defaults(F64))


# --- built from a size --------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_size_built_matrices_match_scipy(n):
    _same(sl.hilbert(n), sla.hilbert(n), F32)
    _same(sl.invhilbert(n), sla.invhilbert(n), F32, rtol=1e-6, atol=0)
    for kind in (None, "symmetric", "lower", "upper"):
        ref_kind = kind or "symmetric"
        # exact integers: no rounding at all (JAX's are off by float32 rounding)
        _same(sl.pascal(n, kind), sla.pascal(n, ref_kind), F32, rtol=0, atol=0)
        _same(sl.invpascal(n, kind), sla.invpascal(n, ref_kind), F32, rtol=0, atol=0)


def test_size_built_matrices_in_double_precision():
    with plax.enable_x64():
        _same(sl.invhilbert(12), sla.invhilbert(12), F64, rtol=1e-15, atol=0)
        _same(sl.helmert(5, full=True), sla.helmert(5, full=True), F64, rtol=1e-15)
        _same(sl.dft(6, "sqrtn"), sla.dft(6, "sqrtn"), np.complex128, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("full", [False, True])
def test_helmert_matches_scipy_and_is_orthonormal(n, full):
    h = sl.helmert(n, full)
    _same(h, sla.helmert(n, full), F32)
    np.testing.assert_allclose(np.asarray(h) @ np.asarray(h).T, np.eye(h.shape[0]), atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 8, 16])
def test_hadamard_matches_scipy(n):
    _same(sl.hadamard(n), sla.hadamard(n), I32)
    _same(sl.hadamard(n, F32), sla.hadamard(n, F32), F32)


@pytest.mark.parametrize("scale", [None, "sqrtn", "n"])
@pytest.mark.parametrize("n", [0, 1, 5, 8])
def test_dft_matches_scipy(scale, n):
    got = sl.dft(n, scale)
    _same(got, sla.dft(n, scale), np.complex64)
    x = np.linspace(0.0, 1.0, n)
    if n:
        want = np.fft.fft(x, norm={None: "backward", "sqrtn": "ortho", "n": "forward"}[scale])
        np.testing.assert_allclose(np.asarray(got) @ x, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call, error, match", [
    (lambda: sl.companion(np.array([1.0])), ValueError, "must be at least 2"),
    (lambda: sl.leslie(np.array([1.0]), np.array([])), ValueError, "must be at least 2"),
    (lambda: sl.leslie(np.array([1.0, 2.0, 3.0]), np.array([5.0])), ValueError,
     "Incorrect lengths for f and s"),
    (lambda: sl.fiedler_companion(np.ones(0)), ValueError, "nonzero length"),
    (lambda: sl.convolution_matrix(np.ones(3), 0), ValueError, "n must be a positive integer"),
    (lambda: sl.convolution_matrix(np.ones(3), 2, "x"), ValueError,
     "mode must be one of 'full', 'valid', 'same'"),
    (lambda: sl.convolution_matrix(np.float32(1.0), 2), ValueError, "at least 1-dimensional"),
    (lambda: sl.hankel(np.float32(1.0)), ValueError, "c must be at least 1-dimensional"),
    (lambda: sl.circulant([1, 2]), TypeError, "circulant requires ndarray or scalar"),
    (lambda: sl.hadamard(6), ValueError, "n must be a positive power of 2"),
    (lambda: sl.helmert(0), ValueError, "n must be a positive integer"),
    (lambda: sl.pascal(3, "sideways"), ValueError, "Expected kind to be one of"),
    (lambda: sl.invpascal(3, "sideways"), ValueError, "Expected kind to be one of"),
    (lambda: sl.dft(3, "x"), ValueError, "scale must be None, 'sqrtn', or 'n'"),
    (lambda: sl.dft(3, dtype=np.float32), ValueError, "dtype must be a complex"),
    (lambda: sl.hilbert(2.5), TypeError, "must be a static Python integer"),
])
def test_bad_input_is_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()
