"""plax.numpy reductions against NumPy (values) and JAX's dtype rules (result dtypes)."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.runtime.array import Array

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.int32, np.bool_, BF16, np.int8, np.uint8]


def make(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 6, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-4, 5, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def f32(x):
    """A NumPy reference input: bfloat16 is computed in float32."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == BF16 else x


def check(got, want, dtype=None, shape=None, tol=None):
    assert isinstance(got, Array), type(got)
    got_np = np.asarray(got)
    want = np.asarray(want)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got_np.shape == (want.shape if shape is None else shape), (got_np.shape, want.shape)
    if got_np.dtype == BF16 or (tol is None and np.dtype(got.dtype) == BF16):
        tol = tol or 3e-2
    if got_np.dtype.kind in "fc" or got_np.dtype == BF16:
        np.testing.assert_allclose(f32(got_np), want, rtol=tol or 1e-5, atol=tol or 1e-5)
    else:
        np.testing.assert_array_equal(got_np, want)


# --- result dtypes as JAX 0.10 gives them (x64 off) ---------------------------------------
SUM_DTYPE = {np.float32: np.float32, np.int32: np.int32, np.bool_: np.int32, BF16: BF16,
             np.int8: np.int32, np.uint8: np.uint32}
MEAN_DTYPE = {np.float32: np.float32, np.int32: np.float32, np.bool_: np.float32, BF16: BF16,
              np.int8: np.float32, np.uint8: np.float32}

REDUCTIONS = [
    # name, numpy reference, dtype rule
    ("sum", np.sum, SUM_DTYPE.get),
    ("prod", np.prod, SUM_DTYPE.get),
    ("max", np.max, lambda d: d),
    ("min", np.min, lambda d: d),
    ("all", np.all, lambda d: np.bool_),
    ("any", np.any, lambda d: np.bool_),
    ("mean", np.mean, MEAN_DTYPE.get),
    ("var", np.var, MEAN_DTYPE.get),
    ("std", np.std, MEAN_DTYPE.get),
]


