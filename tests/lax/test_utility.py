"""plax.lax convenience ops (split, collapse, broadcast helpers, reciprocal, index_take,
scatter_sub, mulhi, reduce_precision) against NumPy and JAX 0.10's hard-coded results."""
import numpy as np
import pytest

import plax
import plax.lax as lax
from plax.test_util import check_grads

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7 + 0.5


@pytest.mark.parametrize("sizes,axis", [((1, 3), -1), ((0, 2, 1), 1), ((2,), 0)])
def test_split(sizes, axis):
    got = lax.split(X, sizes, axis=axis)
    want = np.split(X, np.cumsum(sizes)[:-1], axis=axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)
    jgot = plax.jit(lambda x: lax.split(x, sizes, axis))(X)
    for g, w in zip(jgot, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_split_vmap_and_grad():
    f = lambda x: lax.split(x, (1, 3), axis=1)
    got = plax.vmap(f)(X)
    np.testing.assert_array_equal(np.asarray(got[1]), X[:, :, 1:])
    check_grads(lambda x: lax.split(x, (1, 3), axis=2)[1] * 2.0, (X.astype(np.float64),), 2,
                eps=1e-2)


def test_split_errors():
    with pytest.raises(ValueError, match="Sum of sizes 3 must be equal to dimension 0"):
        lax.split(np.ones(4), [1, 2])
    with pytest.raises(ValueError, match="Sizes passed to split must be nonnegative"):
        lax.split(np.ones(4), [5, -1])


@pytest.mark.parametrize("start,stop,shape", [(1, None, (2, 12)), (0, 2, (6, 4)), (0, 3, (24,)),
                                              (-2, None, (2, 12)), (1, 1, (2, 1, 3, 4))])
def test_collapse(start, stop, shape):
    got = lax.collapse(X, start, stop)
    np.testing.assert_array_equal(np.asarray(got), X.reshape(shape))
    got = plax.jit(lambda x: lax.collapse(x, start, stop))(X)
    assert got.shape == shape


def test_collapse_vmap_grad_error():
    got = plax.vmap(lambda x: lax.collapse(x, 0))(X)
    np.testing.assert_array_equal(np.asarray(got), X.reshape(2, 12))
    check_grads(lambda x: lax.collapse(x, 0, 2) ** 2, (X.astype(np.float64),), 2)
    with pytest.raises(ValueError, match="Invalid dimension range passed to collapse"):
        lax.collapse(np.ones((2, 3)), 2, 1)


def test_broadcast_shapes():
    assert lax.broadcast_shapes((2, 1), (1, 3), ()) == (2, 3)
    assert lax.broadcast_shapes((5, 1, 4), (3, 1)) == (5, 3, 4)
    assert lax.broadcast_shapes((2, 3)) == (2, 3)
    assert lax.broadcast_shapes((0, 1), (1, 4)) == (0, 4)
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(2,\), \(3,\)\]"):
        lax.broadcast_shapes((2,), (3,))


def test_broadcast_to_rank():
    assert lax.broadcast_to_rank(np.float32(3), 2).shape == (1, 1)
    got = lax.broadcast_to_rank(np.arange(3), 3)
    np.testing.assert_array_equal(np.asarray(got), np.arange(3).reshape(1, 1, 3))
    same = lax.broadcast_to_rank(3.0, 0)
    assert same.shape == () and float(same) == 3.0
    assert plax.jit(lambda x: lax.broadcast_to_rank(x, 4))(X).shape == (1, 2, 3, 4)


def test_reciprocal():
    got = lax.reciprocal(X)
    np.testing.assert_allclose(np.asarray(got), 1 / X, rtol=1e-6)
    assert got.dtype == np.float32
    got = plax.vmap(lax.reciprocal)(X)
    np.testing.assert_allclose(np.asarray(got), 1 / X, rtol=1e-6)
    check_grads(lax.reciprocal, (X.astype(np.float64),), 2)


def test_index_take():
    idxs = (np.array([0, 1, -1]), np.array([2, 0, 5]))
    got = lax.index_take(X, idxs, (0, 2))
    want = X[np.array([0, 1, 1]), :, np.array([2, 0, 1])]  # indices wrap modulo the sizes
    np.testing.assert_array_equal(np.asarray(got), want)
    got = plax.jit(lambda x, i, j: lax.index_take(x, (i, j), (0, 2)))(X, *idxs)
    np.testing.assert_array_equal(np.asarray(got), want)
    got = plax.vmap(lambda x: lax.index_take(x, (np.array([2, 0]),), (1,)))(X)
    np.testing.assert_array_equal(np.asarray(got), X[:, :, [2, 0]].transpose(0, 2, 1))
    check_grads(lambda x: lax.index_take(x, (np.array([1, 1, 0]),), (1,)),
                (X.astype(np.float64),), 2, eps=1e-2)


