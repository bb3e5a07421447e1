"""plax.numpy.linalg beyond solves and factorisations, against numpy.linalg: norm (every
vector and matrix ord, axis, keepdims), vector_norm / matrix_norm, pinv (rtol/rcond,
hermitian, its custom JVP), lstsq (rcond, numpy_resid), matrix_rank, matrix_power,
tensorinv / tensorsolve, multi_dot, cond, and the Array API names (cross, outer, matmul,
vecdot, matrix_transpose, tensordot, trace, diagonal); derivatives, vmap, jit, errors."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads

from helpers import C64, F32, rand, well_conditioned, x64_for, linalg_close as _close

L = jnp.linalg
F64 = np.dtype(np.float64)
INF = np.inf



# --- norms ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, C64])
def test_vector_norms_match_numpy(dtype):
    x = rand((2, 5), dtype)
    x[0, 1] = 0
    for ord in (None, 0, 1, -1, 2, -2, INF, -INF, 3, 0.5):
        got = L.norm(x, ord=ord, axis=1)
        assert got.dtype == F32, (ord, got.dtype)
        with np.errstate(divide="ignore"):  # negative ords meet the zero entry
            want = np.linalg.norm(x, ord=ord, axis=1)
        _close(got, want)
        _close(L.norm(x, ord=ord, axis=-1, keepdims=True), want[:, None])
    _close(L.norm(x[1]), np.linalg.norm(x[1]))


@pytest.mark.parametrize("dtype", [F32, C64])
def test_matrix_norms_match_numpy(dtype):
    x = rand((2, 3, 4), dtype)
    for ord in (None, "fro", "nuc", 1, -1, 2, -2, INF, -INF):
        for axis in ((1, 2), (2, 0)):
            _close(L.norm(x, ord=ord, axis=axis), np.linalg.norm(x, ord=ord, axis=axis))
        _close(L.norm(x, ord=ord, axis=(1, 2), keepdims=True),
               np.linalg.norm(x, ord=ord, axis=(1, 2), keepdims=True))
        _close(L.norm(x[0], ord=ord), np.linalg.norm(x[0], ord=ord))


def test_norm_of_whole_arrays_integers_and_empty():
    x = np.arange(24.0, dtype=F32).reshape(2, 3, 4) - 10
    _close(L.norm(x), np.linalg.norm(x))
    _close(L.norm(x, keepdims=True), np.linalg.norm(x, keepdims=True))
    got = L.norm(np.arange(4))
    assert got.dtype == F32 and float(got) == pytest.approx(np.sqrt(14))
    assert float(L.norm(np.zeros((0,), F32))) == 0.0
    assert float(L.norm(np.zeros((0, 3), F32), 1)) == 0.0


def test_vector_and_matrix_norm():
    x = np.arange(24.0, dtype=F32).reshape(2, 3, 4) - 10
    for ord in (2, 1, INF, -INF, 0, 3):
        _close(L.vector_norm(x, ord=ord), np.linalg.vector_norm(x, ord=ord))
        _close(L.vector_norm(x, axis=(0, 1), ord=ord),
               np.linalg.vector_norm(x, axis=(0, 1), ord=ord))
        _close(L.vector_norm(x, axis=(0, 2), ord=ord, keepdims=True),
               np.linalg.vector_norm(x, axis=(0, 2), ord=ord, keepdims=True))
    _close(L.vector_norm(x, axis=1, keepdims=True), np.linalg.vector_norm(x, axis=1, keepdims=True))
    for ord in ("fro", "nuc", 1, INF, -2):
        _close(L.matrix_norm(x, ord=ord), np.linalg.matrix_norm(x, ord=ord))
    _close(L.matrix_norm(x, keepdims=True), np.linalg.matrix_norm(x, keepdims=True))


def test_norm_gradients():
    with plax.enable_x64():
        x = rand((3, 4), F64)
        for ord in (None, 1, INF, 3):
            check_grads(lambda v: L.norm(v, ord=ord), (x[0],), order=1)
        for ord in ("fro", "nuc", 2):
            check_grads(lambda m: L.norm(m, ord=ord), (x,), order=1)
    # At zero the 2-norm's derivative is NaN, as JAX's (sqrt at 0).
    assert np.isnan(np.asarray(plax.grad(L.norm)(np.zeros(3, F32)))).all()


def test_norm_errors():
    with pytest.raises(ValueError, match="Invalid order 'fro' for vector norm"):
        L.norm(np.ones(3, F32), ord="fro")
    with pytest.raises(ValueError, match="Invalid order '3' for matrix norm"):
        L.norm(np.ones((2, 3), F32), ord=3)
    with pytest.raises(ValueError, match="Invalid order 'foo' for matrix norm"):
        L.norm(np.ones((2, 3), F32), ord="foo")
    with pytest.raises(ValueError, match="Improper number of axes for norm"):
        L.norm(np.ones((2, 2, 2), F32), ord=2)
    with pytest.raises(ValueError, match="Improper number of axes for norm"):
        L.norm(np.ones((2, 3), F32), axis=(0, 1, 1))
    with pytest.raises(ValueError, match="Invalid order 'fro' for vector norm"):
        L.vector_norm(np.ones((2, 2), F32), ord="fro")
    with pytest.raises(ValueError, match="out of bounds"):
        L.matrix_norm(np.ones(3, F32))


# --- pinv, lstsq, matrix_rank, cond -------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_pinv_matches_numpy(dtype):
    with x64_for(dtype):
        a = rand((2, 3, 4, 3), dtype)
        got = L.pinv(a)
        assert got.dtype == dtype
        _close(got, np.linalg.pinv(a), dtype)
        low_rank = (rand((5, 2), dtype) @ rand((2, 4), dtype, seed=1)).astype(dtype)
        default = 10 * 5 * np.finfo(dtype).eps  # JAX's default rtol (NumPy's is 1e-15)
        _close(L.pinv(low_rank), np.linalg.pinv(low_rank, rtol=default), dtype)
        _close(L.pinv(low_rank, rtol=0.5), np.linalg.pinv(low_rank, rtol=0.5), dtype)
        _close(L.pinv(low_rank, rcond=0.5), np.linalg.pinv(low_rank, rtol=0.5), dtype)


def test_pinv_hermitian_int_and_empty():
    a = np.array([[2.0, 1.0], [1.0, -3.0]], F32)
    _close(L.pinv(a, hermitian=True), np.linalg.pinv(a, hermitian=True))
    got = L.pinv(np.ones((3, 4), np.int32))
    assert got.dtype == F32
    _close(got, np.linalg.pinv(np.ones((3, 4))))
    assert L.pinv(np.zeros((0, 3), F32)).shape == (3, 0)
    with pytest.raises(ValueError, match="only one of rtol and rcond may be specified"):
        L.pinv(a, rtol=1e-3, rcond=1e-3)


def test_pinv_gradient():
    with plax.enable_x64():
        check_grads(L.pinv, (rand((4, 3), F64),), order=1)
        check_grads(L.pinv, (rand((2, 3), F64),), order=1)
    # At a rank-deficient matrix the rule holds with the rank fixed (JAX 0.10.2's values).
    g = plax.grad(lambda a: L.pinv(a).sum())(np.array([[1.0, 2.0], [2.0, 4.0]], F32))
    np.testing.assert_allclose(np.asarray(g), [[0.0048, -0.0144], [-0.0144, -0.0768]],
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shape,b_shape", [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 5), (3,))])
def test_lstsq_matches_numpy(shape, b_shape):
    a, b = rand(shape), rand(b_shape, seed=1)
    x, resid, rank, s = L.lstsq(a, b)
    wx, wresid, wrank, ws = np.linalg.lstsq(a, b)
    _close(x, wx)
    assert rank.dtype == np.int32 and int(rank) == wrank
    _close(s, ws)
    assert resid.shape == ((2,) if len(b_shape) == 2 else (1,))
    np_x, np_resid, _, _ = L.lstsq(a, b, numpy_resid=True)
    _close(np_x, wx)
    _close(np_resid, wresid)


def test_lstsq_rank_deficient_and_rcond():
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]], F32)
    b = np.ones(3, F32)
    x, resid, rank, _ = L.lstsq(a, b)
    wx, _, wrank, _ = np.linalg.lstsq(a, b)
    _close(x, wx)
    assert int(rank) == wrank == 1
    np.testing.assert_allclose(np.asarray(resid), [0.42857143], rtol=1e-5)
    assert L.lstsq(a, b, numpy_resid=True)[1].shape == (0,)
    full = rand((4, 3))
    assert int(L.lstsq(full, np.ones(4, F32), rcond=0.99)[2]) == 1
    with pytest.raises(plax.errors.ConcretizationTypeError, match="numpy_resid"):
        plax.jit(lambda a, b: L.lstsq(a, b, numpy_resid=True))(a, b)


def test_lstsq_gradient_and_errors():
    with plax.enable_x64():
        a, b = rand((5, 3), F64), rand((5, 2), F64, seed=1)
        check_grads(lambda a, b: L.lstsq(a, b)[0], (a, b), order=1, atol=1e-5, rtol=1e-5)
    with pytest.raises(TypeError, match="1-dimensional array given. Array must be two-dimensional"):
        L.lstsq(np.ones(3, F32), np.ones(3, F32))
    with pytest.raises(TypeError, match="3-dimensional array given"):
        L.lstsq(np.ones((2, 3, 3), F32), np.ones((2, 3), F32))
    with pytest.raises(ValueError, match="Leading dimensions of input arrays must match"):
        L.lstsq(np.ones((2, 3), F32), np.ones(3, F32))


def test_matrix_rank():
    a = rand((2, 5, 2)) @ rand((2, 2, 4), seed=1)
    got = L.matrix_rank(a)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), [2, 2])
    np.testing.assert_array_equal(np.asarray(L.matrix_rank(np.ones((2, 3, 4), F32))), [1, 1])
    # rtol is an absolute threshold, as in JAX (NumPy scales it by the largest value).
    assert int(L.matrix_rank(np.diag([10.0, 5.0, 0.5]).astype(F32), rtol=0.1)) == 3
    assert int(L.matrix_rank(np.diag([10.0, 5.0, 0.5]).astype(F32), tol=1.0)) == 2
    assert int(L.matrix_rank(np.diag([10.0, -5.0, 0.0]).astype(F32), hermitian=True)) == 2
    assert int(L.matrix_rank(np.array([0.0, 2.0], F32))) == 1
    assert int(L.matrix_rank(np.zeros(2, F32))) == 0


def test_cond_matches_numpy():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], F32)
    for p in (None, "fro", "nuc", 1, -1, 2, -2, INF, -INF):
        _close(L.cond(a, p), np.linalg.cond(a, p))
    batch = well_conditioned((3, 4, 4))
    _close(L.cond(batch), np.linalg.cond(batch))
    _close(L.cond(rand((4, 3))), np.linalg.cond(rand((4, 3))))
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], F32)
    assert float(L.cond(singular, 1)) == np.inf and float(L.cond(np.zeros((2, 2), F32), -2)) == np.inf
    with pytest.raises(ValueError, match="input array must be at least 2D"):
        L.cond(np.ones(3, F32))
    with pytest.raises(ValueError, match="for p=1, array must be square"):
        L.cond(np.ones((2, 3), F32), p=1)


# --- powers, tensor solves, products -------------------------------------------------------------
def test_matrix_power():
    a = rand((2, 3, 3))
    for n in (0, 1, 2, 5, -1, -3):
        _close(L.matrix_power(a, n), np.linalg.matrix_power(a.astype(np.float64), n).astype(F32))
    got = L.matrix_power(np.array([[1, 1], [0, 1]]), 5)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), [[1, 5], [0, 1]])
    assert L.matrix_power(np.eye(2, dtype=np.int32), -2).dtype == F32
    assert L.matrix_power(np.ones((2, 2), np.int32), 0).dtype == np.int32
    with plax.enable_x64():
        check_grads(lambda x: L.matrix_power(x, 3), (rand((3, 3), F64),), order=1)
    with pytest.raises(TypeError, match="exponent must be an integer, got 2.5"):
        L.matrix_power(np.eye(2), 2.5)
    with pytest.raises(TypeError, match="Last 2 dimensions of the array must be square"):
        L.matrix_power(np.ones((2, 3)), 2)


def test_tensorinv_and_tensorsolve():
    a = well_conditioned((6, 6)).reshape(2, 3, 6)
    _close(L.tensorinv(a, ind=2), np.linalg.tensorinv(a, ind=2))
    b = rand((2, 3), seed=1)
    _close(L.tensorsolve(a, b), np.linalg.tensorsolve(a, b))
    c = np.moveaxis(well_conditioned((6, 6)).reshape(6, 2, 3), 0, 2)  # (2, 3, 6)
    _close(L.tensorsolve(c, np.ones(6, F32), axes=(0, 1)),
           np.linalg.tensorsolve(c, np.ones(6, F32), axes=(0, 1)))
    with pytest.raises(ValueError, match="ind must be a positive integer; got ind=0"):
        L.tensorinv(a, 0)
    with pytest.raises(ValueError, match="tensorinv is only possible when the product"):
        L.tensorinv(a, 1)
    with pytest.raises(ValueError, match="leading shape of a must match shape of b"):
        L.tensorsolve(a, np.ones((3, 2), F32))
    with pytest.raises(ValueError, match=r"prod\(a.shape\[:b.ndim\]\) == prod"):
        L.tensorsolve(np.ones((2, 3, 5), F32), np.ones((2, 3), F32))


def test_multi_dot():
    arrays = [rand((3,)), rand((3, 4), seed=1), rand((4, 5), seed=2), rand((5,), seed=3)]
    for chain in (arrays, arrays[1:], arrays[:-1], arrays[1:3]):
        _close(L.multi_dot(chain), np.linalg.multi_dot(chain))
    with pytest.raises(ValueError, match="input arrays must all be two-dimensional"):
        L.multi_dot([np.ones((2, 3)), np.ones((2, 3, 4)), np.ones(4)])


def test_array_api_names():
    x = rand((2, 3, 4))
    _close(L.matrix_transpose(x), np.swapaxes(x, -1, -2))
    _close(L.matmul(x, np.swapaxes(x, -1, -2)), x @ np.swapaxes(x, -1, -2))
    _close(L.vecdot(x, x[0, 0]), np.linalg.vecdot(x, x[0, 0]))
    _close(L.tensordot(x, np.ones((3, 4), F32)), np.linalg.tensordot(x, np.ones((3, 4))))
    _close(L.tensordot(x, np.ones((4, 2), F32), axes=1),
           np.linalg.tensordot(x, np.ones((4, 2)), axes=1))
    _close(L.trace(x, offset=1), np.linalg.trace(x, offset=1))
    assert L.trace(np.ones((2, 2, 2), np.int8), dtype=np.int32).dtype == np.int32
    _close(L.diagonal(x, offset=-1), np.linalg.diagonal(x, offset=-1))
    _close(L.outer(x[0, 0], x[0, 1]), np.linalg.outer(x[0, 0], x[0, 1]))
    v = rand((2, 3), seed=1)
    _close(L.cross(v, v[::-1]), np.linalg.cross(v, v[::-1]))
    _close(L.cross(v.T, v[0][:, None], axis=0), np.linalg.cross(v.T, v[0][:, None], axis=0))
    with pytest.raises(ValueError, match="matrix_transpose"):
        L.matrix_transpose(np.ones(3, F32))
    with pytest.raises(ValueError, match=r"must be \(arrays of\) 3-dimensional vectors"):
        L.cross(np.ones(2, F32), np.ones(2, F32))
    with pytest.raises(ValueError, match="Input arrays must be one-dimensional"):
        L.outer(np.ones((2, 2), F32), np.ones(2, F32))
    with pytest.raises(ValueError, match="out of bounds"):
        L.trace(np.ones(3, F32))
    with pytest.raises(ValueError, match="at least two dimensions"):
        L.diagonal(np.ones(3, F32))


def test_vmap_and_jit():
    a = rand((3, 4, 2))
    _close(plax.vmap(L.pinv)(a), np.linalg.pinv(a))
    _close(plax.vmap(lambda m: L.norm(m, "nuc"))(a), np.linalg.norm(a, "nuc", axis=(1, 2)))
    _close(plax.jit(lambda m: L.norm(m, 2, axis=(1, 2)))(a), np.linalg.norm(a, 2, axis=(1, 2)))
    _close(plax.vmap(lambda m: L.matrix_power(m, 3))(well_conditioned((3, 2, 2))),
           np.linalg.matrix_power(well_conditioned((3, 2, 2)), 3))