@pytest.mark.parametrize("name,ref,rule", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reduction_values_and_dtypes(name, ref, rule, dtype):
    if name in ("var", "std") and dtype == np.bool_:
        x = make((3, 4), dtype)
        want = ref(x.astype(np.float32), axis=0)
    else:
        x = make((3, 4), dtype)
        want = ref(f32(x), axis=0)
    check(getattr(jnp, name)(x, axis=0), want, dtype=rule(dtype))


AXES = [None, 1, -1, (0, 2), (2, -3), ()]


@pytest.mark.parametrize("name", ["sum", "max", "mean", "any"])
@pytest.mark.parametrize("axis", AXES, ids=str)
def test_axis_forms_and_keepdims(name, axis):
    x = make((2, 3, 4), np.float32, seed=1)
    ref = getattr(np, name)
    check(getattr(jnp, name)(x, axis=axis), ref(x, axis=axis))
    check(getattr(jnp, name)(x, axis=axis, keepdims=True), ref(x, axis=axis, keepdims=True))


def test_zero_dim_and_empty():
    check(jnp.sum(np.float32(2.5)), 2.5, dtype=np.float32, shape=())
    check(jnp.max(np.int32(3), axis=()), 3, dtype=np.int32, shape=())
    check(jnp.mean(np.float32(2.0), keepdims=True), 2.0, shape=())
    e = np.zeros((0, 3), np.float32)
    check(jnp.sum(e, axis=0), np.zeros(3))
    check(jnp.prod(e), 1.0, shape=())
    check(jnp.any(e, axis=1), np.zeros(0, bool))
    check(jnp.all(e), True)
    check(jnp.max(e, axis=1), np.zeros(0))  # no reduced element is missing: fine
    check(jnp.max(e, axis=0, initial=-1.0), np.full(3, -1.0))
    with np.errstate(invalid="ignore"):
        check(jnp.mean(e, axis=0), np.full(3, np.nan))
        check(jnp.var(e), np.nan)
    check(jnp.sum(np.zeros((2, 0), np.int8), axis=1, keepdims=True), np.zeros((2, 1)),
          dtype=np.int32)


def test_python_scalars_are_not_weak():
    for fn, arg, dt in [(jnp.sum, 2.0, np.float32), (jnp.sum, 2, np.int32),
                        (jnp.sum, True, np.int32), (jnp.mean, 2, np.float32),
                        (jnp.max, 3, np.int32), (jnp.var, 2.0, np.float32),
                        (jnp.cumsum, 2.0, np.float32), (jnp.median, 2.0, np.float32)]:
        r = fn(arg)
        assert r.dtype == dt and not plax.typeof(r).weak_type, (fn.__name__, arg)


def test_where_and_initial():
    x = make((3, 4), np.float32, seed=2)
    m = make((3, 4), np.bool_, seed=3)
    check(jnp.sum(x, where=m), np.sum(x, where=m))
    check(jnp.sum(x, axis=0, where=m[0]), np.sum(x, axis=0, where=m[0]))  # mask broadcasts
    check(jnp.prod(x, axis=1, where=m, keepdims=True), np.prod(x, axis=1, where=m, keepdims=True))
    check(jnp.max(x, axis=0, where=m, initial=-5.0), np.max(x, axis=0, where=m, initial=-5.0))
    check(jnp.min(x, axis=1, where=m, initial=5.0), np.min(x, axis=1, where=m, initial=5.0))
    check(jnp.all(x > 0, axis=0, where=m), np.all(x > 0, axis=0, where=m))
    check(jnp.any(x > 0, axis=1, where=m), np.any(x > 0, axis=1, where=m))
    with np.errstate(invalid="ignore", divide="ignore"):
        check(jnp.mean(x, axis=0, where=m), np.mean(x, axis=0, where=m))
        check(jnp.var(x, axis=1, where=m), np.var(x, axis=1, where=m))
    check(jnp.sum(x, axis=1, initial=10.0), np.sum(x, axis=1, initial=10.0))
    check(jnp.max(make((3, 4), np.int8), initial=7), 7, dtype=np.int8)
    check(jnp.max(make((3, 4), np.int8), axis=1, initial=3.7), np.maximum(
        np.max(make((3, 4), np.int8), axis=1), 3), dtype=np.int8)  # initial takes a's dtype


def test_dtype_argument():
    x = np.array([[1.5, 2.5], [3.5, -1.25]], np.float32)
    check(jnp.sum(x, dtype=np.int32), 1 + 2 + 3 - 1, dtype=np.int32)  # cast first, like JAX
    i8 = make((3, 4), np.int8)
    check(jnp.sum(i8, dtype=np.int8), np.sum(i8, dtype=np.int8), dtype=np.int8)
    check(jnp.sum(i8, promote_integers=False), np.sum(i8, dtype=np.int8), dtype=np.int8)
    check(jnp.sum(make((3,), np.uint8), promote_integers=False), np.sum(make((3,), np.uint8)),
          dtype=np.uint8)
    b = np.array([True, False, True])
    check(jnp.sum(b, dtype=bool), True, dtype=np.bool_)
    check(jnp.prod(b, dtype=bool), False, dtype=np.bool_)
    check(jnp.mean(np.array([1, 2, 4]), dtype=np.int32), 2, dtype=np.int32)
    check(jnp.mean(i8, axis=0, dtype=BF16), np.mean(i8, axis=0), dtype=BF16)
    check(jnp.var(np.array([1, 2, 4]), dtype=np.int32), np.var([1, 2, 4]), dtype=np.float32)
    check(jnp.cumsum(i8, axis=1, dtype=np.int32), np.cumsum(i8, axis=1), dtype=np.int32)
    check(jnp.cumsum(b, dtype=bool), [True, True, True], dtype=np.bool_)


def test_half_precision_accumulates_in_float32():
    x = np.full(4096, 1.0, np.float16)
    check(jnp.sum(x), 4096.0, dtype=np.float16)  # a float16 accumulator would stop at 2048
    check(jnp.mean(np.array([60000, 60000], np.float16)), 60000.0, dtype=np.float16)


def test_var_std_options():
    x = make((4, 5), np.float32, seed=4)
    check(jnp.var(x, axis=0, ddof=1), np.var(x, axis=0, ddof=1))
    check(jnp.std(x, axis=1, correction=1.5, keepdims=True),
          np.std(x, axis=1, ddof=1.5, keepdims=True))
    check(jnp.var(x, ddof=20), np.nan)  # nothing left to divide by
    m = np.mean(x, axis=1, keepdims=True)
    check(jnp.var(x, axis=1, mean=m), np.var(x, axis=1))
    c = make((3, 4), np.complex64, seed=5)
    check(jnp.var(c, axis=0), np.var(c, axis=0), dtype=np.float32)
    check(jnp.std(make((3, 4), np.int8), axis=1, ddof=1),
          np.std(make((3, 4), np.int8), axis=1, ddof=1), dtype=np.float32)


def test_argmax_argmin():
    x = make((3, 4), np.float32, seed=6)
    for axis in (None, 0, 1, -1):
        check(jnp.argmax(x, axis=axis), np.argmax(x, axis=axis), dtype=np.int32)
        check(jnp.argmin(x, axis=axis, keepdims=True), np.argmin(x, axis=axis, keepdims=True))
    ties = np.array([[1, 3, 3], [2, 2, 0]], np.int8)
    check(jnp.argmax(ties, axis=1), [1, 0])
    check(jnp.argmin(np.array([True, False, False])), 1)
    with_nan = np.array([1.0, np.nan, 5.0, np.nan], np.float32)
    check(jnp.argmax(with_nan), 1)  # the first NaN, as NumPy
    check(jnp.argmin(with_nan), 1)
    check(jnp.argmax(np.float32(3.0)), 0, shape=())
    check(jnp.argmax(make((2, 3), BF16), axis=1), np.argmax(f32(make((2, 3), BF16)), axis=1))


def test_cumulative():
    x = make((3, 4), np.float32, seed=7)
    i8 = make((3, 4), np.int8)
    check(jnp.cumsum(x), np.cumsum(x))
    check(jnp.cumsum(x, axis=0), np.cumsum(x, axis=0))
    check(jnp.cumprod(x, axis=-1), np.cumprod(x, axis=-1))
    check(jnp.cumsum(i8, axis=1), np.cumsum(i8, axis=1).astype(np.int8), dtype=np.int8)
    check(jnp.cumsum(np.array([True, False, True])), [1, 1, 2], dtype=np.int32)
    check(jnp.cumprod(np.array([True, True, False])), [1, 1, 0], dtype=np.int32)
    check(jnp.cumsum(np.float32(2.0)), [2.0])
    check(jnp.cumsum(np.zeros((0, 2), np.float32), axis=0), np.zeros((0, 2)))
    check(jnp.cumulative_sum(x, axis=1, include_initial=True),
          np.cumulative_sum(x, axis=1, include_initial=True))
    check(jnp.cumulative_sum(i8, axis=0), np.cumsum(i8, axis=0), dtype=np.int32)
    check(jnp.cumulative_prod(x[0]), np.cumprod(x[0]))
    n = np.array([[1.0, np.nan, 2.0], [np.nan, 3.0, 4.0]], np.float32)
    check(jnp.nancumsum(n, axis=1), np.nancumsum(n, axis=1))
    check(jnp.nancumprod(n), np.nancumprod(n))


def test_ptp_count_nonzero_average():
    x = make((3, 4), np.float32, seed=8)
    i = make((3, 4), np.int32, seed=8)
    check(jnp.ptp(x, axis=0), np.ptp(x, axis=0))
    check(jnp.ptp(i, keepdims=True), np.ptp(i, keepdims=True), dtype=np.int32)
    check(jnp.count_nonzero(i), np.count_nonzero(i), dtype=np.int32)
    check(jnp.count_nonzero(i, axis=1, keepdims=True), np.count_nonzero(i, axis=1, keepdims=True))
    w = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    check(jnp.average(x, axis=1, weights=w), np.average(x, axis=1, weights=w))
    check(jnp.average(x, weights=np.abs(x)), np.average(x, weights=np.abs(x)))
    check(jnp.average(i, axis=0), np.average(i, axis=0), dtype=np.float32)
    avg, wsum = jnp.average(x, axis=1, weights=w, returned=True)
    ravg, rwsum = np.average(x, axis=1, weights=w, returned=True)
    check(avg, ravg)
    check(wsum, rwsum)
    avg, wsum = jnp.average(i, axis=1, returned=True, keepdims=True)
    check(wsum, np.full((3, 1), 4.0), dtype=np.float32)
    w3 = make((4, 3), np.float32, seed=9) ** 2
    x3 = make((2, 3, 4), np.float32, seed=9)
    check(jnp.average(x3, axis=(2, 1), weights=w3), np.average(x3, axis=(2, 1), weights=w3))


NAN = np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, np.nan, np.nan, np.nan],
                [2.0, 5.0, np.nan, 0.5]], np.float32)


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar",
                                  "nanstd", "nanmedian"])
