"""plax.numpy statistics (cov, corrcoef, bincount, digitize, histograms) against NumPy
(values) and JAX 0.10 (result dtypes, hard-coded here)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.errors import ConcretizationTypeError
from plax.test_util import check_grads
from helpers import close, rand as _rand

F16, F32, I32, I8, U8, C64 = (np.dtype(t) for t in (np.float16, np.float32, np.int32, np.int8,
                                                    np.uint8, np.complex64))


def rand(shape, dtype=F32, seed=0):
    return _rand(shape, dtype, seed, ints=(0, 6))  # non-negative counts and weights


# --- cov, corrcoef ---------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's reference for 1 observation
@pytest.mark.parametrize("shape", [(5,), (2, 6), (4, 3), (1, 4)])
@pytest.mark.parametrize("rowvar", [True, False])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_cov_matches_numpy(shape, rowvar, dtype):
    x = rand(shape, dtype)
    close(jnp.cov(x, rowvar=rowvar), np.cov(x.astype(np.float64), rowvar=rowvar), F32)


@pytest.mark.parametrize("kw", [dict(bias=True), dict(ddof=0), dict(ddof=2),
                                dict(bias=True, ddof=1)])
def test_cov_bias_ddof(kw):
    x = rand((3, 7))
    close(jnp.cov(x, **kw), np.cov(x.astype(np.float64), **kw), F32)


@pytest.mark.parametrize("ddof", [None, 0, 2])
@pytest.mark.parametrize("which", ["f", "a", "fa"])
def test_cov_weights(ddof, which):
    x = rand((3, 6))
    fw = np.array([1, 2, 1, 3, 1, 2]) if "f" in which else None
    aw = np.array([0.5, 1.0, 2.0, 0.1, 1.5, 1.0]) if "a" in which else None
    want = np.cov(x.astype(np.float64), ddof=ddof, fweights=fw, aweights=aw)
    close(jnp.cov(x, ddof=ddof, fweights=fw, aweights=aw), want, F32, rtol=1e-4)


def test_cov_with_y_and_dtypes():
    x, y = rand((2, 5)), rand((3, 5), seed=1)
    close(jnp.cov(x, y), np.cov(x.astype(np.float64), y.astype(np.float64)), F32)
    close(jnp.cov(x.T, y.T, rowvar=False), np.cov(x.T.astype(np.float64), y.T, rowvar=False), F32)
    assert jnp.cov(rand((2, 3), I8)).dtype == F32
    assert jnp.cov(rand((2, 3), F16)).dtype == F16
    assert jnp.cov(rand((2, 3), F16), dtype=np.float32).dtype == F32
    assert jnp.cov(rand((2, 3)), aweights=np.ones(3, F16)).dtype == F32
    c = rand((2, 4), C64)
    close(jnp.cov(c), np.cov(c.astype(np.complex128)), C64, rtol=1e-4, atol=1e-4)
    fw, aw = np.array([1, 2, 1, 3]), np.array([0.5, 1.0, 2.0, 0.1])
    close(jnp.cov(c, fweights=fw, aweights=aw, ddof=1),
          np.cov(c.astype(np.complex128), fweights=fw, aweights=aw, ddof=1), C64, rtol=1e-4,
          atol=1e-4)
    out = jnp.cov(np.arange(6.0))
    assert out.shape == () and out.dtype == F32


def test_cov_jit_and_grad():
    x = rand((3, 5))
    f = plax.jit(lambda m, w: jnp.cov(m, aweights=w))
    w = np.linspace(0.5, 2.0, 5).astype(np.float32)
    close(f(x, w), np.cov(x.astype(np.float64), aweights=w), F32, rtol=1e-4)
    check_grads(lambda m: jnp.cov(m), (x.astype(np.float32),), order=1, atol=2e-2, rtol=2e-2)


def test_cov_errors():
    with pytest.raises(ValueError, match="more than 2 dimensions"):
        jnp.cov(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="fweights must be integer"):
        jnp.cov(np.ones(3), fweights=np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="incompatible numbers of samples"):
        jnp.cov(np.ones(3), fweights=np.array([1, 2]))
    with pytest.raises(ValueError, match="incompatible numbers of samples"):
        jnp.cov(np.ones(3), aweights=np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="ddof must be an integer"):
        jnp.cov(np.ones(3), ddof=1.5)
    with pytest.raises(ValueError, match="same number of observations"):
        jnp.cov(np.ones((2, 3)), np.ones((2, 2)))
    with pytest.raises(TypeError, match="cov requires ndarray or scalar"):
        jnp.cov([1.0, 2.0])


@pytest.mark.parametrize("shape", [(2, 6), (4, 5), (3, 3)])
@pytest.mark.parametrize("rowvar", [True, False])
def test_corrcoef_matches_numpy(shape, rowvar):
    x = rand(shape)
    close(jnp.corrcoef(x, rowvar=rowvar), np.corrcoef(x.astype(np.float64), rowvar=rowvar), F32,
          rtol=1e-4, atol=1e-5)


def test_corrcoef_cases():
    x, y = rand((2, 5)), rand((1, 5), seed=2)
    close(jnp.corrcoef(x, y), np.corrcoef(x.astype(np.float64), y), F32, rtol=1e-4)
    one = jnp.corrcoef(np.arange(4.0))
    assert one.shape == () and one.dtype == F32 and float(one) == 1.0
    c = rand((2, 4), C64)
    close(jnp.corrcoef(c), np.corrcoef(c.astype(np.complex128)), C64, rtol=1e-4, atol=1e-5)
    assert jnp.corrcoef(rand((2, 4), F16)).dtype == F16
    assert jnp.corrcoef(np.array([[1, 0, 1], [0, 1, 1]], bool)).dtype == F32
    out = np.asarray(jnp.corrcoef(np.array([[1.0, 2, 3], [1, 1, 1]])))
    assert out[0, 0] == 1.0 and np.isnan(out[1, 1])
    assert np.all(np.abs(np.asarray(jnp.corrcoef(rand((5, 8))))) <= 1.0)


def test_corrcoef_jit_and_grad():
    x = rand((3, 6))
    close(plax.jit(jnp.corrcoef)(x), np.corrcoef(x.astype(np.float64)), F32, rtol=1e-4)
    check_grads(lambda m: jnp.corrcoef(m)[0, 1], (x,), order=1, atol=2e-2, rtol=2e-2)


# --- bincount ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n,minlength", [(0, 0), (0, 3), (1, 0), (7, 3), (30, 0), (30, 12)])
def test_bincount_matches_numpy(n, minlength):
    x = np.random.default_rng(n).integers(0, 9, n).astype(np.int32)
    out = jnp.bincount(x, minlength=minlength)
    want = np.bincount(x, minlength=minlength)
    assert out.dtype == I32
    np.testing.assert_array_equal(np.asarray(out), want)
    w = rand(n)
    close(jnp.bincount(x, weights=w, minlength=minlength),
          np.bincount(x, weights=w.astype(np.float64), minlength=minlength), F32)


def test_bincount_length_negative_and_dtypes():
    x = np.array([-1, 0, 2, 5])
    np.testing.assert_array_equal(np.asarray(jnp.bincount(x, minlength=3)), [2, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(np.asarray(jnp.bincount(x, length=3)), [2, 0, 1])
    np.testing.assert_array_equal(np.asarray(jnp.bincount(np.array([True, False, True]))), [1, 2])
    assert jnp.bincount(np.array([1, 2], np.int8)).dtype == I32
    assert jnp.bincount(np.array([1, 2], U8)).dtype == I32
    assert jnp.bincount(np.array([1, 2]), weights=np.array([1, 2], U8)).dtype == U8
    assert jnp.bincount(np.array([1, 2]), weights=np.array([1, 2], I8)).dtype == I8
    assert jnp.bincount(np.array([1, 2]), weights=np.array([1, 2], F16)).dtype == F16
    assert jnp.bincount(np.array([1, 2]), weights=np.array([1, 2], C64)).dtype == C64


def test_bincount_jit_and_grad():
    x = np.array([0, 3, 3, 1, 7])
    f = plax.jit(lambda x, w: jnp.bincount(x, w, length=5))
    w = rand(5)
    want = np.bincount(x, weights=w.astype(np.float64))[:5]
    close(f(x, w), want, F32)
    with pytest.raises(ConcretizationTypeError, match="static length"):
        plax.jit(jnp.bincount)(x)
    check_grads(lambda w: jnp.bincount(x, w, length=6), (w,), order=2)


def test_bincount_errors():
    with pytest.raises(TypeError, match="must have an integer type"):
        jnp.bincount(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="x must be 1-dimensional"):
        jnp.bincount(np.ones((2, 2), int))
    with pytest.raises(ValueError, match="minlength must be non-negative"):
        jnp.bincount(np.array([1, 2]), minlength=-1)
    with pytest.raises(ValueError, match="length must be non-negative"):
        jnp.bincount(np.array([1, 2]), length=-1)
    with pytest.raises(ValueError, match="weights must have the same shape"):
        jnp.bincount(np.array([1, 2]), weights=np.ones(3))
    with pytest.raises(TypeError, match="weights must be numeric"):
        jnp.bincount(np.array([1, 2]), weights=np.array([True, False]))


# --- digitize -----------------------------------------------------------------------------------
@pytest.mark.parametrize("xshape", [(), (3, 4)])
@pytest.mark.parametrize("decreasing", [False, True])
@pytest.mark.parametrize("right,method", [(False, None), (True, None), (False, "compare_all"),
                                          (True, "scan_unrolled"), (True, "sort")])
def test_digitize_matches_numpy(xshape, decreasing, right, method):
    x = (np.random.default_rng(1).integers(-3, 8, xshape) / 2).astype(np.float32)
    bins = np.array([-1.0, 0.0, 0.5, 2.0, 3.0], np.float32)
    if decreasing:
        bins = bins[::-1].copy()
    out = jnp.digitize(x, bins, right=right, method=method)
    assert out.dtype == I32
    np.testing.assert_array_equal(np.asarray(out), np.digitize(x, bins, right=right))


def test_digitize_int_jit_and_empty():
    x = np.array([0, 1, 2, 5], np.int8)
    out = plax.jit(jnp.digitize)(x, np.array([1.5, 2.0]))
    assert out.dtype == I32
    np.testing.assert_array_equal(np.asarray(out), np.digitize(x, [1.5, 2.0]))
    np.testing.assert_array_equal(np.asarray(jnp.digitize(x, np.zeros(0))), [0, 0, 0, 0])


def test_digitize_errors():
    with pytest.raises(ValueError, match="bins must be a 1-dimensional array"):
        jnp.digitize(np.ones(2), np.ones((2, 2)))
    with pytest.raises(ValueError, match="invalid argument method='foo'"):
        jnp.digitize(np.ones(2), np.ones(2), method="foo")
    with pytest.raises(TypeError, match="digitize requires ndarray or scalar"):
        jnp.digitize([1.0], np.ones(2))


# --- histograms ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,bins", [((1,), 4), ((20,), 1), ((20,), 10), ((4, 5), 4)])
@pytest.mark.parametrize("density", [False, True])
def test_histogram_int_bins(shape, bins, density):
    a = rand(shape, seed=3)
    counts, edges = jnp.histogram(a, bins, density=density)
    want_c, want_e = np.histogram(a, bins, density=density)
    close(edges, want_e, F32, rtol=1e-5, atol=1e-5)
    close(counts, want_c, F32, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("density", [False, True])
def test_histogram_edges_range_weights(density):
    a = np.array([0, 1, 5, 9, 10, 11, 3, 3], np.int32)
    w = rand(8, seed=4)
    for kw in [dict(bins=np.array([1, 5, 10])), dict(bins=3, range=(1, 10)),
               dict(bins=np.array([0.0, 2.5, 3.0, 20.0]), weights=w),
               dict(bins=5, range=(0.0, 8.0), weights=w)]:
        counts, edges = jnp.histogram(a, density=density, **kw)
        want_c, want_e = np.histogram(a, density=density, **kw)
        close(edges, want_e, F32, rtol=1e-5)
        close(counts, want_c, F32, rtol=1e-4, atol=1e-5)


def test_histogram_constant_and_dtypes():
    counts, edges = jnp.histogram(np.ones((2, 3)), bins=2)
    want_c, want_e = np.histogram(np.ones((2, 3)), bins=2)
    close(edges, want_e, F32)
    close(counts, want_c, F32)
    a = np.array([1, 2, 3, 2, 2], F16)
    assert jnp.histogram(a, 3)[0].dtype == F16 and jnp.histogram(a, 3)[1].dtype == F16
    assert jnp.histogram(a, 3, weights=np.ones(5, I32))[0].dtype == F16
    assert jnp.histogram(a, 3, density=True)[0].dtype == F16
    assert jnp.histogram(np.arange(5), 3, weights=np.ones(5, F16))[0].dtype == F16
    assert jnp.histogram(np.arange(5), np.array([0, 2, 4]))[1].dtype == F32
    assert jnp.histogram(a, np.array([0.0, 2, 4]))[1].dtype == F16
    assert jnp.histogram(np.arange(3.0), 2, weights=np.ones(3, I8))[0].dtype == F32
    close(jnp.histogram_bin_edges(np.array([1.0, 2, 3]), 2, range=(0, 10)), [0, 5, 10], F32)
    close(jnp.histogram_bin_edges(rand(9), 4), np.histogram_bin_edges(rand(9), 4), F32)
    f = plax.jit(lambda a, lo, hi: jnp.histogram_bin_edges(a, 4, range=(lo, hi)))
    close(f(rand(9), -1.0, 3.0), np.histogram_bin_edges(rand(9), 4, range=(-1, 3)), F32)
    assert jnp.histogram_bin_edges(np.array([1.0, 2, 3]), np.array([1, 2])).dtype == F32


def test_histogram_jit_and_grad():
    a, w = rand(12, seed=5), rand(12, seed=6)
    f = plax.jit(lambda a, w: jnp.histogram(a, 4, weights=w, density=True))
    counts, edges = f(a, w)
    want_c, want_e = np.histogram(a, 4, weights=w, density=True)
    close(edges, want_e, F32)
    close(counts, want_c, F32, rtol=1e-4, atol=1e-4)
    check_grads(lambda w: jnp.histogram(a, 4, weights=w)[0], (w,), order=2)


def test_histogram_errors():
    with pytest.raises(ValueError, match="max must be larger than min"):
        jnp.histogram(np.ones(3), bins=2, range=(3, 1))
    with pytest.raises(ValueError, match="bins must be a positive integer"):
        jnp.histogram(np.ones(3), bins=-2)
    with pytest.raises(ValueError, match="bins must be an integer or a 1-D array"):
        jnp.histogram(np.ones(3), bins=np.ones((2, 2)))
    with pytest.raises(ValueError, match="weights should have the same shape"):
        jnp.histogram(np.ones(3), bins=2, weights=np.ones(4))
    with pytest.raises(ValueError, match="range must be None or a sequence of two scalars"):
        jnp.histogram(np.ones(3), bins=2, range=(1, 2, 3))
    with pytest.raises(TypeError, match="histogram requires ndarray or scalar"):
        jnp.histogram([1.0, 2.0])


@pytest.mark.parametrize("n,d", [(2, 1), (10, 2), (25, 3)])
@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogramdd_matches_numpy(n, d, density, weighted):
    s = rand((n, d), seed=7)
    w = rand(n, seed=8) ** 2 if weighted else None
    bins = [2, 3, 4][:d]
    counts, edges = jnp.histogramdd(s, bins, weights=w, density=density)
    want_c, want_e = np.histogramdd(s.astype(np.float64), bins, weights=w, density=density)
    assert len(edges) == d
    for e, we in zip(edges, want_e):
        close(e, we, F32, rtol=1e-5)
    close(counts, want_c, I32 if not (density or weighted) else F32, rtol=1e-4, atol=1e-4)


def test_histogramdd_range_and_dtypes():
    s = np.array([[1.0, 2], [2, 3], [3, 5]], np.float32)
    counts, edges = jnp.histogramdd(s, bins=2, density=True, range=[(0, 4), None])
    want_c, want_e = np.histogramdd(s, bins=2, density=True, range=[(0, 4), None])
    close(counts, want_c, F32)
    close(edges[0], want_e[0], F32)
    assert jnp.histogramdd(np.ones((3, 2), I32), 2)[1][0].dtype == F32
    w = np.array([1.0, 2.0, 0.5], np.float32)
    jc, je = plax.jit(lambda s, w: jnp.histogramdd(s, [2, 3], weights=w))(s, w)
    wc, we = np.histogramdd(s, [2, 3], weights=w)
    close(jc, wc, F32)
    close(je[1], we[1], F32)
    # a single point sits on the middle edge as computed in float32: bin 0, as in JAX
    v = np.array([[0.1234567]], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.histogramdd(v, 2)[0]), [1, 0])
    assert jnp.histogramdd(np.ones((3, 2), I32), 2, weights=np.ones(3, F16))[0].dtype == F16
    assert jnp.histogramdd(np.ones((3, 2)), 2, weights=np.ones(3, I32))[0].dtype == F32
    with pytest.raises(ValueError, match="sequence of 2 bin"):
        jnp.histogramdd(s, bins=[2, 3, 4])
    with pytest.raises(ValueError, match="range must have one entry per dimension"):
        jnp.histogramdd(s, range=[(0, 1)])
    with pytest.raises(ValueError, match="sample must be 1- or 2-dimensional"):
        jnp.histogramdd(np.ones((2, 2, 2)))


@pytest.mark.parametrize("bins", [2, 5, [np.array([-3.0, 0.0, 3.0]), 3]])
def test_histogram2d(bins):
    x, y, w = rand(15, seed=9), rand(15, seed=10), rand(15, seed=11)
    for weights, dt in [(None, I32), (w, F32)]:
        c, ex, ey = jnp.histogram2d(x, y, bins, weights=weights)
        wc, wex, wey = np.histogram2d(x, y, bins, weights=weights)
        close(c, wc, dt, rtol=1e-4, atol=1e-5)
        close(ex, wex, F32)
        close(ey, wey, F32)
    f = plax.jit(lambda x, y: jnp.histogram2d(x, y, 3, density=True)[0])
    close(f(x, y), np.histogram2d(x, y, 3, density=True)[0], F32, rtol=1e-4)
    assert jnp.histogram2d(np.ones(3, F16), np.ones(3, F32), 2)[1].dtype == F32
    c, ex, _ = jnp.histogram2d(x, y, [-1.0, 0.0, 1.0])  # a list of edges for both axes
    close(c, np.histogram2d(x, y, [-1.0, 0.0, 1.0])[0], I32)
    with pytest.raises(ValueError, match="x and y must be 1-D arrays of the same length"):
        jnp.histogram2d(np.ones(3), np.ones(4))


def test_cov_with_weights_under_strict_rank_promotion():
    # JAX's own tests run with jax_numpy_rank_promotion='raise': cov keeps its ranks explicit
    x = np.arange(10, dtype=np.float32).reshape(2, 5) ** 1.5
    fw, aw = np.array([1, 2, 1, 3, 1]), np.float32([0.5, 1.0, 2.0, 1.0, 0.25])
    with plax.numpy_rank_promotion("raise"):
        got = jnp.cov(x, fweights=fw, aweights=aw)
    np.testing.assert_allclose(got, np.cov(x, fweights=fw, aweights=aw), rtol=1e-5)


def test_var_picks_jaxs_dtypes_without_promotion():
    # a given dtype is the computation's and the result's (so strict promotion allows it);
    # complex values need a complex dtype, as in JAX
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    with plax.numpy_dtype_promotion("strict"):
        got = jnp.var(x, dtype=np.float32)
        assert got.dtype == np.float32 and jnp.std(x, axis=0, ddof=1).dtype == np.float16
        c = jnp.var(x.astype(np.complex64), dtype=np.complex64)
    np.testing.assert_allclose(got, np.var(x.astype(np.float64)), rtol=1e-6)
    assert c.dtype == np.complex64 and float(c.real) == pytest.approx(float(got))
    with pytest.raises(ValueError, match="does not yet support real dtype parameters"):
        jnp.var(x.astype(np.complex64), dtype=np.float32)
