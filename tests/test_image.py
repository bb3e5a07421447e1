"""plax.image: resize and scale_and_translate against JAX 0.10.2's numbers and a NumPy model
of the same resampling (one normalised kernel-weight matrix per axis), under jit, vmap, grad."""
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import image
from plax.image import ResizeMethod
from plax.test_util import check_grads
from tests.helpers import grad_check_defaults

X = (np.arange(12.0, dtype=np.float32).reshape(3, 4)) ** 1.5

# jax.image.resize(X, (2, 6), method, antialias) in JAX 0.10.2
JAX_2x6 = {
    ("linear", True): [[3.0, 3.90881, 5.22788, 6.86887, 8.73591, 10.19269],
                       [17.14214, 19.10488, 21.76896, 24.57426, 27.51124, 29.7469]],
    ("linear", False): [[2.0, 2.77254, 3.92016, 5.42048, 7.16137, 8.52718],
                        [18.97056, 21.00782, 23.76946, 26.66695, 29.69177, 31.99222]],
    ("cubic", True): [[2.09955, 2.8798, 4.27977, 5.87216, 7.94306, 9.32425],
                      [17.56404, 19.47942, 22.57215, 25.4415, 28.84135, 31.0318]],
    ("cubic", False): [[1.10665, 1.72599, 2.89132, 4.31884, 6.22291, 7.50393],
                       [19.75067, 21.73852, 24.94465, 27.91167, 31.41792, 33.67458]],
    ("lanczos3", True): [[1.62586, 2.29141, 3.74059, 5.18435, 7.45032, 8.70244],
                         [17.8868, 19.65808, 23.06512, 25.74033, 29.50143, 31.52697]],
    ("lanczos3", False): [[0.51105, 1.02164, 2.2029, 3.48964, 5.57097, 6.72794],
                          [20.14794, 21.99382, 25.53943, 28.31328, 32.20015, 34.29112]],
    ("lanczos5", True): [[1.32974, 2.25149, 3.4503, 4.94623, 7.07205, 8.52461],
                         [17.83737, 20.10079, 23.15492, 25.96523, 29.412, 31.90025]],
    ("lanczos5", False): [[-0.17894, 0.53245, 1.44057, 2.74346, 4.68323, 5.98534],
                          [20.44327, 22.83073, 26.05662, 29.0015, 32.59148, 35.18742]],
    ("area", False): [[2.66667, 3.53006, 4.39345, 6.7846, 8.21106, 9.63752],
                      [17.75161, 19.7392, 21.72678, 25.98083, 28.23808, 30.49534]],
    ("bicubic-pytorch", True): [[2.09955, 2.8798, 4.27977, 5.87216, 7.94306, 9.32425],
                                [17.56404, 19.47942, 22.57215, 25.4415, 28.84135, 31.0318]],
    ("bicubic-pytorch", False): [[1.17221, 1.82066, 3.1419, 4.40483, 6.45649, 7.81439],
                                 [19.23187, 21.26875, 24.69135, 27.23588, 30.95891, 33.28758]],
}


@pytest.mark.parametrize("method,antialias", list(JAX_2x6))
def test_resize_matches_jax(method, antialias):
    out = image.resize(X, (2, 6), method, antialias=antialias)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, JAX_2x6[method, antialias], rtol=2e-5, atol=2e-5)


# ----- a NumPy model: float64, explicit loops over (input pixel, output pixel) -----

def _keys(a):
    def k(x):
        if x < 1:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0
    return k


def _lanczos(r):
    return lambda x: 1.0 if x <= 1e-3 else (
        0.0 if x > r else r * np.sin(np.pi * x) * np.sin(np.pi * x / r) / (np.pi * x) ** 2)


MODEL_KERNELS = {"linear": lambda x: max(0.0, 1 - x), "cubic": _keys(-0.5),
                 "lanczos3": _lanczos(3), "lanczos5": _lanczos(5)}


def model_weights(m, n, scale, translation, method, antialias):
    w = np.zeros((m, n))
    for j in range(n):
        sample = (j + 0.5 - translation) / scale - 0.5
        if not -0.5 <= sample <= m - 0.5:
            continue
        for i in range(m):
            if method == "area":
                left = (j - translation) / scale
                w[i, j] = max(0.0, min(left + 1 / scale, i + 1) - max(left, i))
            else:
                width = max(1 / scale, 1.0) if antialias else 1.0
                w[i, j] = MODEL_KERNELS[method](abs(sample - i) / width)
        w[:, j] /= w[:, j].sum()
    return w