def test_nan_reductions(name):
    ref = getattr(np, name)
    with np.errstate(invalid="ignore", divide="ignore"), \
            pytest.warns(RuntimeWarning) if name not in ("nansum", "nanprod") else _null():
        want = ref(NAN, axis=1)
    check(getattr(jnp, name)(NAN, axis=1), want, dtype=np.float32)
    if name in ("nansum", "nanmax", "nanmean"):
        check(getattr(jnp, name)(NAN, axis=0, keepdims=True), ref(NAN, axis=0, keepdims=True))


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_nan_functions_on_non_floats_and_extras():
    i = make((3, 4), np.int32)
    check(jnp.nansum(i, axis=0), np.sum(i, axis=0), dtype=np.int32)
    check(jnp.nanmax(i), np.max(i), dtype=np.int32)
    check(jnp.nanmean(i, axis=1), np.mean(i, axis=1), dtype=np.float32)
    check(jnp.nanvar(NAN, axis=1, ddof=1), [np.nanvar(NAN[0], ddof=1), np.nan,
                                            np.nanvar(NAN[2], ddof=1)])
    check(jnp.nanmax(NAN, axis=1, initial=0.0), [3.0, 0.0, 5.0])
    check(jnp.nanargmax(NAN, axis=1), [2, -1, 1])  # -1 for an all-NaN slice, as JAX
    check(jnp.nanargmin(NAN, axis=1), [3, -1, 3])
    check(jnp.nanargmax(np.array([1.0, np.nan, 3.0], np.float32)), 2)
    check(jnp.nanargmin(i, axis=0), np.argmin(i, axis=0))
    check(jnp.max(NAN, axis=1), np.max(NAN, axis=1))  # plain max propagates NaN


METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf"]


@pytest.mark.parametrize("method", METHODS)
def test_quantile_methods(method):
    x = make((3, 8), np.float32, seed=10)
    q = np.array([0.0, 0.1, 0.25, 0.5, 0.73, 1.0])
    want = np.quantile(x, q, axis=1, method=method)
    check(jnp.quantile(x, q, axis=1, method=method), want)
    if method in ("linear", "nearest", "inverted_cdf"):
        # q known only on the device takes the index-arithmetic path
        check(jnp.quantile(x, jnp.asarray(q.astype(np.float32)), axis=1, method=method), want)


def test_quantile_shapes_and_variants():
    x = make((3, 4, 5), np.float32, seed=11)
    check(jnp.median(x), np.median(x))
    check(jnp.median(x, axis=(0, 2), keepdims=True), np.median(x, axis=(0, 2), keepdims=True))
    check(jnp.percentile(x, np.array([10.0, 90.0]), axis=1, keepdims=True),
          np.percentile(x, [10.0, 90.0], axis=1, keepdims=True))
    i = make((4, 6), np.int32)
    check(jnp.median(i, axis=1), np.median(i, axis=1), dtype=np.float32)
    check(jnp.quantile(make((5,), BF16), 0.5), np.quantile(f32(make((5,), BF16)), 0.5), dtype=BF16)
    with_nan = NAN.copy()
    check(jnp.median(with_nan, axis=1), np.median(with_nan, axis=1))  # NaN propagates
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanpercentile(NAN, [20.0, 50.0], axis=1)
    check(jnp.nanpercentile(NAN, np.array([20.0, 50.0]), axis=1), want)
    check(jnp.quantile(np.array([1.0, np.inf, np.inf], np.float32), 0.9), np.inf)
    check(jnp.median(np.zeros((0,), np.float32)), np.nan)


