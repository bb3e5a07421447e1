"""plax.numpy array building and editing against NumPy (values) and JAX 0.10 (dtypes,
clipping, errors)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.errors import ConcretizationTypeError
from helpers import check_exact as check


X = np.arange(6, dtype=np.float32)
M = np.arange(12, dtype=np.int32).reshape(3, 4)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_append(axis):
    v = np.ones((3, 4) if axis is None else ((1, 4) if axis == 0 else (3, 2)), np.int32)
    check(jnp.append(M, v, axis), np.append(M, v, axis), np.int32)
    assert jnp.append(np.ones(2, np.int8), 2.5).dtype == np.float32
    check(plax.jit(lambda a: jnp.append(a, a, axis))(M), np.append(M, M, axis))


@pytest.mark.parametrize("obj,values,axis", [
    (1, 5, None), (10, 5, None), (-1, np.array([7, 8]), None), (np.array([1, 1, -1]), np.array([7, 8, 9]), None),
    (slice(None, None, 2), 5, None), (1, np.array([7, 8, 9]), 1), (1, np.array([7, 8, 9, 1]), 0),
    (np.array([1]), np.array([[7], [8], [9]]), 1), (np.array([0, 3]), 0, 0)])
def test_insert(obj, values, axis):
    want = np.insert(M, min(obj, 12) if isinstance(obj, int) else obj, values, axis)
    check(jnp.insert(M, obj, values, axis), want, np.int32)


def test_insert_jit_and_dtype():
    check(plax.jit(lambda o: jnp.insert(X, o, 9.))(2), np.insert(X, 2, 9.))
    check(plax.jit(lambda o: jnp.insert(X, o, np.array([9., 8])))(np.array([1, 3])),
          np.insert(X, [1, 3], [9., 8]))
    check(jnp.insert(X, 1, 2.5), np.insert(X, 1, 2.5), np.float32)
    with pytest.raises(TypeError, match="obj must be integer"):
        jnp.insert(X, 1.5, 1.)


@pytest.mark.parametrize("obj,axis", [(np.array([0, 0, -1]), None), (2, 1), (slice(1, 3), 0),
                                      (np.array([True, False, True]), 0), ([], 1)])
def test_delete(obj, axis):
    check(jnp.delete(M, obj, axis), np.delete(M, obj, axis), np.int32)


def test_delete_traced_and_errors():
    f = plax.jit(lambda o: jnp.delete(X, o, assume_unique_indices=True))
    check(f(np.array([1, -1])), [0., 2., 3., 4.])
    with pytest.raises(ConcretizationTypeError, match="'obj' array argument of jnp.delete"):
        plax.jit(lambda o: jnp.delete(X, o))(np.array([1]))
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        jnp.delete(X, np.array([0, 9]))
    with pytest.raises(TypeError, match="obj must be integer"):
        jnp.delete(X, np.array([0.5]))


@pytest.mark.parametrize("shape", [(2, 4), (7,), (1,), (0,)])
def test_resize(shape):
    for a in (np.arange(3), np.arange(6.).reshape(2, 3)):
        check(jnp.resize(a, shape), np.resize(a, shape))
    check(jnp.resize(np.array([], np.int32), (2,)), [0, 0])
    with pytest.raises(ValueError, match="new_shape must be non-negative"):
        jnp.resize(X, (-1,))


def test_trim_zeros():
    a = np.array([0, 0, 1, 0, 2, 0])
    for trim in ("fb", "f", "b"):
        check(jnp.trim_zeros(a, trim), np.trim_zeros(a, trim))
    check(jnp.trim_zeros(np.array([0, 0])), np.zeros(0))
    b = np.array([[0, 0, 0], [0, 1, 0]])
    check(jnp.trim_zeros(b), [[1]])
    check(jnp.trim_zeros(b, axis=0), [[0, 1, 0]])
    with pytest.raises(ConcretizationTypeError, match="trim_zeros"):
        plax.jit(jnp.trim_zeros)(a)
    with pytest.raises(TypeError, match="trim must be a string"):
        jnp.trim_zeros(a, 1)


def test_block_and_row_stack():
    blocks = [[np.ones((2, 2)), np.zeros((2, 1))], [np.zeros((1, 3))]]
    check(jnp.block(blocks), np.block(blocks), np.float32)
    check(jnp.block([1, 2]), np.block([1, 2]), np.int32)
    check(jnp.block([[1, 2], [3, 4]]), np.block([[1, 2], [3, 4]]))
    check(jnp.block(3), np.block(3))
    check(plax.jit(lambda a, b: jnp.block([[a], [b]]))(M, M), np.block([[M], [M]]))
    with pytest.raises(ValueError, match="Mismatched list depths"):
        jnp.block([[1], 2])
    with pytest.raises(ValueError, match="empty list"):
        jnp.block([])
    with pytest.raises(ValueError, match="does not allow tuples"):
        jnp.block((1, 2))
    check(jnp.row_stack([X, X]), np.vstack([X, X]))


def test_choose():
    ch = [np.arange(3), 10 + np.arange(3), 20. + np.arange(3)]
    check(jnp.choose(np.array([0, 2, 1]), ch), np.choose([0, 2, 1], ch), np.float32)
    bad = np.array([0, 3, -1])
    for mode in ("wrap", "clip"):
        check(jnp.choose(bad, ch[:2], mode=mode), np.choose(bad, ch[:2], mode=mode), np.int32)
        f = plax.jit(lambda a: jnp.choose(a, ch[:2], mode=mode))
        check(f(bad), np.choose(bad, ch[:2], mode=mode))
    check(jnp.choose(np.array([[0], [1]]), np.stack(ch[:2])), np.choose([[0], [1]], ch[:2]))
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        jnp.choose(bad, ch[:2])
    with pytest.raises(ConcretizationTypeError, match="mode='raise'"):
        plax.jit(lambda a: jnp.choose(a, ch))(np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="mode='x' not understood"):
        jnp.choose(bad, ch, mode="x")


def test_put():
    ind, v = np.array([0, 7, -1]), np.array([10., 20, 30], np.float32)
    check(jnp.put(X, ind, v, inplace=False), [10., 1, 2, 3, 4, 30])
    for mode in ("clip", "wrap"):
        want = X.copy()
        np.put(want, ind, v, mode=mode)
        check(jnp.put(X, ind, v, mode=mode, inplace=False), want, np.float32)
    want = M.copy()
    np.put(want, [0, 1, 2], [10, 11])
    check(plax.jit(lambda a: jnp.put(a, np.array([0, 1, 2]), np.array([10, 11]), inplace=False))(M),
          want)
    with pytest.raises(ValueError, match="cannot modify arrays in-place"):
        jnp.put(X, np.array([0]), 1.)
    with pytest.raises(NotImplementedError, match="'raise' mode"):
        jnp.put(X, np.array([0]), 1., mode="raise", inplace=False)


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diagflat(k):
    for v in (np.array([[1, 2], [3, 4]], np.int32), np.arange(3.)):
        check(jnp.diagflat(v, k), np.diagflat(v, k))


@pytest.mark.parametrize("N,increasing", [(None, False), (4, False), (2, True), (0, True)])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_vander(N, increasing, dtype):
    x = np.array([1, 2, -3], dtype)
    check(jnp.vander(x, N, increasing), np.vander(x, N, increasing), dtype)
    check(plax.jit(lambda a: jnp.vander(a, N, increasing))(x), np.vander(x, N, increasing))
    with pytest.raises(ValueError, match="one-dimensional"):
        jnp.vander(np.ones((1, 1)))
    with pytest.raises(ValueError, match="N must be nonnegative"):
        jnp.vander(x, -1)


@pytest.mark.parametrize("shape,axis", [((9,), None), ((2, 3), 1), ((10, 3), 0), ((2, 3, 4), -1)])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits(shape, axis, bitorder):
    a = np.random.default_rng(0).integers(0, 3, shape).astype(np.int32)
    check(jnp.packbits(a, axis, bitorder), np.packbits(a, axis, bitorder=bitorder), np.uint8)
    check(jnp.packbits(a > 0, axis, bitorder), np.packbits(a > 0, axis, bitorder=bitorder))
    p = np.packbits(a, axis, bitorder=bitorder)
    check(jnp.unpackbits(p, axis, bitorder=bitorder), np.unpackbits(p, axis, bitorder=bitorder),
          np.uint8)
    for count in (3, -3, 20):
        check(jnp.unpackbits(p, axis, count, bitorder),
              np.unpackbits(p, axis, count, bitorder=bitorder))
    f = plax.jit(lambda x: jnp.unpackbits(jnp.packbits(x, axis, bitorder), axis, bitorder=bitorder))
    check(f(a), np.unpackbits(p, axis, bitorder=bitorder))


def test_bits_errors():
    with pytest.raises(TypeError, match="integer or boolean"):
        jnp.packbits(np.array([1., 0]))
    with pytest.raises(TypeError, match="unsigned byte"):
        jnp.unpackbits(np.array([3]))
    with pytest.raises(ValueError, match="'order' must be"):
        jnp.packbits(np.array([1, 0]), bitorder="x")


def test_apply_along_axis():
    a = np.arange(60.).reshape(3, 4, 5).astype(np.float32)
    for axis in (0, 1, -1):
        check(jnp.apply_along_axis(jnp.sum, axis, a), np.apply_along_axis(np.sum, axis, a))
        f = lambda v: v[:2] * 2  # noqa: E731
        check(jnp.apply_along_axis(f, axis, a), np.apply_along_axis(f, axis, a))
        g = lambda v: jnp.outer(v[:2], v[:3])  # noqa: E731
        check(jnp.apply_along_axis(g, axis, a),
              np.apply_along_axis(lambda v: np.outer(v[:2], v[:3]), axis, a))
    check(plax.jit(lambda x: jnp.apply_along_axis(jnp.cumsum, 1, x))(a),
          np.apply_along_axis(np.cumsum, 1, a))


def test_apply_over_axes():
    a = np.arange(24.).reshape(2, 3, 4)
    for axes in ([0, 2], [1], 0):
        check(jnp.apply_over_axes(jnp.sum, a, axes), np.apply_over_axes(np.sum, a, axes))
    with pytest.raises(ValueError, match="correct shape"):
        jnp.apply_over_axes(lambda x, ax: jnp.sum(x), a, [0, 1])


def test_extract_and_place():
    c = np.array([1, 0, 1, 0, 1, 0])
    check(jnp.extract(c, X), np.extract(c, X), np.float32)
    check(jnp.extract(M > 4, M), np.extract(M > 4, M))
    check(jnp.extract(c, X, size=4), [0., 2, 4, 0])
    check(plax.jit(lambda c: jnp.extract(c, X, size=2, fill_value=-1))(X > 4), [5., -1])
    with pytest.raises(ConcretizationTypeError, match="size argument"):
        plax.jit(lambda c: jnp.extract(c, X))(X > 2)
    for arr, mask, vals in ((X, X > 2, np.array([1., 2], np.float32)), (M, M % 3 == 0, np.array([-1], np.int32)),
                            (M, M > 100, np.array([5], np.int32))):
        want = arr.copy()
        np.place(want, mask, vals)
        check(jnp.place(arr, mask, vals, inplace=False), want, arr.dtype)
        check(plax.jit(lambda a, m: jnp.place(a, m, vals, inplace=False))(arr, mask), want)
    with pytest.raises(ValueError, match="cannot modify arrays in-place"):
        jnp.place(X, X > 2, np.array([1.]))
    with pytest.raises(ValueError, match="mask must have the size"):
        jnp.place(X, np.array([True]), np.array([1.]), inplace=False)