def model(x, shape, scales, translations, method, antialias, dims=None):
    out = x.astype(np.float64)
    dims = range(x.ndim) if dims is None else dims
    for d, s, t in zip(dims, scales, translations):
        w = model_weights(x.shape[d], shape[d], s, t, method, antialias)
        out = np.moveaxis(np.tensordot(out, w, axes=([d], [0])), -1, d)
    return out


IMG = np.random.default_rng(0).normal(size=(5, 7, 2)).astype(np.float32)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "lanczos5", "area"])
@pytest.mark.parametrize("shape", [(9, 13, 2), (3, 4, 2), (1, 11, 2)])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_matches_the_weight_model(method, shape, antialias):
    scales = [n / m for m, n in zip(IMG.shape, shape)]
    want = model(IMG, shape, scales, [0.0] * 3, method, antialias)
    out = image.resize(IMG, shape, method, antialias=antialias)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "area"])
def test_scale_and_translate_matches_the_model(method):
    scale, translation = np.array([1.7, 0.6], np.float32), np.array([-0.8, 1.3], np.float32)
    out = image.scale_and_translate(IMG, (8, 4, 2), (0, 1), scale, translation, method)
    want = model(IMG, (8, 4, 2), scale.astype(float), translation.astype(float), method, True,
                 dims=(0, 1))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_scale_and_translate_outside_the_input_is_zero():
    out = image.scale_and_translate(np.arange(4.0, dtype=np.float32), (6,), (0,),
                                    jnp.array([1.5]), jnp.array([0.5]), "linear")
    # JAX 0.10.2's values
    np.testing.assert_allclose(out, [0.0, 0.1666666, 0.8333334, 1.5000002, 2.1666667,
                                     2.8333335], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n,want", [(8, [0, 0, 1, 2, 2, 3, 4, 4]), (3, [0, 2, 4])])
def test_nearest_picks_floor_of_the_centre_and_keeps_the_dtype(n, want):
    x = np.arange(5, dtype=np.int32)
    out = image.resize(x, (n,), "nearest")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(image.resize(np.arange(7), (3,), ResizeMethod.NEAREST),
                                  [1, 3, 5])
    assert image.resize(np.ones((3, 4), bool), (5, 2), "nearest").dtype == np.bool_


@pytest.mark.parametrize("dtype,want", [(np.uint8, np.float32), (np.int32, np.float32),
                                        (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
                                        (np.complex64, np.complex64)])
def test_dtypes_promote_to_inexact(dtype, want):
    out = image.resize(np.ones((3, 4), dtype), (5, 2), "linear")
    assert out.dtype == want
    np.testing.assert_allclose(np.asarray(out).astype(np.complex128), np.ones((5, 2)),
                               rtol=1e-2)


def test_identity_and_unchanged_axes():
    np.testing.assert_array_equal(image.resize(IMG, IMG.shape, "lanczos3"), IMG)
    out = image.resize(IMG, (5, 3, 2), "cubic")
    np.testing.assert_allclose(out, model(IMG[None], (1, 5, 3, 2), [1, 1, 3 / 7, 1], [0] * 4,
                                          "cubic", True)[0], rtol=1e-5, atol=1e-5)


def test_resize_method_names_and_values():
    assert [m.value for m in ResizeMethod] == list(range(7))
    assert [m.name for m in ResizeMethod] == ["NEAREST", "LINEAR", "LANCZOS3", "LANCZOS5",
                                              "CUBIC", "CUBIC_PYTORCH", "AREA"]
    names = {"nearest": "NEAREST", "linear": "LINEAR", "bilinear": "LINEAR",
             "trilinear": "LINEAR", "triangle": "LINEAR", "cubic": "CUBIC",
             "bicubic": "CUBIC", "tricubic": "CUBIC", "lanczos3": "LANCZOS3",
             "lanczos5": "LANCZOS5", "cubic-pytorch": "CUBIC_PYTORCH",
             "bicubic-pytorch": "CUBIC_PYTORCH", "area": "AREA"}
    for s, name in names.items():
        assert ResizeMethod.from_string(s) is ResizeMethod[name]
    for bad in ("Linear", "keys", "cubic_pytorch"):
        with pytest.raises(ValueError, match=f'Unknown resize method "{bad}"'):
            ResizeMethod.from_string(bad)


@pytest.mark.parametrize("method", ["nearest", "linear", "lanczos3", "area", "bicubic-pytorch"])
def test_grad_of_resize_wrt_the_image(method):
    for antialias in (True, False):
        check_grads(lambda im: image.resize(im, (3, 10, 2), method, antialias=antialias),
                    (IMG,), order=1, **grad_check_defaults(np.float32))


# (AREA's weights are piecewise linear in the scale with kinks near any point: finite
# differences straddle them, so its gradient is compared with JAX's values below)
@pytest.mark.parametrize("method", ["linear", "lanczos3"])
def test_grad_of_scale_and_translate_wrt_scale_and_translation(method):
    f = lambda im, s, t: image.scale_and_translate(im, (8, 4, 2), (0, 1), s, t, method)
    args = (IMG, np.array([1.7, 0.6], np.float32), np.array([-0.8, 1.3], np.float32))
    check_grads(f, args, order=1, **grad_check_defaults(np.float32))


def test_area_gradient_wrt_scale_and_translation_matches_jax():
    f = lambda s, t: jnp.sum(jnp.sin(image.scale_and_translate(X, (4, 3), (0, 1), s, t, "area")))
    gs, gt = plax.grad(f, argnums=(0, 1))(jnp.array([1.3, 0.7]), jnp.array([0.2, -0.1]))
    np.testing.assert_allclose(gs, [6.947733, -6.403004], rtol=1e-4)  # JAX 0.10.2's values
    np.testing.assert_allclose(gt, [-1.527174, -6.940679], rtol=1e-4)


def test_jit_and_vmap():
    batch = np.stack([IMG, 2 * IMG, -IMG])
    out = plax.vmap(lambda im: image.resize(im, (9, 3, 2), "lanczos3"))(batch)
    want = [image.resize(im, (9, 3, 2), "lanczos3") for im in batch]
    np.testing.assert_allclose(out, np.stack(want), rtol=1e-6, atol=1e-6)
    jitted = plax.jit(lambda im: image.resize(im, (2, 2, 2), "area"))(IMG)
    np.testing.assert_allclose(jitted, image.resize(IMG, (2, 2, 2), "area"), rtol=1e-6)
    scales = np.array([[1.5, 0.5], [0.8, 1.2]], np.float32)
    f = lambda s: image.scale_and_translate(IMG, (6, 5, 2), (0, 1), s, jnp.zeros(2), "cubic")
    np.testing.assert_allclose(plax.vmap(f)(scales), np.stack([f(s) for s in scales]),
                               rtol=1e-6, atol=1e-6)


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(ValueError, match=r"shape must have length equal to the number of "
                                         r"dimensions of x; \(5,\) vs \(3, 4\)"):
        image.resize(np.ones((3, 4)), (5,), "linear")
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values of "
                                        "integer type"):
        image.resize(np.ones((3, 4)), (5, 2.5), "linear")
    with pytest.raises(ValueError, match="Nearest neighbor resampling is not currently "
                                         "supported for scale_and_translate"):
        image.scale_and_translate(np.ones(3), (4,), (0,), jnp.ones(1), jnp.zeros(1), "nearest")
    with pytest.raises(ValueError, match=r"scale and translation must have shape "
                                         r"\(len\(spatial_dims\),\) = \(1,\)"):
        image.scale_and_translate(np.ones((3, 4)), (5, 4), (0,), jnp.ones(2), jnp.ones(1),
                                  "linear")
    with pytest.raises(ValueError, match="dimension 1 is not in spatial_dims"):
        image.scale_and_translate(np.ones((3, 4)), (5, 2), (0,), jnp.ones(1), jnp.ones(1),
                                  "linear")
    with pytest.raises(TypeError, match="method must be a ResizeMethod"):
        image.resize(np.ones((3, 4)), (5, 2), 3)
    with pytest.raises(ValueError, match="shape must be non-negative"):
        image.resize(np.ones((3, 4)), (-1, 2), "linear")


def test_jax_image_resize_under_python_m_plax(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp
        img = jnp.arange(48.0).reshape(4, 4, 3)
        small = jax.jit(lambda im: jax.image.resize(im, (2, 2, 3), method="bilinear"))(img)
        print(small.shape, round(float(small[1, 1, 2]), 4), jax.image.ResizeMethod.LANCZOS3)
    """))
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES="1")
    out = subprocess.run([sys.executable, "-m", "plax", "prog.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["(2,", "2,", "3)", "36.2857", "ResizeMethod.LANCZOS3"]


@pytest.mark.parametrize("method", ["linear", "lanczos3", "cubic", "area"])
def test_resize_under_strict_rank_and_dtype_promotion(method):
    # JAX's own tests run with both strict: the library keeps its ranks explicit
    x = np.arange(4 * 6 * 3, dtype=np.float32).reshape(4, 6, 3)
    want = plax.image.resize(x, (8, 3, 3), method)
    with plax.numpy_rank_promotion("raise"), plax.numpy_dtype_promotion("strict"):
        got = plax.image.resize(x, (8, 3, 3), method)
    np.testing.assert_array_equal(got, want)
    assert got.shape == (8, 3, 3)