def test_weighted_quantile():
    x = make((2, 6), np.float32, seed=12)
    w = np.abs(make((2, 6), np.float32, seed=13)) + 0.1
    q = np.array([0.1, 0.5, 0.95])
    want = np.quantile(x, q, axis=1, weights=w, method="inverted_cdf")
    check(jnp.quantile(x, q, axis=1, weights=w, method="inverted_cdf"), want)
    check(jnp.percentile(x.T, 20, axis=0, weights=w[1], method="inverted_cdf"),
          np.percentile(x.T, 20, axis=0, weights=w[1], method="inverted_cdf"))


def test_methods_on_arrays_and_tracers():
    x = jnp.asarray(make((3, 4), np.float32, seed=14))
    xn = np.asarray(x)
    check(x.sum(axis=0), xn.sum(axis=0))
    check(x.prod(), xn.prod())
    check(x.mean(axis=1, keepdims=True), xn.mean(axis=1, keepdims=True))
    check(x.var(ddof=1), xn.var(ddof=1))
    check(x.std(axis=0), xn.std(axis=0))
    check(x.max(axis=1), xn.max(axis=1))
    check(x.min(), xn.min())
    check(x.argmax(axis=0), xn.argmax(axis=0))
    check(x.argmin(), xn.argmin())
    check(x.all(), xn.all())
    check(x.any(axis=0), xn.any(axis=0))
    check(x.cumsum(axis=1), xn.cumsum(axis=1))
    check(x.cumprod(), xn.cumprod())
    check(x.ptp(axis=1), np.ptp(xn, axis=1))
    jaxpr = plax.make_jaxpr(lambda v: v.sum(axis=0))(x)
    assert "reduce_sum[axes=(0,)" in str(jaxpr)


def test_jaxprs():
    x = np.ones((2, 3), np.float32)
    text = str(plax.make_jaxpr(lambda v: jnp.sum(v, axis=0))(np.ones((2, 3), np.int8)))
    assert "convert_element_type[new_dtype=int32" in text and "reduce_sum[axes=(0,)" in text
    text = str(plax.make_jaxpr(lambda v: jnp.mean(v, axis=1))(x))
    assert "reduce_sum[axes=(1,)" in text and "div" in text
    text = str(plax.make_jaxpr(lambda v: jnp.argmax(v))(x))
    assert "reshape" in text and "argmax[axes=(0,) index_dtype=int32]" in text
    text = str(plax.make_jaxpr(lambda v: jnp.all(v, axis=1))(x))
    assert "reduce_and[axes=(1,)]" in text and "bool[2]" in text
    text = str(plax.make_jaxpr(lambda v: jnp.max(v, axis=0, keepdims=True))(x))
    assert "reduce_max[axes=(0,)]" in text and "f32[1,3]" in text
    text = str(plax.make_jaxpr(lambda v: jnp.median(v, axis=1))(x))
    assert "sort" in text
    text = str(plax.make_jaxpr(lambda v: jnp.cumsum(v, axis=1))(x))
    assert "cumsum[axis=1 reverse=False]" in text
    # traced values flow through every path, including a traced q
    f = lambda v, q: jnp.quantile(v, q, axis=0)  # noqa: E731
    assert "f32[2,3]" in str(plax.make_jaxpr(f)(x, np.array([0.1, 0.9], np.float32)))


