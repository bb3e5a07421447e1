"""plax.scipy.interpolate.RegularGridInterpolator against scipy.interpolate, under jit, vmap
(it is a pytree) and grad."""
import numpy as np
import pytest
import scipy.interpolate as osp_interpolate

import plax
import plax.numpy as jnp
from plax.scipy.interpolate import RegularGridInterpolator
from plax.test_util import check_grads
from tests.helpers import grad_check_defaults

POINTS = (np.array([1.0, 2.0, 4.0]), np.array([0.0, 1.0, 3.0, 6.0]))
VALUES = np.arange(12.0).reshape(3, 4) ** 2
QUERY = np.random.default_rng(0).uniform(-1, 7, size=(20, 2))  # some outside the grid


@pytest.mark.parametrize("method", ["linear", "nearest"])
@pytest.mark.parametrize("fill_value", [np.nan, None, -1.0])
def test_matches_scipy(method, fill_value):
    out = RegularGridInterpolator(POINTS, VALUES, method=method, fill_value=fill_value)(QUERY)
    want = osp_interpolate.RegularGridInterpolator(POINTS, VALUES, method=method,
                                                   bounds_error=False,
                                                   fill_value=fill_value)(QUERY)
    assert out.shape == (20,) and out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4, equal_nan=True)


def test_trailing_value_dimensions_query_shapes_and_tuple_points():
    values = np.arange(24.0).reshape(3, 4, 2)
    interp = RegularGridInterpolator(POINTS, values)
    out = interp(QUERY.reshape(4, 5, 2))
    want = osp_interpolate.RegularGridInterpolator(POINTS, values, bounds_error=False)(QUERY)
    assert out.shape == (4, 5, 2)
    np.testing.assert_allclose(out.reshape(20, 2), want, rtol=1e-5, equal_nan=True)
    interp = RegularGridInterpolator(POINTS, VALUES)
    np.testing.assert_allclose(interp((np.array([1.5, 0.0, 5.0]), np.array([2.0, 3.0, 1.0]))),
                               [16.5, np.nan, np.nan], rtol=1e-6)  # JAX 0.10.2's values
    # one grid axis of two: the second axis of values is carried along
    np.testing.assert_allclose(RegularGridInterpolator(POINTS[:1], VALUES)(np.array([1.5, 2.0])),
                               [[8.0, 13.0, 20.0, 29.0], [16.0, 25.0, 36.0, 49.0]], rtol=1e-6)
    # integer values promote to float; the method can be chosen per call
    ints = RegularGridInterpolator(POINTS, VALUES.astype(int), fill_value=-1)
    np.testing.assert_array_equal(ints(np.array([[0.0, -1.0], [1.5, 0.5]]), method="nearest"),
                                  [-1.0, 0.0])


def test_jit_vmap_and_grad():
    interp = RegularGridInterpolator(POINTS, VALUES)
    inside = QUERY[np.all((QUERY >= [1, 0]) & (QUERY <= [4, 6]), axis=1)]
    jitted = plax.jit(lambda r, x: r(x))(interp, inside)  # the interpolator crosses jit
    np.testing.assert_allclose(jitted, interp(inside), rtol=1e-6)
    out = plax.vmap(lambda x: interp(x))(inside.reshape(-1, 1, 2))
    np.testing.assert_allclose(out[:, 0], interp(inside), rtol=1e-6)
    # linear in the values; smooth in the query point inside a cell
    check_grads(lambda v: RegularGridInterpolator(POINTS, v)(inside), (VALUES,), order=1,
                **grad_check_defaults(np.float32))
    check_grads(lambda x: interp(x), (np.array([[1.3, 0.4], [3.1, 4.4]]),), order=1,
                **grad_check_defaults(np.float32))
    grad = plax.grad(lambda v: jnp.sum(RegularGridInterpolator(POINTS, v)(
        np.array([[1.5, 0.5]]))))(VALUES)
    np.testing.assert_allclose(grad[:2, :2], 0.25)


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(ValueError, match="method 'cubic' is not defined"):
        RegularGridInterpolator(POINTS, VALUES, method="cubic")
    with pytest.raises(NotImplementedError, match="`bounds_error` takes no effect under JIT"):
        RegularGridInterpolator(POINTS, VALUES, bounds_error=True)
    with pytest.raises(ValueError, match="sample points xi have dimension 3, but this "
                                         "RegularGridInterpolator has dimension 2"):
        RegularGridInterpolator(POINTS, VALUES)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="fill_value must be either 'None' or of a type "
                                         "compatible with values"):
        RegularGridInterpolator(POINTS, VALUES, fill_value=1j)
    with pytest.raises(ValueError, match="there are 2 point arrays, but values has 1 "
                                         "dimensions"):
        RegularGridInterpolator(POINTS, np.ones(3))
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        RegularGridInterpolator(POINTS, VALUES)([1.5, 2.0])
    with pytest.raises(ValueError, match="points in dimension 1 must be strictly ascending"):
        RegularGridInterpolator((POINTS[0], POINTS[1][::-1]), VALUES)
    # a traced grid cannot be checked, and is accepted
    out = plax.jit(lambda g: RegularGridInterpolator((g, POINTS[1]), VALUES)(
        np.array([[1.5, 0.5]])))(POINTS[0])
    np.testing.assert_allclose(out, [10.5])
