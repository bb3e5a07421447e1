"""plax.numpy.linalg's solves and determinants against numpy.linalg: solve (NumPy 2's
vector/matrix rule, broadcast batches), inv, det, slogdet (both methods); singular inputs
as JAX (inf/NaN, no exception), derivatives (det's adjugate at singular matrices), vmap, jit
and the errors for bad input. Factorisations: test_linalg_decompositions.py; norms, pinv,
lstsq and the rest: test_linalg_more.py."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads

from helpers import C64, F32, rand, well_conditioned, x64_for, linalg_close as _close

L = jnp.linalg
F64 = np.dtype(np.float64)



# --- solve and inv --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,a_shape,b_shape", [
    (F32, (3, 3), (3,)), (F32, (3, 3), (3, 2)), (F32, (2, 3, 3, 3), (3, 1)),
    (F32, (2, 1, 3, 3), (4, 3, 2)), (F32, (2, 3, 3), (3,)), (F64, (2, 3, 3, 3), (3, 2)),
    (F64, (3, 3), (3,)), (C64, (2, 3, 3), (3,)), (C64, (2, 1, 3, 3), (4, 3, 2))])
def test_solve_matches_numpy(dtype, a_shape, b_shape):
    with x64_for(dtype):
        a, b = well_conditioned(a_shape, dtype), rand(b_shape, dtype, seed=1)
        got = L.solve(a, b)
        assert got.dtype == dtype
        _close(got, np.linalg.solve(a, b), dtype)


def test_solve_promotes_integers_and_singular_gives_inf_or_nan():
    got = L.solve(np.eye(3, dtype=np.int32), np.arange(3))
    assert got.dtype == F32
    np.testing.assert_array_equal(np.asarray(got), [0, 1, 2])
    out = np.asarray(L.solve(np.array([[1.0, 2.0], [2.0, 4.0]], F32), np.ones(2, F32)))
    assert not np.isfinite(out).all()


@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_inv_matches_numpy_batched(dtype):
    with x64_for(dtype):
        a = well_conditioned((2, 3, 4, 4), dtype)
        got = L.inv(a)
        assert got.dtype == dtype
        _close(got, np.linalg.inv(a), dtype)


def test_inv_of_singular_matrix_is_inf_not_an_error():
    out = np.asarray(L.inv(np.array([[1.0, 2.0], [2.0, 4.0]], F32)))
    assert np.isinf(out).any() or np.isnan(out).any()


def test_empty_matrices():
    assert L.inv(np.zeros((0, 0), F32)).shape == (0, 0)
    np.testing.assert_array_equal(np.asarray(L.det(np.zeros((2, 0, 0), F32))), [1.0, 1.0])
    assert L.solve(np.zeros((0, 0), F32), np.zeros(0, F32)).shape == (0,)
    assert L.cholesky(np.zeros((0, 0), F32)).shape == (0, 0)
    sign, logdet = L.slogdet(np.zeros((0, 0), F32))
    assert float(sign) == 1.0 and float(logdet) == 0.0


def test_solve_and_inv_gradients():
    with plax.enable_x64():
        a, b = well_conditioned((3, 3), F64), rand((3, 2), F64, seed=1)
        check_grads(L.solve, (a, b), order=1)
        check_grads(L.solve, (a, b), order=2, modes=("fwd",))
        check_grads(L.inv, (well_conditioned((2, 3, 3), F64),), order=1)


def test_solve_vmap_and_jit():
    a, b = well_conditioned((4, 3, 3), F32), rand((4, 3), F32, seed=1)
    got = plax.vmap(L.solve)(a, b)
    _close(got, np.linalg.solve(a, b[..., None])[..., 0], F32)
    _close(plax.vmap(L.solve, in_axes=(0, None))(a, b[0]), np.linalg.solve(a, b[0]), F32)
    _close(plax.jit(L.inv)(a), np.linalg.inv(a), F32)


def test_solve_errors():
    with pytest.raises(ValueError, match="left hand array must be at least two dimensional"):
        L.solve(np.ones(3, F32), np.ones(3, F32))
    with pytest.raises(ValueError, match="core dimension 'm'"):
        L.solve(np.ones((2, 3), F32), np.ones(3, F32))
    with pytest.raises(ValueError, match="core dimension 'm'"):
        L.solve(np.eye(3, dtype=F32), np.ones(4, F32))
    with pytest.raises(ValueError, match="core dimension 'm'"):
        L.solve(np.eye(3, dtype=F32), np.ones((4, 2), F32))
    with pytest.raises(ValueError, match="Invalid shapes for solve"):
        L.solve(np.ones((2, 3, 3), F32), np.ones((2, 3), F32))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        L.solve(np.ones((2, 3, 3), F32), np.ones((5, 3, 2), F32))
    with pytest.raises(ValueError, match=r"Argument to inv must have shape \[..., n, n\]"):
        L.inv(np.ones((2, 3), F32))
    with pytest.raises(ValueError, match=r"Argument to inv must have shape \[..., n, n\]"):
        L.inv(np.ones(3, F32))


# --- det and slogdet ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_det_and_slogdet_match_numpy(dtype):
    with x64_for(dtype):
        a = rand((2, 3, 4, 4), dtype)
        det = L.det(a)
        assert det.dtype == dtype
        _close(det, np.linalg.det(a), dtype)
        want_sign, want_log = np.linalg.slogdet(a)
        for method in (None, "lu", "qr"):
            res = L.slogdet(a, method=method)
            assert type(res).__name__ == "SlogdetResult" and res._fields == ("sign", "logabsdet")
            assert res.sign.dtype == dtype and res.logabsdet.dtype == np.finfo(dtype).dtype
            _close(res.sign, want_sign, dtype)
            _close(res.logabsdet, want_log, dtype)


def test_det_of_singular_and_integer_matrices():
    assert float(L.det(np.array([[1.0, 2.0], [2.0, 4.0]], F32))) == 0.0
    d = L.det(np.array([[2, 1], [1, 3]]))
    assert d.dtype == F32 and float(d) == pytest.approx(5.0)
    sign, logdet = L.slogdet(np.array([[1.0, 2.0], [2.0, 4.0]], F32))
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    sign, logdet = L.slogdet(np.zeros((3, 3), F32), method="qr")
    assert float(sign) == 0.0 and float(logdet) == -np.inf


# grad det = adjugate transposed, also at singular matrices (JAX 0.10.2's values).
SINGULAR = [
    ([[0.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [-1.0, 0.0]]),
    ([[0.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 0.0]]),
    ([[1.0, 2.0], [2.0, 4.0]], [[4.0, -2.0], [-2.0, 1.0]]),
    ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],
     [[-3.0, 6.0, -3.0], [6.0, -12.0, 6.0], [-3.0, 6.0, -3.0]]),
    ([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
     [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
    ([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]],
     [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]),
    ([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.zeros((3, 3))),
]


@pytest.mark.parametrize("a,want", SINGULAR)
def test_det_gradient_is_the_adjugate_at_singular_matrices(a, want):
    got = plax.grad(L.det)(np.array(a, F32))
    np.testing.assert_allclose(np.asarray(got), want, atol=2e-5)


def test_det_gradient_batched_and_under_vmap():
    a = np.stack([np.array(a, F32) for a, _ in SINGULAR[:3]])
    want = np.stack([np.array(w, F32) for _, w in SINGULAR[:3]])
    np.testing.assert_allclose(np.asarray(plax.grad(lambda x: L.det(x).sum())(a)), want,
                               atol=2e-5)
    np.testing.assert_allclose(np.asarray(plax.vmap(plax.grad(L.det))(a)), want, atol=2e-5)


def test_det_and_slogdet_gradients():
    with plax.enable_x64():
        a = rand((3, 3), F64)
        check_grads(L.det, (a,), order=1)
        check_grads(L.det, (a,), order=2, modes=("rev",))
        check_grads(L.det, (rand((2, 2, 2), np.complex128),), order=1)
        check_grads(lambda a: L.slogdet(a, method="qr").logabsdet, (a,), order=1)
        check_grads(lambda a: tuple(L.slogdet(a)), (rand((3, 3), np.complex128),), order=1)


def test_det_errors():
    with pytest.raises(ValueError, match=r"Argument to _det\(\) must have shape \[..., n, n\]"):
        L.det(np.ones((2, 3), F32))
    with pytest.raises(ValueError, match=r"Argument to slogdet\(\) must have shape"):
        L.slogdet(np.ones(3, F32))
    with pytest.raises(ValueError, match="Unknown slogdet method 'foo'"):
        L.slogdet(np.eye(2, dtype=F32), method="foo")
