"""Reductions, argmax/argmin and cumulative ops against NumPy."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.lax.reductions as L
from plax.core.avals import ShapedArray
from plax.core.primitive import abstract_eval

bf16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(0)


def sample(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 5, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-3, 4, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _lowest(dt):
    return False if dt == np.bool_ else (np.iinfo(dt).min if dt.kind in "iu" else -np.inf)


def _highest(dt):
    return True if dt == np.bool_ else (np.iinfo(dt).max if dt.kind in "iu" else np.inf)


def _ones(dt):
    return True if dt == np.bool_ else np.array(-1).astype(dt)


# name -> (plax function, NumPy ufunc, identity for an empty reduction, dtypes)
REDUCTIONS = {
    "reduce_sum": (L.reduce_sum, np.add, lambda d: 0, [np.float32, np.int32, np.uint8, bf16]),
    "reduce_prod": (L.reduce_prod, np.multiply, lambda d: 1, [np.float32, np.int32]),
    "reduce_max": (L.reduce_max, np.maximum, _lowest, [np.float32, np.int32, np.uint8, np.bool_, bf16]),
    "reduce_min": (L.reduce_min, np.minimum, _highest, [np.float32, np.int32, np.uint8, np.bool_]),
    "reduce_and": (L.reduce_and, np.bitwise_and, _ones, [np.int32, np.uint8, np.bool_]),
    "reduce_or": (L.reduce_or, np.bitwise_or, lambda d: 0, [np.int32, np.uint8, np.bool_]),
    "reduce_xor": (L.reduce_xor, np.bitwise_xor, lambda d: 0, [np.int32, np.bool_]),
}

AXES_CASES = [((), ()), ((5,), (0,)), ((2, 3, 4), (0, 2)), ((2, 3), (1, 0)), ((2, 3), ()),
              ((0, 3), (0,)), ((3, 0), (0,)), ((2, 0, 3), (1, 2))]


def reduce_reference(ufunc, identity, x, axes):
    out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if not axes:
        return x
    if any(x.shape[a] == 0 for a in axes):
        return np.full(out_shape, identity(x.dtype), x.dtype)
    wide = x.astype(np.float32) if x.dtype == bf16 else x
    return np.asarray(ufunc.reduce(wide, axis=tuple(axes), dtype=wide.dtype)).astype(x.dtype)


def check_reduction(name, dtype, shape, axes):
    fn, ufunc, identity, _ = REDUCTIONS[name]
    x = sample(shape, dtype)
    out = fn(x, axes)
    want = reduce_reference(ufunc, identity, x, axes)
    assert out.dtype == np.dtype(dtype) and out.shape == want.shape
    tol = 2e-2 if np.dtype(dtype) == bf16 else 1e-5
    if np.dtype(dtype).kind == "f" or np.dtype(dtype) == bf16:
        np.testing.assert_allclose(np.asarray(out, np.float32), want.astype(np.float32), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(np.asarray(out), want)


@pytest.mark.parametrize("name,dtype", [(n, d) for n, row in REDUCTIONS.items() for d in row[3]])
def test_reduction_dtypes(name, dtype):
    check_reduction(name, dtype, (2, 3, 4), (0, 2))


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("shape,axes", AXES_CASES)
def test_reduction_shapes(name, shape, axes):
    check_reduction(name, REDUCTIONS[name][3][0], shape, axes)


def test_empty_reduction_identities():
    e = np.zeros((0, 2), np.float32)
    np.testing.assert_array_equal(L.reduce_sum(e, (0,)), [0, 0])
    np.testing.assert_array_equal(L.reduce_prod(e, (0,)), [1, 1])
    np.testing.assert_array_equal(L.reduce_max(e, (0,)), [-np.inf, -np.inf])
    np.testing.assert_array_equal(L.reduce_min(e, (0,)), [np.inf, np.inf])
    np.testing.assert_array_equal(L.reduce_max(e.astype(bf16), (0,)).astype(np.float32), [-np.inf] * 2)
    np.testing.assert_array_equal(L.reduce_max(e.astype(np.int32), (0,)), [np.iinfo(np.int32).min] * 2)
    np.testing.assert_array_equal(L.reduce_min(e.astype(np.uint8), (0,)), [255, 255])
    np.testing.assert_array_equal(L.reduce_and(e.astype(np.int32), (0,)), [-1, -1])
    np.testing.assert_array_equal(L.reduce_and(e.astype(np.bool_), (0,)), [True, True])


def test_max_min_nan_and_complex():
    x = np.array([[1, np.nan, 3], [4, 5, 6]], np.float32)
    np.testing.assert_array_equal(L.reduce_max(x, (1,)), [np.nan, 6])
    np.testing.assert_array_equal(L.reduce_min(x, (0,)), [1, np.nan, 3])
    c = np.array([1 + 2j, 1 + 3j, 0j, -1 + 9j], np.complex64)  # lexicographic (real, imag)
    assert complex(L.reduce_max(c, (0,))) == 1 + 3j
    assert complex(L.reduce_min(c, (0,))) == -1 + 9j
    assert complex(L.reduce_sum(c, (0,))) == pytest.approx(1 + 14j)


def test_wrapping_integer_sums():
    x = np.array([250, 10], np.uint8)
    assert int(L.reduce_sum(x, (0,))) == 4
    assert int(L.reduce_prod(np.array([16, 17], np.uint8), (0,))) == (16 * 17) % 256


# --- argmax / argmin ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_, bf16])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 0, 4), 2)])
def test_argmax_argmin(dtype, shape, axis):
    x = sample(shape, dtype)  # small value ranges, so ties are common
    for fn, ref in ((L.argmax, np.argmax), (L.argmin, np.argmin)):
        out = fn(x, axis, np.int32)
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, ref(x.astype(np.float32) if dtype == bf16 else x, axis=axis))


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint8, np.int16])
def test_argmax_index_dtypes(index_dtype):
    x = sample((4, 6), np.float32)
    out = L.argmax(x, 1, index_dtype)
    assert out.dtype == index_dtype
    np.testing.assert_array_equal(out, np.argmax(x, axis=1))


def test_argmax_argmin_nan_and_zeros():
    x = np.array([1, np.nan, 3, np.nan, -np.inf], np.float32)
    assert int(L.argmax(x, 0, np.int32)) == 1 == np.argmax(x)
    assert int(L.argmin(x, 0, np.int32)) == 1 == np.argmin(x)
    # Columns with NaNs in various places, against NumPy (first NaN wins).
    m = sample((6, 8), np.float32)
    m[rng.random(m.shape) < 0.25] = np.nan
    m[:, 0] = np.nan
    m[:, 1] = 7.0
    np.testing.assert_array_equal(L.argmax(m, 0, np.int32), np.argmax(m, axis=0))
    np.testing.assert_array_equal(L.argmin(m, 0, np.int32), np.argmin(m, axis=0))
    assert int(L.argmax(np.array([-0.0, 0.0, 0.0], np.float32), 0, np.int32)) == 0
    assert int(L.argmin(np.array([0.0, -0.0], np.float32), 0, np.int32)) == 0
    assert int(L.argmax(np.full(4, -np.inf, np.float32), 0, np.int32)) == 0
    assert int(L.argmin(np.full(4, np.inf, np.float32), 0, np.int32)) == 0
    assert int(L.argmax(np.full(3, np.iinfo(np.int32).min, np.int32), 0, np.int32)) == 0


# --- cumulative ops -------------------------------------------------------------------------
CUMULATIVE = {
    "cumsum": (L.cumsum, np.add, [np.float32, np.int32, np.uint8, bf16]),
    "cumprod": (L.cumprod, np.multiply, [np.float32, np.int32]),
    "cummax": (L.cummax, np.maximum, [np.float32, np.int32, np.uint8]),
    "cummin": (L.cummin, np.minimum, [np.float32, np.int32]),
    "cumlogsumexp": (L.cumlogsumexp, np.logaddexp, [np.float32, bf16]),
}


def cum_reference(ufunc, x, axis, reverse):
    wide = x.astype(np.float32) if x.dtype == bf16 else x
    if reverse:
        wide = np.flip(wide, axis)
    out = ufunc.accumulate(wide, axis=axis, dtype=wide.dtype)
    return (np.flip(out, axis) if reverse else out).astype(x.dtype)


def check_cumulative(name, dtype, shape, axis, reverse):
    fn, ufunc, _ = CUMULATIVE[name]
    x = sample(shape, dtype)
    out = fn(x, axis, reverse=reverse)
    want = cum_reference(ufunc, x, axis, reverse)
    assert out.dtype == np.dtype(dtype) and out.shape == x.shape
    tol = 3e-2 if np.dtype(dtype) == bf16 else 1e-5
    np.testing.assert_allclose(np.asarray(out).astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("name,dtype", [(n, d) for n, row in CUMULATIVE.items() for d in row[2]])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_dtypes(name, dtype, reverse):
    check_cumulative(name, dtype, (3, 5), 1, reverse)


@pytest.mark.parametrize("name", list(CUMULATIVE))
@pytest.mark.parametrize("shape,axis", [((6,), 0), ((2, 3, 4), 1), ((1,), 0), ((0, 3), 0), ((3, 0), 0)])
def test_cumulative_shapes(name, shape, axis):
    check_cumulative(name, CUMULATIVE[name][2][0], shape, axis, reverse=False)


def test_cumulative_special_values():
    np.testing.assert_array_equal(L.cumsum(np.array([250, 10], np.uint8), 0), [250, 4])
    np.testing.assert_array_equal(L.cummax(np.array([1, np.nan, 3], np.float32), 0), [1, np.nan, np.nan])
    np.testing.assert_array_equal(L.cummin(np.array([3, 1, 2], np.int32), 0, reverse=True), [1, 1, 2])
    np.testing.assert_allclose(L.cumlogsumexp(np.array([0, 0, -np.inf], np.float32), 0),
                               [0, np.log(2), np.log(2)], rtol=1e-6)
    np.testing.assert_array_equal(L.cumlogsumexp(np.array([-np.inf, -np.inf], np.float32), 0),
                                  [-np.inf, -np.inf])
    np.testing.assert_array_equal(L.cumlogsumexp(np.array([np.inf, np.inf, 1], np.float32), 0),
                                  [np.inf, np.inf, np.inf])
    c = np.array([1 + 1j, 2, 1 + 5j], np.complex64)
    np.testing.assert_allclose(L.cumsum(c, 0), np.cumsum(c))
    np.testing.assert_array_equal(L.cummax(c, 0), [1 + 1j, 2, 2])


# --- weak types, jaxprs, errors ---------------------------------------------------------------
def test_weak_types():
    weak = ShapedArray((3,), np.float32, weak_type=True)
    weak_int = ShapedArray((3,), np.int32, weak_type=True)
    out = lambda p, a, **kw: abstract_eval(p, [a], kw)[0]
    assert out(L.reduce_sum_p, weak, axes=(0,), out_sharding=None).weak_type
    assert out(L.reduce_max_p, weak, axes=(0,)).weak_type
    assert not out(L.reduce_or_p, weak_int, axes=(0,)).weak_type  # as JAX
    assert not out(L.argmax_p, weak, axes=(0,), index_dtype=np.dtype(np.int32)).weak_type
    assert out(L.cumsum_p, weak, axis=0, reverse=False).weak_type
    assert L.reduce_sum(2.0, ()).aval.weak_type


def test_make_jaxpr_printing():
    x = np.zeros((2, 3), np.float32)
    with pytest.warns(UserWarning, match="requested dtype int64 requested in argmin"):
        text = str(plax.make_jaxpr(lambda x: (
            L.reduce_sum(x, (0,)), L.reduce_prod(x, (0, 1)), L.reduce_max(x, [1]),
            L.reduce_min(x, ()), L.argmax(x, 0, np.int32), L.argmin(x, 1, np.int64),
            L.cumsum(x, 0), L.cumprod(x, 1, reverse=True), L.cummax(x), L.cummin(x),
            L.cumlogsumexp(x)))(x))
    for piece in ["f32[3] = reduce_sum[axes=(0,) out_sharding=None] a",
                  "f32[] = reduce_prod[axes=(0, 1)] a", "f32[2] = reduce_max[axes=(1,)] a",
                  "f32[2,3] = reduce_min[axes=()] a", "i32[3] = argmax[axes=(0,) index_dtype=int32] a",
                  "i32[2] = argmin[axes=(1,) index_dtype=int32] a", "cumsum[axis=0 reverse=False] a",
                  "cumprod[axis=1 reverse=True] a", "cummax[axis=0 reverse=False] a",
                  "cummin[axis=0 reverse=False] a", "cumlogsumexp[axis=0 reverse=False] a"]:
        assert piece in text, (piece, text)
    b = np.zeros(3, np.bool_)
    text = str(plax.make_jaxpr(lambda b: (L.reduce_and(b, (0,)), L.reduce_or(b, (0,)),
                                          L.reduce_xor(b, (0,))))(b))
    for piece in ["bool[] = reduce_and[axes=(0,)] a", "bool[] = reduce_or[axes=(0,)] a",
                  "bool[] = reduce_xor[axes=(0,)] a"]:
        assert piece in text


X = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: L.reduce_sum(X, (2,)), ValueError, "out-of-bounds"),
    (lambda: L.reduce_max(X, (-1,)), ValueError, "out-of-bounds"),
    (lambda: L.reduce_sum(X, (0, 0)), ValueError, "duplicate"),
    (lambda: L.reduce_sum(X, 0), TypeError, "sequence of integers"),
    (lambda: L.reduce_sum(np.zeros(2, np.bool_), (0,)), TypeError, "does not accept dtype bool"),
    (lambda: L.reduce_prod(np.zeros(2, np.bool_), (0,)), TypeError, "does not accept dtype bool"),
    (lambda: L.reduce_and(X, (0,)), TypeError, "bool or integer, got float32"),
    (lambda: L.reduce_xor(X, (0,)), TypeError, "bool or integer, got float32"),
    (lambda: L.argmax(X, 2, np.int32), ValueError, "invalid axis 2"),
    (lambda: L.argmax(X, -1, np.int32), ValueError, "invalid axis -1"),
    (lambda: L.argmax(np.float32(1), 0, np.int32), ValueError, "invalid axis 0"),
    (lambda: L.argmin(np.zeros((0, 3), np.float32), 0, np.int32), ValueError, "non-empty"),
    (lambda: L.argmax(X, 0, np.float32), TypeError, "index_dtype must be an integer"),
    (lambda: L.argmax(X, 0, np.bool_), TypeError, "index_dtype must be an integer"),
    (lambda: L.argmax(np.zeros(2, np.complex64), 0, np.int32), TypeError, "complex64"),
    (lambda: L.cumsum(X, 2), ValueError, "out of bounds"),
    (lambda: L.cumsum(X, -1), ValueError, "no negative axes"),
    (lambda: L.cumsum(np.float32(2), 0), ValueError, "out of bounds"),
    (lambda: L.cumsum(np.zeros(2, np.bool_), 0), TypeError, "does not accept dtype bool"),
    (lambda: L.cummax(np.zeros(2, np.bool_), 0), TypeError, "does not accept dtype bool"),
    (lambda: L.cumlogsumexp(np.zeros(2, np.int32), 0), TypeError, "does not accept dtype int32"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
