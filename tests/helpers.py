"""Shared test helpers: dtype shorthands, random samples by domain, tolerant comparisons."""
import ml_dtypes
import numpy as np

import plax

F32, F16, BF16, C64 = (np.dtype(t) for t in (np.float32, np.float16, ml_dtypes.bfloat16, np.complex64))
I32, U8, I8, I16, BOOL = (np.dtype(t) for t in (np.int32, np.uint8, np.int8, np.int16, np.bool_))

# Input domains: (low, high) for floats (complex values add a small imaginary part) and ints.
FLOAT_DOMAINS = {"real": (-2, 2), "unit": (-0.9, 0.9), "pos": (0.1, 3), "ge1": (1.1, 3),
                 "nonzero": (0.5, 2), "small": (0, 3)}
INT_DOMAINS = {"real": (-5, 5), "unit": (-1, 1), "pos": (1, 5), "ge1": (1, 5), "nonzero": (1, 5),
               "shift": (0, 7), "small": (0, 4)}


def sample(shape, dtype, domain="real", seed=0):
    """Random values of ``dtype`` in ``domain`` ("nonzero" draws both signs away from zero)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    sign = np.where(rng.random(shape) < 0.5, -1, 1) if domain == "nonzero" else 1
    if dtype == BOOL:
        return rng.random(shape) < 0.5 if domain not in ("pos", "nonzero") else np.ones(shape, bool)
    if dtype.kind in "iu":
        lo, hi = INT_DOMAINS[domain]
        if dtype.kind == "u":
            lo, sign = max(lo, 0), 1
        return (sign * rng.integers(lo, hi + 1, shape)).astype(dtype)
    lo, hi = FLOAT_DOMAINS[domain]
    values = sign * rng.uniform(lo, hi, shape)
    if dtype.kind == "c":
        values = values + 1j * rng.uniform(-0.5, 0.5, shape)
    return values.astype(dtype)


def wide(x):
    """Host copy in which NumPy computes the reference: float64/complex128 for inexact input."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind == "f" or x.dtype == BF16:
        return x.astype(np.float64)
    return x


def tolerance(dtype):
    return {BF16: 2e-2, F16: 4e-3, F32: 2e-5, C64: 2e-5}.get(np.dtype(dtype), 0)


def check(out, want, dtype, weak=None, rtol=None):
    """``out`` is a plax Array of ``dtype`` (and weak type) whose values match ``want`` (NaNs match)."""
    assert isinstance(out, plax.Array), type(out)
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    if weak is not None:
        assert out.aval.weak_type == weak, out.aval
    want = np.asarray(want)
    assert out.shape == want.shape, (out.shape, want.shape)
    tol = tolerance(dtype) if rtol is None else rtol
    if tol:
        np.testing.assert_allclose(wide(out), wide(want), rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(np.asarray(out), want)
