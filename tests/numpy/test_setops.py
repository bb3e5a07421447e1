"""plax.numpy set operations against NumPy (values) and JAX 0.10 (dtypes, size= padding)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.errors import ConcretizationTypeError
from helpers import check_exact as check


def make(n, dtype, seed):
    return np.random.default_rng(seed).integers(0, 6, n).astype(dtype)


A, B = np.array([3, 1, 2, 3, 5, 1], np.int32), np.array([1, 3, 7, 3], np.int32)
DTYPES = [np.int32, np.float32, np.uint8]
SETOPS = ["union1d", "setdiff1d", "setxor1d", "intersect1d"]


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.bool_])
@pytest.mark.parametrize("method", ["auto", "compare_all", "binary_search", "sort"])
def test_isin(dtype, method):
    e, t = make((3, 4), dtype, 0), make(5, dtype, 1)
    check(jnp.isin(e, t, method=method), np.isin(e, t), np.bool_)
    check(jnp.isin(e, t, invert=True, method=method), np.isin(e, t, invert=True))
    check(jnp.isin(e, t[:0], method=method), np.isin(e, t[:0]))
    check(plax.jit(lambda a, b: jnp.isin(a, b, method=method))(e, t), np.isin(e, t))


def test_isin_misc():
    assert bool(jnp.isin(1, np.array([1.])))
    check(jnp.isin(np.array([np.nan, 1.]), np.array([np.nan, 1.])), [False, True])
    check(plax.vmap(lambda x: jnp.isin(x, B))(A.reshape(2, 3)), np.isin(A, B).reshape(2, 3))
    with pytest.raises(ValueError, match="method='foo' is not implemented"):
        jnp.isin(A, B, method="foo")
    with pytest.raises(TypeError, match="isin requires ndarray"):
        jnp.isin(A, [1, 2])


# Every dtype with 1-d and empty operands; a 2-d operand (flattened, as NumPy does) once.
@pytest.mark.parametrize("name", SETOPS)
@pytest.mark.parametrize("dtype, shapes", [(d, s) for d in DTYPES for s in [((7,), (5,)),
                                                                          ((0,), (3,))]]
                         + [(np.int32, ((2, 3), (4,)))])
def test_setops_match_numpy(name, dtype, shapes):
    a, b = make(shapes[0], dtype, 2), make(shapes[1], dtype, 3)
    check(getattr(jnp, name)(a, b), getattr(np, name)(a, b), dtype)


@pytest.mark.parametrize("name", SETOPS)
def test_setops_size_jit(name):
    want = getattr(np, name)(A, B)
    for size in (1, len(want), len(want) + 3):
        f = plax.jit(lambda a, b: getattr(jnp, name)(a, b, size=size, fill_value=-1))
        exp = np.concatenate([want, np.full(max(size - len(want), 0), -1)])[:size]
        check(f(A, B), exp, np.int32)
    with pytest.raises(ConcretizationTypeError, match=f"size argument of jnp.{name}"):
        plax.jit(lambda a, b: getattr(jnp, name)(a, b))(A, B)
    got = plax.vmap(lambda x: getattr(jnp, name)(x, B, size=6, fill_value=0))(np.stack([A, A[::-1]]))
    check(got, np.stack([np.concatenate([want, np.zeros(6 - len(want))])] * 2))


def test_default_padding_as_jax():
    # JAX pads with the smallest entry (union1d, setxor1d, intersect1d) or 0 (setdiff1d)
    check(jnp.union1d(A, B, size=8), [1, 2, 3, 5, 7, 1, 1, 1])
    check(jnp.setxor1d(A, B, size=5), [2, 5, 7, 2, 2])
    check(jnp.setdiff1d(A, B, size=4), [2, 5, 0, 0])
    check(jnp.setdiff1d(B, B, size=2), [0, 0])
    check(jnp.intersect1d(A, B, size=4), [1, 3, 1, 1])
    check(jnp.setxor1d(np.array([], np.int32), np.array([], np.int32), size=2), [0, 0])


def test_intersect1d_indices():
    v, i1, i2 = jnp.intersect1d(A, B, return_indices=True)
    wv, w1, w2 = np.intersect1d(A, B, return_indices=True)
    check(v, wv), check(i1, w1, np.int32), check(i2, w2, np.int32)
    v, i1, i2 = plax.jit(lambda a, b: jnp.intersect1d(a, b, return_indices=True, size=4))(A, B)
    check(v, [1, 3, 1, 1]), check(i1, [1, 0, 6, 6]), check(i2, [0, 1, 4, 4])
    x, y = make((3, 3), np.float32, 5), make(6, np.float32, 6)
    for g, w in zip(jnp.intersect1d(x, y, return_indices=True),
                    np.intersect1d(x, y, return_indices=True)):
        check(g, w)


def test_promotion_and_nan():
    assert jnp.union1d(np.int8([1]), np.uint8([2])).dtype == np.int16
    assert jnp.intersect1d(np.int8([1, 2]), np.float32([2])).dtype == np.float32
    nan = np.nan
    check(jnp.intersect1d(np.array([1., nan]), np.array([nan, 1.])), [1.])
    check(jnp.setxor1d(np.array([1., nan]), np.array([2.])), [1., 2., nan])
    check(jnp.setdiff1d(np.array([1., nan, nan]), np.array([2.])), [1., nan])
    check(jnp.union1d(np.array([1., nan, nan]), np.array([nan])), [1., nan])
    with pytest.raises(TypeError, match="union1d requires ndarray"):
        jnp.union1d([1], A)
    with pytest.raises(ValueError, match="size must be non-negative"):
        jnp.setdiff1d(A, B, size=-1)


def test_setdiff1d_keeps_ar1_dtype_and_setxor1d_assume_unique():
    a, b = np.array([5, 1, 3, 3, 9], np.int16), np.array([3.0, 7.0], np.float32)
    for kw in ({}, {"size": 6}, {"size": 2, "fill_value": -1}):
        got = jnp.setdiff1d(a, b, **kw)
        assert got.dtype == np.int16
    np.testing.assert_array_equal(jnp.setdiff1d(a, b), np.setdiff1d(a, b))
    # assume_unique: nothing deduplicated, so a value repeated within one input drops out
    x, y = np.array([[3, 1], [2, 2]]), np.array([2, 9, 5, 9])
    np.testing.assert_array_equal(jnp.setxor1d(x, y, assume_unique=True),
                                  np.setxor1d(x.ravel(), y, assume_unique=True))
    np.testing.assert_array_equal(jnp.setxor1d(x, y, assume_unique=True, size=4, fill_value=0),
                                  [1, 3, 5, 0])


def test_unique_size_fills_with_a_slice():
    x = np.array([[[1, 2], [1, 2], [3, 4]], [[1, 5], [1, 5], [0, 0]]], np.float32)
    fill = np.array([[7, 8], [9, 10]], np.float32)  # one slice along axis 1
    got = jnp.unique(x, axis=1, size=4, fill_value=fill)
    want = np.concatenate([np.unique(x, axis=1), np.stack([fill, fill], 1)], axis=1)
    np.testing.assert_array_equal(got, want)
