"""plax.scipy.ndimage.map_coordinates against scipy.ndimage (JAX's 'constant' and 'wrap' are
SciPy's 'grid-constant' and 'grid-wrap'), under jit, vmap and grad."""
import numpy as np
import pytest
import scipy.ndimage as osp_ndimage

import plax
import plax.numpy as jnp
from plax.scipy.ndimage import map_coordinates
from plax.test_util import check_grads
from tests.helpers import grad_check_defaults

# plax/JAX mode -> the SciPy mode that computes the same thing
SCIPY_MODE = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap",
              "mirror": "mirror", "reflect": "reflect"}
RNG = np.random.default_rng(0)
IMG = RNG.normal(size=(5, 6)).astype(np.float32)
# coordinates well outside the image on both sides, none at a half-integer (where order 0's
# rounding rule, half away from zero, is SciPy's choice too but its float rounding is not)
COORDS = [RNG.uniform(-9, 14, size=(7, 3)).astype(np.float32) for _ in range(2)]


@pytest.mark.parametrize("mode", list(SCIPY_MODE))
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("shape", [(5, 6), (1, 4), (2, 3)])
def test_matches_scipy(mode, order, shape):
    img = IMG[:shape[0], :shape[1]]
    out = map_coordinates(img, COORDS, order, mode=mode, cval=1.5)
    want = osp_ndimage.map_coordinates(img.astype(np.float64), np.stack(COORDS), order=order,
                                       mode=SCIPY_MODE[mode], cval=1.5)
    assert out.shape == (7, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", list(SCIPY_MODE))
def test_integer_input_rounds_and_keeps_its_dtype(mode):
    img = np.arange(-6, 18, dtype=np.int32).reshape(4, 6)
    coords = [np.array([0.25, 1.6, -2.2, 5.1]), np.array([0.5, 2.4, 7.9, -3.3])]
    out = map_coordinates(img, coords, 1, mode=mode, cval=2)
    assert out.dtype == np.int32
    want = osp_ndimage.map_coordinates(img.astype(np.float64), np.stack(coords), order=1,
                                       mode=SCIPY_MODE[mode], cval=2)
    np.testing.assert_array_equal(out, np.sign(want) * np.floor(np.abs(want) + 0.5))  # half away


def test_jax_docstring_example_and_one_dimension():
    x = jnp.arange(12.0).reshape(3, 4)
    out = map_coordinates(x, [jnp.array([0.5, 1.5]), jnp.array([1.5, 2.5])], order=1)
    np.testing.assert_allclose(out, [3.5, 8.5])
    np.testing.assert_allclose(map_coordinates(np.arange(4.0), [np.array([-1.0, 4.0])], 1,
                                               mode="wrap"), [3.0, 0.0])
    # integer results round half away from zero (JAX's rule, not NumPy's half to even)
    np.testing.assert_array_equal(map_coordinates(np.array([1, 2, -1, -2]),
                                                  [np.array([0.5, 2.5])], 1), [2, -2])
    # order 0 takes the nearest pixel, halves away from zero
    np.testing.assert_array_equal(map_coordinates(np.arange(4.0), [np.array([0.5, 1.5, 2.49])],
                                                  0), [1.0, 2.0, 2.0])


def test_grad_jit_and_vmap():
    f = lambda img, c0, c1: map_coordinates(img, [c0, c1], 1, mode="reflect")
    c0, c1 = np.array([0.3, 2.6, 4.2]), np.array([1.2, -0.7, 3.9])
    check_grads(f, (IMG, c0.astype(np.float32), c1.astype(np.float32)), order=1,
                **grad_check_defaults(np.float32))
    np.testing.assert_allclose(plax.jit(f)(IMG, c0, c1), f(IMG, c0, c1), rtol=1e-6)
    imgs = np.stack([IMG, -2 * IMG])
    out = plax.vmap(lambda im: map_coordinates(im, COORDS, 1, mode="mirror"))(imgs)
    np.testing.assert_allclose(out, [map_coordinates(im, COORDS, 1, mode="mirror")
                                     for im in imgs], rtol=1e-6)


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(ValueError, match=r"coordinates must be a sequence of length "
                                         r"input.ndim, but 1 != 2"):
        map_coordinates(IMG, [np.zeros(3)], 1)
    with pytest.raises(NotImplementedError, match="does not yet support mode 'grid-wrap'"):
        map_coordinates(IMG, COORDS, 1, mode="grid-wrap")
    with pytest.raises(NotImplementedError, match="currently requires order<=1"):
        map_coordinates(IMG, COORDS, 3)
    with pytest.raises(ValueError, match="coordinate arrays must have one shape"):
        map_coordinates(IMG, [np.zeros(3), np.zeros(4)], 1)
