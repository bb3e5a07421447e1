"""sort, sort_key_val and top_k against NumPy."""
import ml_dtypes
import numpy as np
import pytest

import plax
from plax import lax as L  # sort, sort_key_val, top_k

bf16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(0)


def sample(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 6, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-4, 5, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.integers(-2, 3, shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def as_np(x, dtype):
    return np.asarray(x).astype(np.float32) if np.dtype(dtype) == bf16 else np.asarray(x)


DTYPES = [np.float32, np.int32, np.uint8, np.bool_, bf16, np.float16, np.complex64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dimension", [((7,), -1), ((3, 4), 0), ((3, 4), 1), ((0,), 0),
                                             ((2, 0), 1), ((1,), 0)])
def test_sort_values(dtype, shape, dimension):
    x = sample(shape, dtype)
    out = L.sort(x, dimension=dimension)
    assert out.dtype == np.dtype(dtype) and out.shape == x.shape
    np.testing.assert_array_equal(as_np(out, dtype), np.sort(as_np(x, dtype), axis=dimension))


def test_sort_nan_and_signed_zero():
    x = np.array([3, np.nan, -0.0, 0.0, -np.inf, np.inf, -np.nan, 0.0, -0.0, 1], np.float32)
    keys, perm = L.sort_key_val(x, np.arange(x.size, dtype=np.int32))
    np.testing.assert_array_equal(keys, np.sort(x))  # NaNs last
    # -0.0 and 0.0 compare equal and all NaNs are equal, so a stable sort keeps input order.
    np.testing.assert_array_equal(perm, [4, 2, 3, 7, 8, 9, 0, 5, 1, 6])
    np.testing.assert_array_equal(np.signbit(np.asarray(keys)), np.signbit(x[np.asarray(perm)]))
    c = np.array([1 + 1j, np.nan, 1 - 1j, 0 + 5j, 1 + 0j], np.complex64)
    np.testing.assert_array_equal(L.sort(c), np.sort(c))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_sort_key_val_is_stable(dtype):
    keys = sample((4, 9), dtype)
    vals = rng.standard_normal((4, 9)).astype(np.float32)
    k, v = L.sort_key_val(keys, vals, dimension=1)
    order = np.argsort(keys, axis=1, kind="stable")
    np.testing.assert_array_equal(k, np.take_along_axis(keys, order, 1))
    np.testing.assert_array_equal(v, np.take_along_axis(vals, order, 1))
    assert v.dtype == np.float32


def test_sort_several_keys():
    k1 = rng.integers(0, 3, 12).astype(np.int32)
    k2 = rng.integers(0, 3, 12).astype(np.float32)
    v = np.arange(12, dtype=np.int32)
    outs = L.sort((k1, k2, v), num_keys=2)
    assert isinstance(outs, tuple) and len(outs) == 3
    order = np.lexsort((v, k2, k1))  # ties in both keys keep input order (stable)
    for got, want in zip(outs, (k1, k2, v)):
        np.testing.assert_array_equal(got, want[order])
    # num_keys=1 sorts by the first operand only; the others follow stably.
    outs = L.sort([k1, k2], num_keys=1)
    np.testing.assert_array_equal(outs[1], k2[np.argsort(k1, kind="stable")])
    (single,) = L.sort([k1])
    np.testing.assert_array_equal(single, np.sort(k1))


def test_sort_unstable_still_sorts():
    x = sample((5, 6), np.float32)
    np.testing.assert_array_equal(L.sort(x, dimension=0, is_stable=False), np.sort(x, axis=0))


# --- top_k ---------------------------------------------------------------------------------
def top_k_reference(x, k, axis):
    order = np.argsort(-x.astype(np.float64), axis=axis, kind="stable")  # ties: lower index first
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis), idx


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, bf16, np.bool_])
@pytest.mark.parametrize("shape,k,axis", [((8,), 3, -1), ((3, 5), 5, -1), ((4, 3), 2, 0),
                                          ((2, 3, 4), 1, 1), ((2, 3), 0, -1)])