TRACED = {
    "sum": lambda a, m: jnp.sum(a, axis=0, where=m),
    "prod": lambda a, m: jnp.prod(a, initial=2.0, keepdims=True),
    "max": lambda a, m: jnp.max(a, axis=1, where=m, initial=0.0),
    "mean": lambda a, m: jnp.mean(a, where=m),
    "var": lambda a, m: jnp.var(a, axis=0, where=m, ddof=1),
    "std": lambda a, m: jnp.std(a, keepdims=True),
    "argmax": lambda a, m: jnp.argmax(a, keepdims=True),
    "nanargmin": lambda a, m: jnp.nanargmin(a, axis=1),
    "cumsum": lambda a, m: jnp.cumsum(m),
    "cumulative_prod": lambda a, m: jnp.cumulative_prod(a, axis=1, include_initial=True),
    "ptp": lambda a, m: jnp.ptp(a),
    "count_nonzero": lambda a, m: jnp.count_nonzero(a, axis=0),
    "average": lambda a, m: jnp.average(a, axis=0, weights=a, returned=True),
    "nanmean": lambda a, m: jnp.nanmean(a, axis=0, where=m),
    "nanvar": lambda a, m: jnp.nanvar(a, axis=0, where=m),
    "nanmax": lambda a, m: jnp.nanmax(a, axis=0),
    "nanmedian": lambda a, m: jnp.nanmedian(a, axis=0),
    "weighted": lambda a, m: jnp.quantile(a, 0.3, axis=1, weights=a, method="inverted_cdf"),
}


@pytest.mark.parametrize("name", list(TRACED))
def test_traces_with_tracer_inputs(name):
    jaxpr = plax.make_jaxpr(TRACED[name])(np.ones((3, 4), np.float32), np.ones((3, 4), bool))
    assert "{ lambda" in str(jaxpr)


def test_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="'out' argument must be None.*immutable"):
        jnp.sum(x, out=np.zeros(()))
    with pytest.raises(ValueError, match="'out' argument must be None"):
        jnp.quantile(x, 0.5, out=x)
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        jnp.sum(x, axis=2)
    with pytest.raises(ValueError, match="axis -3 is out of bounds"):
        jnp.mean(x, axis=(0, -3))
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        jnp.sum(x, axis=(0, -2))
    with pytest.raises(TypeError, match="axis must be None, an integer or a tuple"):
        jnp.sum(x, axis=1.0)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max which has "
                                         "no identity"):
        jnp.max(np.zeros((0, 3), np.float32), axis=0)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        jnp.ptp(np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError, match="to use a where mask one has to specify 'initial'"):
        jnp.max(x, where=x > 0)
    with pytest.raises(ValueError, match="initial value must be a scalar"):
        jnp.sum(x, axis=0, initial=np.ones(3))
    with pytest.raises(ValueError, match="where= mask of shape \\(2,\\) does not broadcast"):
        jnp.sum(x, where=np.array([True, False]))
    with pytest.raises(ValueError, match="ddof and correction can't be provided simultaneously"):
        jnp.var(x, ddof=1, correction=1)
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        jnp.argmax(np.zeros((0,), np.float32))
    with pytest.raises(TypeError, match="ptp does not accept dtype bool"):
        jnp.ptp(np.ones(3, bool))
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.sum([1, 2])
    with pytest.raises(ValueError, match="method can only be"):
        jnp.quantile(x, 0.5, method="bogus")
    with pytest.raises(ValueError, match="q must be have rank <= 1"):
        jnp.quantile(x, np.ones((2, 2)) / 2)
    with pytest.raises(ValueError, match="Quantiles must be in the range"):
        jnp.quantile(x, 1.5)
    with pytest.raises(ValueError, match="Percentiles must be in the range"):
        jnp.percentile(x, -1)
    with pytest.raises(ValueError, match="only method='inverted_cdf' supports weights"):
        jnp.quantile(x, 0.5, axis=1, weights=np.ones(3))
    with pytest.raises(ValueError, match="does not support complex input"):
        jnp.median(np.ones(3, np.complex64))
    with pytest.raises(ValueError, match="Axis must be specified when shapes of a and weights"):
        jnp.average(x, weights=np.ones(3))
    with pytest.raises(ValueError, match="Shape of weights must be consistent"):
        jnp.average(x, axis=1, weights=np.ones(2))
    with pytest.raises(ValueError, match="axis was not set to an explicit value"):
        jnp.cumulative_sum(x)
    with pytest.raises(ValueError, match="must be non-scalar to take a cumulative sum"):
        jnp.cumulative_sum(np.float32(1))
    with pytest.raises(TypeError, match="dtype=bool is not supported"):
        jnp.mean(x, dtype=bool)
