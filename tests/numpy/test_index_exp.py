"""plax.numpy s_, index_exp, r_, c_ and put_along_axis against NumPy and JAX 0.10."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads


def check(got, want, dtype=None):
    want = np.asarray(want)
    assert tuple(got.shape) == want.shape, (got.shape, want.shape)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_s_and_index_exp():
    assert jnp.s_[1:2, ..., None] == (slice(1, 2, None), Ellipsis, None)
    assert jnp.s_[1] == 1
    assert jnp.index_exp[1] == (1,)
    assert jnp.index_exp[1:2, 3] == (slice(1, 2, None), 3)
    x = jnp.arange(12).reshape(3, 4)
    check(x[jnp.s_[::2, 1:]], np.arange(12).reshape(3, 4)[::2, 1:])


R_CASES = [
    lambda m: m.r_[1:4, 0, np.array([7, 8])],
    lambda m: m.r_[0:1:5j],
    lambda m: m.r_[0:1:0.25],
    lambda m: m.r_[:3],
    lambda m: m.r_[3:0:-1],
    lambda m: m.r_["0,2", [1, 2], [3, 4]],
    lambda m: m.r_["0,2,0", [1, 2, 3], [4, 5, 6]],
    lambda m: m.r_["1,2,0", [1, 2, 3], [4, 5, 6]],
    lambda m: m.r_["r", [1, 2, 3], [4, 5, 6]],
    lambda m: m.r_["c", [1, 2, 3], [4, 5, 6]],
    lambda m: m.r_["-1", np.ones((2, 2)), np.zeros((2, 1))],
    lambda m: m.r_["1", np.ones((2, 2)), np.zeros((2, 1))],
    lambda m: m.r_[np.array([1, 2]), [3.5]],
    lambda m: m.r_[True, False],
    lambda m: m.c_[np.array([1, 2, 3]), np.array([4, 5, 6])],
    lambda m: m.c_[np.array([[1, 2, 3]]), 0, 0, np.array([[4, 5, 6]])],
    lambda m: m.c_[1:3, 4:6],
    lambda m: m.c_[1, 2],
    lambda m: m.c_[[1, 2], [3, 4]],
    lambda m: m.c_[np.ones((2, 2)), np.zeros((2, 1))],
]


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("case", range(len(R_CASES)))
def test_r_c_match_numpy(case):
    got, want = R_CASES[case](jnp), np.asarray(R_CASES[case](np))
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_r_c_dtypes():
    # JAX 0.10: default int is int32 and pieces promote like concatenate.
    assert jnp.r_[1:4].dtype == np.int32
    assert jnp.r_[np.int8(1), np.array([2], np.int8)].dtype == np.int8
    assert jnp.r_[1:3, True].dtype == np.int32
    assert jnp.r_[np.array([1, 2]), [3.5]].dtype == np.float32


def test_r_c_under_jit():
    f = plax.jit(lambda x, y: jnp.r_[x, 0.0, y])
    check(f(np.ones(2, np.float32), np.arange(3, dtype=np.float32)), np.r_[np.ones(2), 0, np.arange(3)])
    g = plax.jit(lambda x, y: jnp.c_[x, y])
    check(g(np.ones(3, np.float32), np.zeros(3, np.float32)), np.c_[np.ones(3), np.zeros(3)])


def test_r_c_errors():
    with pytest.raises(ValueError, match="could not understand directive 'abc'"):
        jnp.r_["abc", [1]]
    with pytest.raises(ValueError, match="string directive must be placed at the beginning"):
        jnp.r_[[1], "r"]
    assert len(jnp.r_) == 0 and len(jnp.c_) == 0


A = np.arange(12.).reshape(3, 4)


def _np_put(arr, idx, vals, axis):
    out = np.array(arr, copy=True)
    np.put_along_axis(out, idx, vals, axis)
    return out


@pytest.mark.parametrize("idx,vals,axis", [
    (np.array([[0], [1], [2]]), 99.0, 1),
    (np.array([[0, 1, 2, 0]]), np.array([[1, 2, 3, 4.]]), 0),
    (np.array([5]), 7.0, None),
    (np.array([[3], [0], [1]]), 5.0, -1),
    (np.array([[2, 0], [1, 3], [0, 0]]), np.array([[1., 2.], [3., 4.], [5., 5.]]), 1),
])
def test_put_along_axis(idx, vals, axis):
    got = jnp.put_along_axis(A, idx, vals, axis, inplace=False)
    check(got, _np_put(A, idx, vals, axis), np.float32)
    jitted = plax.jit(lambda a, i, v: jnp.put_along_axis(a, i, v, axis, inplace=False))
    check(jitted(A, idx, np.asarray(vals, np.float32)), _np_put(A, idx, vals, axis))


def test_put_along_axis_out_of_bounds_dropped_jax():
    # JAX 0.10.2 drops out-of-bounds updates.
    got = jnp.put_along_axis(A, np.array([[0, 1, 2, 3]]), np.array([[1, 2, 3, 4.]]), 0,
                             inplace=False)
    check(got, [[1., 1., 2., 3.], [4., 2., 6., 7.], [8., 9., 3., 11.]])


def test_put_along_axis_negative_index_jax():
    # JAX 0.10.2: negative indices count from the end.
    got = jnp.put_along_axis(A, np.array([[-1], [0], [1]]), 5., axis=-1, inplace=False)
    check(got, [[0., 1., 2., 5.], [5., 5., 6., 7.], [8., 5., 10., 11.]])


def test_put_along_axis_vmap_and_grad():
    idx = np.array([[1], [0], [3]])
    f = lambda a, v: jnp.put_along_axis(a, idx, v, 1, inplace=False)
    batch = np.stack([A, A + 1])
    vals = np.array([[[1.], [2.], [3.]], [[4.], [5.], [6.]]])
    got = plax.vmap(f)(batch, vals)
    check(got, np.stack([_np_put(batch[i], idx, vals[i], 1) for i in range(2)]))
    check_grads(f, (A, np.array([[1.], [2.], [3.]])), 2)


def test_put_along_axis_errors():
    with pytest.raises(ValueError, match="cannot modify arrays in-place"):
        jnp.put_along_axis(A, np.array([[0]]), 1., axis=1)
    with pytest.raises(ValueError, match="'arr' and 'indices' must have same ndim"):
        jnp.put_along_axis(A, np.array([0]), 1., axis=1, inplace=False)
    with pytest.raises(ValueError, match="'values' must be broadcastable to 'indices'"):
        jnp.put_along_axis(A, np.array([[0], [1], [2]]), np.ones(2), axis=1, inplace=False)
