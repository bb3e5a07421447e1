"""plax.numpy sorting, searching and set functions against NumPy (values) and JAX 0.10
(dtypes, tie and NaN order, padding with size=, error phrases)."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy.sorting as S
from helpers import check_vmap, check_vmap_axes
from plax.core.errors import ConcretizationTypeError
from plax.runtime.array import Array
from plax.test_util import check_grads

BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F16, I32, U8, BOOL, C64 = (np.dtype(t) for t in (np.float32, np.float16, np.int32,
                                                      np.uint8, np.bool_, np.complex64))
SORT_DTYPES = [F32, BF16, F16, I32, U8, BOOL, C64]


def make(shape, dtype, seed=0, special=True):
    """Random values with many ties; floats also get NaN, -0.0 and 0.0 when ``special``."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -3, 4, shape).astype(dtype)
    x = rng.integers(-3, 4, shape).astype(np.float64) / 2
    if dtype.kind == "c":
        return (x + 1j * rng.integers(-1, 2, shape)).astype(dtype)
    if special and x.size >= 4:
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, 4, replace=False)] = [np.nan, -0.0, 0.0, np.nan]
    return x.astype(dtype)


def ref(x):
    """The NumPy reference input: bfloat16 and float16 compare as float32 (exactly)."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype in (BF16, F16) else x


def check(got, want, dtype=None):
    assert isinstance(got, Array), type(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_array_equal(ref(got), ref(want))


# --- sort / argsort -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
def test_sort_and_argsort_match_numpy(dtype):
    x = make((3, 7), dtype)
    for axis in (-1, 0, None):
        check(S.sort(x, axis=axis), np.sort(ref(x), axis=axis, kind="stable"), dtype)
        check(S.argsort(x, axis=axis), np.argsort(ref(x), axis=axis, kind="stable"), I32)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,)], ids=str)
def test_sort_edge_shapes(shape):
    x = make(shape, F32)
    if shape == ():
        with pytest.raises(ValueError, match="axis -1 is out of bounds for array of dimension 0"):
            S.sort(x)
        check(S.sort(x, axis=None), np.sort(x, axis=None), F32)
        return
    check(S.sort(x), np.sort(x), F32)
    check(S.argsort(x, axis=0), np.argsort(x, axis=0, kind="stable"), I32)


def test_nan_and_signed_zero_order():
    x = np.array([3., 1., np.nan, -0., 0., 1., -np.inf, np.nan, np.inf], np.float32)
    out = np.asarray(S.sort(x))
    np.testing.assert_array_equal(out, [-np.inf, 0, 0, 1, 1, 3, np.inf, np.nan, np.nan])
    assert np.signbit(out[1]) and not np.signbit(out[2])  # a stable sort keeps -0.0 first
    check(S.argsort(x), [6, 3, 4, 1, 5, 0, 8, 2, 7])
    check(S.argsort(x, descending=True), [2, 7, 8, 0, 1, 5, 3, 4, 6])
    check(S.sort(x, descending=True), [np.nan, np.nan, np.inf, 3, 1, 1, 0, 0, -np.inf])
    # complex: lexicographic by (real, imag)
    z = np.array([1 + 2j, 1 - 1j, 0 + 5j, -1 + 0j], np.complex64)
    check(S.sort(z), [-1 + 0j, 0 + 5j, 1 - 1j, 1 + 2j])


def _descending_stable(x):
    """NumPy reference: descending by value, ties in input order."""
    x = ref(x)
    rank = np.searchsorted(np.sort(x, kind="stable"), x)
    return np.lexsort((np.arange(x.size), -rank))


@pytest.mark.parametrize("dtype", [F32, I32, BOOL], ids=str)
def test_descending_argsort_is_stable(dtype):
    x = make((40,), dtype, seed=3)
    check(S.argsort(x, descending=True), _descending_stable(x), I32)
    check(S.sort(x, descending=True), np.sort(ref(x))[::-1], dtype)
    # unstable descending is the reversed ascending order, as JAX gives it
    check(S.argsort(np.array([1, 1, 0, 0, 1]), descending=True, stable=False), [4, 1, 0, 3, 2])


def test_argsort_dtype_and_x64():
    assert S.argsort(np.arange(3), dtype=np.int16).dtype == np.int16
    with plax.enable_x64():
        assert S.argsort(np.arange(3)).dtype == np.int64
        assert S.lexsort([np.arange(3)]).dtype == np.int64
        assert S.argpartition(np.arange(3), 1).dtype == np.int32
        assert S.searchsorted(np.arange(3), 1).dtype == np.int32


def test_sort_complex():
    check(S.sort_complex(np.array([3, 1, 2])), np.array([1, 2, 3], np.complex64), C64)
    check(S.sort_complex(np.array([[2., 1.]], np.float32)), [[1 + 0j, 2 + 0j]], C64)


# --- lexsort --------------------------------------------------------------------------------
def test_lexsort_matches_numpy():
    rng = np.random.default_rng(1)
    a, b, c = rng.integers(0, 3, (3, 4, 6))
    check(S.lexsort((a, b, c)), np.lexsort((a, b, c)), I32)
    check(S.lexsort((a, b), axis=0), np.lexsort((a, b), axis=0), I32)
    keys = np.stack([a[0], b[0]])
    check(S.lexsort(keys), np.lexsort(keys), I32)  # rows of a 2-D array are the keys
    f = np.array([1., np.nan, 1., 0.], np.float32)
    check(S.lexsort((np.array([3, 2, 1, 0]), f)), np.lexsort((np.array([3, 2, 1, 0]), f)))


# --- partition ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, I32], ids=str)
def test_partition(dtype):
    x = make((4, 9), dtype, seed=5)
    for kth in (0, 3, -1):
        got, idx = S.partition(x, kth), S.argpartition(x, kth)
        k = kth % 9
        s = np.sort(ref(x), axis=-1)
        # as JAX: the smallest k+1 ascending, then the others descending
        check(got, np.concatenate([s[:, :k + 1], s[:, k + 1:][:, ::-1]], axis=1), dtype)
        assert idx.dtype == I32
        idx = np.asarray(idx)
        picked = np.take_along_axis(ref(x), idx, axis=1)
        np.testing.assert_array_equal(picked[:, :k + 1], s[:, :k + 1])
        np.testing.assert_array_equal(np.sort(picked[:, k + 1:], axis=1), s[:, k + 1:])
        # the indices after kth come in increasing order, as JAX gives them
        assert (np.diff(idx[:, k + 1:], axis=1) > 0).all()
    check(S.partition(x, 2, axis=0), S.partition(x.T, 2).T.__array__())
    check(S.argpartition(np.array([9, 5, 1, 4, 8, 2, 7, 3, 6, 0]), 3),
          [9, 2, 5, 7, 0, 1, 3, 4, 6, 8])


# --- searchsorted ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "sort", "compare_all"])
def test_searchsorted_matches_numpy(method):
    a = np.sort(make((11,), F32, seed=2))
    v = np.concatenate([a, make((2, 3), F32, seed=4).ravel(), [np.inf, -np.inf, np.nan]])
    v = v.astype(np.float32).reshape(4, -1)
    for side in ("left", "right"):
        check(S.searchsorted(a, v, side=side, method=method), np.searchsorted(a, v, side=side),
              I32)
    # the other dtypes under jit: one compilation per call instead of one per operation
    search = plax.jit(S.searchsorted, static_argnames=("side", "method"))
    ai = np.array([1, 2, 2, 3], np.int8)
    check(search(ai, np.array([2, 0, 5]), side="right", method=method), [3, 0, 4], I32)
    check(search(ai, 2.5, method=method), 3)  # promoted to float
    b = np.array([False, True, True])
    check(search(b, True, method=method), 1)
    z = np.array([0 + 1j, 1 + 0j, 1 + 2j], np.complex64)
    check(search(z, np.array([1 + 1j, 0j], np.complex64), method=method), [2, 0])
    unsorted = np.array([3, 1, 2])
    check(search(unsorted, np.array([2, 4]), sorter=np.argsort(unsorted), method=method),
          np.searchsorted(unsorted, [2, 4], sorter=np.argsort(unsorted)))


def test_searchsorted_edge_cases():
    check(S.searchsorted(np.zeros((0,), np.float32), np.array([1., 2.], np.float32)), [0, 0])
    check(S.searchsorted(np.arange(3), np.zeros((0,), np.int32)), np.zeros((0,), np.int32))
    check(S.searchsorted(np.array([-0., 0.], np.float32), np.array([0., -0.], np.float32)),
          [0, 0])
    check(S.searchsorted(np.arange(5), 3), np.int32(3), I32)
    check(plax.jit(S.searchsorted)(np.arange(5.), np.array([1.5, 7.])), [2, 5])


# --- nonzero, flatnonzero, argwhere --------------------------------------------------------------
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 0, 3), (2, 3, 2)], ids=str)
def test_nonzero_matches_numpy(shape):
    x = make(shape, I32, seed=6)
    for got, want in zip(S.nonzero(x), np.nonzero(x)):
        check(got, want, I32)
    check(S.flatnonzero(x), np.flatnonzero(x), I32)
    check(S.argwhere(x), np.argwhere(x), I32)
    assert len(S.nonzero(x.astype(bool))) == len(shape)


def test_nonzero_dtypes():
    for dtype in (F32, BOOL, C64, BF16):
        x = make((9,), dtype, seed=7, special=False)
        check(S.nonzero(x)[0], np.nonzero(ref(x))[0], I32)


def test_nonzero_size_and_fill():
    x = np.array([[0, 1], [2, 0]])
    r, c = S.nonzero(x, size=3, fill_value=-1)
    check(r, [0, 1, -1]), check(c, [1, 0, -1])
    r, c = S.nonzero(x, size=3, fill_value=(7, 8))
    check(r, [0, 1, 7]), check(c, [1, 0, 8])
    check(S.nonzero(np.array([0, 1, 1, 0]), size=1)[0], [1])  # truncated
    check(S.flatnonzero(x, size=3, fill_value=9), [1, 2, 9])
    check(S.argwhere(x, size=3, fill_value=7), [[0, 1], [1, 0], [7, 7]])
    check(S.nonzero(np.zeros((0,)), size=2)[0], [0, 0])
    assert S.argwhere(np.array(3)).shape == (1, 0)
    assert S.argwhere(np.array(0)).shape == (0, 0)
    assert S.argwhere(np.array(0), size=2).shape == (2, 0)


def test_nonzero_under_jit_needs_size():
    x = np.array([0., 2., 0., 3.], np.float32)
    check(plax.jit(lambda v: S.nonzero(v, size=3))(x)[0], [1, 3, 0])
    check(plax.jit(lambda v: S.argwhere(v, size=2))(x), [[1], [3]])
    for fn in (S.nonzero, S.flatnonzero, S.argwhere):
        with pytest.raises(ConcretizationTypeError, match="size argument of jnp.nonzero must be"):
            plax.jit(fn)(x)


# --- unique ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, BF16, I32, BOOL, C64], ids=str)
def test_unique_matches_numpy(dtype):
    x = make((4, 5), dtype, seed=8, special=False)
    vals, idx, inv, cnt = S.unique(x, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(ref(x), return_index=True, return_inverse=True, return_counts=True)
    check(vals, want[0], dtype)
    for got, w in zip((idx, inv, cnt), want[1:]):
        check(got, w, I32)
    check(S.unique(x), want[0])


def test_unique_axis():
    x = np.array([[1, 2, 1], [1, 2, 1], [0, 3, 0], [1, 2, 1]])
    for axis in (0, 1, -1):
        got = S.unique(x, axis=axis, return_index=True, return_inverse=True, return_counts=True)
        want = np.unique(x, axis=axis, return_index=True, return_inverse=True, return_counts=True)
        for g, w in zip(got, want):
            check(g, w)
    f = np.array([[1., np.nan], [1., np.nan], [0., 3.]], np.float32)
    check(S.unique(f, axis=0), [[0., 3.], [1., np.nan]])
    check(S.unique(f, axis=0, equal_nan=False), [[0., 3.], [1., np.nan], [1., np.nan]])
    check(S.unique(np.zeros((3, 0)), axis=0), np.zeros((1, 0)))


def test_unique_nans_and_zeros():
    x = np.array([2., np.nan, 1., np.nan, -0., 0.], np.float32)
    check(S.unique(x), [0., 1., 2., np.nan])
    vals, idx, cnt = S.unique(x, equal_nan=False, return_index=True, return_counts=True)
    check(vals, [0., 1., 2., np.nan, np.nan]), check(idx, [4, 2, 0, 1, 3])
    check(cnt, [2, 1, 1, 1, 1])
    assert np.signbit(np.asarray(vals)[0])  # the first occurrence (-0.0) is kept, as JAX
    res = S.unique_all(x)
    check(res.values, vals), check(res.indices, idx), check(res.counts, cnt)
    check(res.inverse_indices, [2, 3, 1, 4, 0, 0])
    check(S.unique_values(x), vals)
    check(S.unique_counts(x).counts, cnt)
    check(S.unique_inverse(x).inverse_indices, res.inverse_indices)
    h = np.array([np.nan, 1, np.nan, 1], BF16)
    check(S.unique(h, equal_nan=False), np.array([1, np.nan, np.nan], BF16), BF16)
    # complex: any NaN part makes a NaN, as JAX treats it (sorted last, alike, first kept)
    z = np.array([1 + 1j, complex(1, np.nan), complex(np.nan, 0), 0j, 1 + 1j], np.complex64)
    vals, idx, cnt = S.unique(z, return_index=True, return_counts=True)
    check(idx, [3, 0, 1]), check(cnt, [1, 2, 2])
    check(S.unique(z, equal_nan=False, return_index=True)[1], [3, 0, 1, 2])


def test_unique_size_and_fill():
    x = np.array([5, 3, 1, 3])
    vals, idx, inv, cnt = S.unique(x, size=5, fill_value=0, return_index=True,
                                   return_inverse=True, return_counts=True)
    check(vals, [1, 3, 5, 0, 0]), check(idx, [2, 1, 0, 2, 2])
    check(inv, [2, 1, 0, 1]), check(cnt, [1, 2, 1, 0, 0])
    check(S.unique(x, size=5), [1, 3, 5, 1, 1])  # padded with the smallest value
    vals, cnt = S.unique(x, size=2, return_counts=True)  # truncated
    check(vals, [1, 3]), check(cnt, [1, 2])
    check(S.unique(x, size=0), np.zeros((0,), np.int32))
    check(S.unique(np.array([[1, 2], [1, 2], [0, 3]]), axis=0, size=3, fill_value=-1),
          [[0, 3], [1, 2], [-1, -1]])
    check(S.unique(np.zeros((0,), np.float32), size=2, fill_value=4.), [4., 4.])
    with pytest.raises(ValueError, match="fill_value must be specified"):
        S.unique(np.zeros((0,), np.float32), size=2)


def test_unique_edge_shapes():
    check(S.unique(np.array(5)), [5])
    vals, inv = S.unique(np.array(5), return_inverse=True)
    check(inv, np.int32(0))
    check(S.unique(np.ones((2, 2)), return_inverse=True)[1], np.zeros((2, 2), np.int32))
    check(S.unique(np.zeros((0,), np.float32)), np.zeros((0,), np.float32))


def test_unique_under_jit():
    x = np.array([3., 1., 3., 2.], np.float32)
    vals, cnt = plax.jit(lambda v: S.unique(v, size=4, fill_value=-1., return_counts=True))(x)
    check(vals, [1., 2., 3., -1.]), check(cnt, [1, 1, 2, 0])
    with pytest.raises(ConcretizationTypeError, match="first argument of jnp.unique"):
        plax.jit(S.unique)(x)


# --- transformations ----------------------------------------------------------------------------
def test_make_jaxpr_shows_sort():
    text = str(plax.make_jaxpr(lambda v: S.argsort(v, descending=True))(np.ones(3, np.float32)))
    assert "sort[" in text and "num_keys=1" in text and "rev[" in text


# vmapped functions are jitted so that each layout compiles once rather than op by op.
def test_vmap():
    x = make((3, 4, 5), F32, seed=9)
    check_vmap_axes(plax.jit(lambda v: S.sort(v, axis=0)), x)
    check_vmap_axes(plax.jit(lambda v: S.argsort(v, descending=True)), x)
    check_vmap_axes(plax.jit(lambda v: S.partition(v, 2)), x)
    a = np.sort(make((3, 6), F32, seed=10), axis=-1)
    v = make((3, 4), F32, seed=11)
    for method in ("scan", "sort", "compare_all"):
        check_vmap_axes(plax.jit(lambda p, q: S.searchsorted(p, q, method=method)), a, v)
    check_vmap(plax.jit(lambda v: S.nonzero(v, size=3, fill_value=-1)),
               make((4, 2, 3), I32, seed=12))
    check_vmap(plax.jit(lambda v: S.unique(v, size=5, return_counts=True)),
               make((4, 6), I32, seed=13))
    check_vmap(plax.jit(lambda k1, k2: S.lexsort((k1, k2))), *make((2, 3, 6), I32, seed=14))
    check_vmap(lambda v: S.sort(v), x)  # eager vmap too


def test_gradients():
    x = np.array([[0.3, -1.2, 2.0, 0.7], [1.5, 0.1, -0.4, 0.9]], np.float32)
    check_grads(lambda v: S.sort(v) * np.arange(4.), (x,), order=2)
    check_grads(lambda v: S.sort(v, axis=None, descending=True), (x,), order=1)
    check_grads(lambda v: S.partition(v, 1, axis=0), (x,), order=2)
    g = plax.grad(lambda v: S.sort(v)[0, -1])(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 0, 1, 0], [0, 0, 0, 0]])


# --- errors ---------------------------------------------------------------------------------
def test_errors():
    x = np.array([3., 1.], np.float32)
    with pytest.raises(TypeError, match="'kind' argument to sort is not supported"):
        S.sort(x, kind="quicksort")
    with pytest.raises(TypeError, match="'order' argument to argsort is not supported"):
        S.argsort(x, order="a")
    with pytest.raises(ValueError, match="invalid argument side='middle'"):
        S.searchsorted(x, 1., side="middle")
    with pytest.raises(ValueError, match="invalid argument method='fast'"):
        S.searchsorted(x, 1., method="fast")
    with pytest.raises(ValueError, match="a should be 1-dimensional"):
        S.searchsorted(np.ones((2, 2)), 1.)
    with pytest.raises(TypeError, match="need sequence of keys with len > 0 in lexsort"):
        S.lexsort([])
    with pytest.raises(ValueError, match="all keys need to be the same shape"):
        S.lexsort([np.ones(3), np.ones(2)])
    with pytest.raises(ValueError, match="out of bounds"):
        S.partition(np.arange(3), 3)
    with pytest.raises(ValueError, match="Calling nonzero on 0d arrays is not allowed"):
        S.nonzero(np.array(1))
    with pytest.raises(ValueError, match="fill_value must be a scalar or a tuple of length 2"):
        S.nonzero(np.ones((2, 2)), size=1, fill_value=(1, 2, 3))
    with pytest.raises(ValueError, match="axis 1 is out of bounds"):
        S.unique(np.arange(3), axis=1)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        S.sort([3, 1])


def test_where_one_argument_is_nonzero():
    import plax.numpy as jnp
    c = np.array([[1, 0, 2], [0, 3, 0]])
    got = jnp.where(c)
    for g, w in zip(got, np.where(c)):
        np.testing.assert_array_equal(g, w)
    got = plax.jit(lambda v: jnp.where(v, size=4, fill_value=-1))(c)
    np.testing.assert_array_equal(got[1], [0, 2, 1, -1])
    with pytest.raises(TypeError, match="where requires ndarray or scalar arguments"):
        jnp.where(c, 1)


def test_compress_and_array_methods():
    import plax.numpy as jnp
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for cond, axis in (([True, False, True], 0), ([1, 0, 1, 1], 1), ([1, 0], None),
                       ([0, 1], 1)):
        np.testing.assert_array_equal(jnp.compress(np.array(cond), a, axis=axis),
                                      np.compress(cond, a, axis=axis))
    got = plax.jit(lambda c, v: jnp.compress(c, v, size=3, fill_value=-1))(
        np.array([True, False, True, False]), np.arange(4.0, dtype=np.float32))
    np.testing.assert_array_equal(got, [0.0, 2.0, -1.0])
    with pytest.raises(ValueError, match="condition contains entries that are out of bounds"):
        jnp.compress(np.array([1, 0, 1, 1]), a, axis=0)
    x = jnp.asarray(a)
    np.testing.assert_array_equal(x.compress(np.array([True, False, True]), axis=0), a[[0, 2]])
    v = jnp.array([3.0, 1.0, 2.0])
    np.testing.assert_array_equal(v.sort(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(v.argsort(), [1, 2, 0])
    np.testing.assert_array_equal(v.nonzero()[0], [0, 1, 2])
    assert int(jnp.sort(v).searchsorted(2.5)) == 2