def test_top_k(dtype, shape, k, axis):
    x = sample(shape, dtype)
    vals, idx = L.top_k(x, k, axis=axis)
    want_vals, want_idx = top_k_reference(as_np(x, dtype), k, axis % len(shape))
    assert vals.dtype == np.dtype(dtype) and idx.dtype == np.int32
    assert vals.shape == idx.shape == want_idx.shape
    np.testing.assert_array_equal(as_np(vals, dtype), want_vals)
    np.testing.assert_array_equal(idx, want_idx)


def test_top_k_nan():
    vals, idx = L.top_k(np.array([1, np.nan, 3, np.inf], np.float32), 3)
    np.testing.assert_array_equal(vals, [np.nan, np.inf, 3])
    np.testing.assert_array_equal(idx, [1, 3, 2])


# --- weak types, jaxprs, errors -------------------------------------------------------------
def _out_avals(fn, *args):
    return [v.aval for v in plax.make_jaxpr(fn)(*args).jaxpr.outvars]


def test_weak_types():
    # a weakly typed (3,) float operand (broadcast from a Python float) and a strong int one
    weak = lambda s: L.broadcast(s, (3,))  # noqa: E731
    outs = _out_avals(lambda s, i: L.sort((weak(s), i), dimension=0, is_stable=True, num_keys=1),
                      1.0, np.zeros(3, np.int32))
    assert [o.weak_type for o in outs] == [True, False]
    outs = _out_avals(lambda s: L.top_k(weak(s), 2), 1.0)
    assert [o.weak_type for o in outs] == [True, True]  # JAX marks both results weak
    assert outs[1].dtype == np.int32 and outs[1].shape == (2,)


def test_make_jaxpr_printing():
    x = np.zeros((2, 3), np.float32)
    text = str(plax.make_jaxpr(lambda x: (L.sort(x), L.sort((x, x), num_keys=1), L.sort_key_val(x, x),
                                          L.sort(x, dimension=0, is_stable=False),
                                          L.top_k(x, 2), L.top_k(x, 2, axis=0)))(x))
    for piece in ["b:f32[2,3] = sort[dimension=1 is_stable=True num_keys=1] a",
                  "c:f32[2,3] d:f32[2,3] = sort[dimension=1 is_stable=True num_keys=1] a a",
                  "sort[dimension=0 is_stable=False num_keys=1] a",
                  "f32[2,2] i:i32[2,2] = top_k[axis=1 k=2] a",
                  "f32[2,3] k:i32[2,3] = top_k[axis=0 k=2] a"]:
        assert piece in text, (piece, text)


X = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: L.sort(X, dimension=2), ValueError, "axis 2 is out of bounds"),
    (lambda: L.sort(X, dimension=-3), ValueError, "axis -3 is out of bounds"),
    (lambda: L.sort(np.float32(3)), ValueError, "out of bounds for an array of dimension 0"),
    (lambda: L.sort(X, num_keys=2), ValueError, "must equal 1 for a single operand"),
    (lambda: L.sort((X, X), num_keys=3), ValueError, "num_keys=3"),
    (lambda: L.sort((X, X), num_keys=0), ValueError, "num_keys=0"),
    (lambda: L.sort((X, X[0])), TypeError, "equal shapes"),
    (lambda: L.sort_key_val(X, X[0]), TypeError, "equal shapes"),
    (lambda: L.sort(()), TypeError, "at least one operand"),
    (lambda: L.top_k(X, 4), ValueError, "no larger than size along axis"),
    (lambda: L.top_k(X, -1), ValueError, "nonnegative"),
    (lambda: L.top_k(X, 2.5), TypeError, "must be an integer"),
    (lambda: L.top_k(X, 1, axis=5), ValueError, "axis 5 is out of bounds"),
    (lambda: L.top_k(np.float32(1), 1), ValueError, "out of bounds for an array of dimension 0"),
    (lambda: L.top_k(np.zeros(3, np.complex64), 1), TypeError, "complex64"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