def test_scatter_sub():
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([[1], [3], [1]], np.int32)
    upd = np.ones((3, 3), np.float32) * np.array([[1.], [2.], [4.]], np.float32)
    want = x.copy()
    np.subtract.at(want, idx[:, 0], upd)
    got = lax.scatter_sub(x, idx, upd, dn)
    np.testing.assert_array_equal(np.asarray(got), want)
    got = plax.jit(lambda a, b: lax.scatter_sub(a, idx, b, dn))(x, upd)
    np.testing.assert_array_equal(np.asarray(got), want)
    g = plax.grad(lambda u: lax.scatter_sub(x, idx, u, dn).sum())(upd)
    np.testing.assert_array_equal(np.asarray(g), -np.ones_like(upd))


# JAX 0.10.2's lax.mulhi on these inputs.
_A = np.array([3, -5, 127, -128, 100], np.int64)
_B = np.array([7, 9, -128, -1, 100], np.int64)
_MULHI = {np.int8: [0, -1, -64, 0, 39], np.uint8: [0, 8, 63, 127, 39],
          np.int16: [0, -1, -1, 0, 0], np.int32: [0, -1, -1, 0, 0],
          np.uint32: [0, 8, 126, 4294967167, 0]}


@pytest.mark.parametrize("dt", list(_MULHI))
def test_mulhi_jax_values(dt):
    got = lax.mulhi(_A.astype(dt), _B.astype(dt))
    assert got.dtype == np.dtype(dt)
    np.testing.assert_array_equal(np.asarray(got), np.array(_MULHI[dt], dt))


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_mulhi_random(dt):
    info = np.iinfo(dt)
    rng = np.random.default_rng(0)
    a = rng.integers(info.min, info.max, size=64, endpoint=True).astype(dt)
    b = rng.integers(info.min, info.max, size=64, endpoint=True).astype(dt)
    bits = np.dtype(dt).itemsize * 8
    want = ((a.astype(object) * b.astype(object)) >> bits)
    want = np.array([int(w) for w in want], np.int64).astype(dt)
    np.testing.assert_array_equal(np.asarray(lax.mulhi(a, b)), want)
    np.testing.assert_array_equal(np.asarray(plax.jit(lax.mulhi)(a, b)), want)
    np.testing.assert_array_equal(np.asarray(plax.vmap(lax.mulhi)(a.reshape(8, 8),
                                                                   b.reshape(8, 8))),
                                  want.reshape(8, 8))


def test_mulhi_errors():
    with pytest.raises(TypeError, match="lax.mulhi requires arguments to have the same dtypes"):
        lax.mulhi(np.int32(1), np.int8(2))
    with pytest.raises(TypeError, match="mulhi does not accept dtype float32"):
        lax.mulhi(np.float32(1), np.float32(2))


def _np_reduce_precision_f16(x):
    return x.astype(np.float16).astype(np.float32)


def test_reduce_precision():
    x = np.array([1.1, 3.3e5, 1e-8], np.float32)
    got = lax.reduce_precision(x, 5, 10)
    np.testing.assert_array_equal(np.asarray(got), np.array([1.0996094, np.inf, 0.0], np.float32))
    rng = np.random.default_rng(1)
    y = rng.standard_normal(50).astype(np.float32) * 100
    np.testing.assert_array_equal(np.asarray(plax.jit(lambda v: lax.reduce_precision(v, 5, 10))(y)),
                                  _np_reduce_precision_f16(y))
    np.testing.assert_array_equal(np.asarray(plax.vmap(lambda v: lax.reduce_precision(v, 5, 10))(
        y.reshape(5, 10))), _np_reduce_precision_f16(y).reshape(5, 10))
    out = lax.reduce_precision(1.1, 5, 2)
    assert out.dtype == np.float32 and float(out) == 1.0


def test_reduce_precision_jvp_and_grad():
    # JAX: the tangent is reduced too (reduce_precision is linear).
    p, t = plax.jvp(lambda v: lax.reduce_precision(v, 5, 2), (np.float32(1.1),),
                    (np.float32(1.1),))
    assert float(p) == 1.0 and float(t) == 1.0
    g = plax.grad(lambda v: lax.reduce_precision(v, 8, 23).sum())(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(g), np.ones(3, np.float32))


def test_reduce_precision_errors():
    with pytest.raises(TypeError, match="reduce_precision does not accept dtype int32"):
        lax.reduce_precision(np.int32(1), 5, 2)
    with pytest.raises(ValueError, match="exponent_bits must be positive; got 0"):
        lax.reduce_precision(1.0, 0, 2)
    with pytest.raises(ValueError, match="mantissa_bits must be non-negative; got -1"):
        lax.reduce_precision(1.0, 5, -1)
    with pytest.raises(TypeError, match="integer"):
        lax.reduce_precision(1.0, 5.5, 2)
