"""plax.numpy.fft against numpy.fft: every function, n/s cropping and padding, axes (negative,
reordered, more than three), every norm, dtypes (x64 too), errors with JAX's messages,
derivatives, vmap and jit."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
import plax.numpy.fft as jfft
from plax.test_util import check_grads

from helpers import C64, F32, check, check_vmap, rand

C128, F64 = np.dtype(np.complex128), np.dtype(np.float64)
NORMS = [None, "backward", "ortho", "forward"]
REAL_IN = {"rfft", "rfft2", "rfftn", "ihfft"}
REAL_OUT = {"irfft", "irfft2", "irfftn", "hfft"}

# (function, input shape, keyword arguments)
CASES = [
    ("fft", (8,), {}),
    ("fft", (3, 5), {"n": 8, "axis": 0}),           # padded, along axis 0
    ("ifft", (2, 7), {"n": 4}),                      # cropped
    ("ifft", (3, 4, 5), {"axis": -2}),
    ("rfft", (7,), {}),
    ("rfft", (2, 6), {"n": 9, "axis": -2}),
    ("irfft", (5,), {}),
    ("irfft", (3, 4), {"n": 7, "axis": 0}),
    ("hfft", (2, 5), {}),
    ("hfft", (4,), {"n": 5}),
    ("ihfft", (2, 7), {}),
    ("ihfft", (6,), {"n": 4}),
    ("fft2", (2, 3, 4), {}),
    ("fft2", (4, 5), {"s": (3, 7), "axes": (1, 0)}),
    ("ifft2", (3, 4, 2), {"axes": (0, -1)}),
    ("rfft2", (2, 4, 6), {}),
    ("rfft2", (5, 3), {"s": (4, 5)}),
    ("irfft2", (2, 4, 4), {}),
    ("irfft2", (4, 3), {"s": (5, 5), "axes": (-1, -2)}),
    ("fftn", (2, 3, 4), {}),
    ("fftn", (2, 3, 4), {"s": (5, 2)}),              # the last len(s) axes
    ("ifftn", (3, 4, 5), {"axes": (2, 0)}),
    ("rfftn", (3, 4, 5), {}),
    ("rfftn", (3, 4, 5), {"s": (4, 6), "axes": (0, 2)}),
    ("irfftn", (2, 3, 4), {}),
    ("irfftn", (2, 3, 4), {"s": (3, 5), "axes": (2, 1)}),
]


def _input(name, shape, dtype=None, seed=0):
    real = name in REAL_IN
    return rand(shape, dtype or (F32 if real else C64), seed=seed)


def _want_dtype(name, wide=False):
    if name in REAL_OUT:
        return F64 if wide else F32
    return C128 if wide else C64


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name, shape, kw", CASES, ids=lambda v: str(v))
def test_matches_numpy(name, shape, kw, norm):
    x = _input(name, shape)
    out = getattr(jfft, name)(x, norm=norm, **kw)
    np_kw = dict(kw)
    if "s" in kw and "axes" not in kw:  # the last len(s) axes (NumPy 2 wants them spelled out)
        np_kw["axes"] = tuple(range(len(shape) - len(kw["s"]), len(shape)))
    check(out, getattr(np.fft, name)(x.astype(np.result_type(x, np.float64)), norm=norm, **np_kw),
          _want_dtype(name), rtol=1e-5)


@pytest.mark.parametrize("name, shape, kw", [CASES[1], CASES[5], CASES[7], CASES[13],
                                              CASES[17], CASES[23], CASES[25]], ids=str)
def test_matches_numpy_in_64_bits(name, shape, kw):
    with plax.enable_x64():
        x = _input(name, shape, F64 if name in REAL_IN else C128)
        out = getattr(jfft, name)(x, norm="ortho", **kw)
        check(out, getattr(np.fft, name)(x, norm="ortho", **kw), _want_dtype(name, True),
              rtol=1e-12)


@pytest.mark.parametrize("name, axes", [("fftn", None), ("ifftn", (3, 0, 4, 1)),
                                        ("rfftn", (0, 1, 2, 4)), ("irfftn", None),
                                        ("irfftn", (4, 2, 0, 1, 3))], ids=str)
def test_more_than_three_axes_take_successive_transforms(name, axes):
    x = _input(name, (2, 3, 2, 3, 4), seed=1)
    check(getattr(jfft, name)(x, axes=axes, norm="ortho"),
          getattr(np.fft, name)(x.astype(np.result_type(x, np.float64)), axes=axes, norm="ortho"),
          _want_dtype(name), rtol=1e-5)
    jaxpr = plax.make_jaxpr(lambda v: getattr(jfft, name)(v, axes=axes))(x)
    ffts = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "fft"]
    assert len(ffts) == 2 and all(len(e.params["fft_lengths"]) <= 3 for e in ffts)


def test_integer_and_scalar_inputs():
    ints = np.arange(6, dtype=np.int32)
    check(jfft.fft(ints), np.fft.fft(ints), C64)
    check(jfft.rfft(ints), np.fft.rfft(ints), C64)
    check(jfft.irfft(ints), np.fft.irfft(ints), F32)
    check(jfft.fftn(np.float32(2.0)), 2.0, C64)          # no axes: only the conversion
    check(jfft.irfftn(np.ones((2, 2)), axes=()), np.ones((2, 2)), C64)
    check(jfft.irfft(np.ones(1, np.complex64)), np.zeros(0), F32)  # n = 2*(1-1) = 0


def test_round_trips():
    x = rand((3, 8))
    check(jfft.irfft(jfft.rfft(x), n=8), x, F32, rtol=1e-5)
    check(jfft.irfftn(jfft.rfftn(x, norm="ortho"), s=(3, 8), norm="ortho"), x, F32, rtol=1e-5)
    z = rand((3, 8), C64)
    check(jfft.ifft2(jfft.fft2(z, norm="forward"), norm="forward"), z, C64, rtol=1e-5)
    check(jfft.ihfft(jfft.hfft(rand((5,), C64).real.astype(np.complex64), n=8)),
          np.fft.ihfft(np.fft.hfft(rand((5,), C64).real, n=8)), C64, rtol=1e-5)


# --- frequencies and shifts -------------------------------------------------------------------
@pytest.mark.parametrize("n, d", [(8, 1.0), (7, 0.25), (1, 2.0), (0, 1.0)])
def test_fftfreq_and_rfftfreq(n, d):
    if not n:  # NumPy divides by zero; the frequencies of no points are none
        check(jfft.fftfreq(n, d), np.zeros(0), F32)
        return
    check(jfft.fftfreq(n, d), np.fft.fftfreq(n, d), F32, rtol=1e-6)
    check(jfft.rfftfreq(n, d), np.fft.rfftfreq(n, d), F32, rtol=1e-6)


def test_frequency_dtypes_devices_and_traced_spacing():
    assert jfft.fftfreq(4, dtype=jnp.float16).dtype == np.float16
    check(jfft.fftfreq(4, 0.1, dtype=jnp.int32), [0, 2, -5, -2], np.int32)  # computed in f32
    check(jfft.rfftfreq(5, dtype=jnp.int32), np.fft.rfftfreq(5), F32)      # as JAX: divided
    check(jfft.fftfreq(4, dtype=jnp.complex64), np.fft.fftfreq(4), C64)
    dev = plax.devices()[-1]
    assert jfft.fftfreq(4, device=dev).devices() == {dev}
    assert jfft.rfftfreq(4, device=dev).devices() == {dev}
    out = plax.jit(lambda d: jfft.fftfreq(6, d))(np.float32(0.5))
    check(out, np.fft.fftfreq(6, 0.5), F32, rtol=1e-6)
    with plax.enable_x64():
        assert jfft.fftfreq(4).dtype == F64 and jfft.rfftfreq(4).dtype == F64


@pytest.mark.parametrize("shape, axes", [((5,), None), ((4, 5), None), ((4, 5), 1),
                                         ((2, 3, 4), (0, -1))], ids=str)
def test_fftshift_and_ifftshift(shape, axes):
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    check(jfft.fftshift(x, axes), np.fft.fftshift(x, axes), np.int32)
    check(jfft.ifftshift(x, axes), np.fft.ifftshift(x, axes), np.int32)
    check(jfft.ifftshift(jfft.fftshift(x, axes), axes), x, np.int32)


# --- errors -------------------------------------------------------------------------------------
X2 = np.ones((2, 2), np.float32)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: jfft.fft([1.0, 2.0]), TypeError,
     r"jax.numpy.fft.fft requires ndarray or scalar arguments, got <class 'list'> at position 0"),
    (lambda: jfft.fft(X2, n=0), ValueError, "Shape should be positive"),
    (lambda: jfft.fftn(X2, s=(-1, 2)), ValueError, "Shape should be positive"),
    (lambda: jfft.fft(X2, axis=[0]), ValueError,
     r"jax.numpy.fft.fft does not support multiple axes. Please use jax.numpy.fft.fftn. "
     r"Got axis = \[0\]"),
    (lambda: jfft.fft(X2, axis=2), ValueError, "axis 2 is out of bounds for array of dimension 2"),
    (lambda: jfft.fft(1.0), ValueError, "axis -1 is out of bounds for array of dimension 0"),
    (lambda: jfft.fftn(X2, axes=(0, 0)), ValueError,
     r"jax.numpy.fft.fftn does not support repeated axes. Got axes \(0, 0\)"),
    (lambda: jfft.fftn(X2, axes=(0, -2)), ValueError, "does not support repeated axes"),
    (lambda: jfft.fftn(X2, s=(2,), axes=(0, 1)), ValueError,
     "Shape and axes have different lengths"),
    (lambda: jfft.fftn(np.ones(3), s=(2, 2)), ValueError, "names more axes than the input has"),
    (lambda: jfft.fft2(np.ones((2, 2, 2)), axes=(0, 1, 2)), ValueError,
     r"jax.numpy.fft.fft2 only supports 2 axes. Got axes = \(0, 1, 2\)"),
    (lambda: jfft.fft(X2, norm="bad"), ValueError,
     'Invalid norm value bad; should be "backward", "ortho" or "forward"'),
    (lambda: jfft.hfft(X2, norm="Ortho"), ValueError, "Invalid norm value Ortho"),
    (lambda: jfft.rfft(X2 + 1j), ValueError, "only real valued inputs supported for rfft"),
    (lambda: jfft.ihfft(X2 + 1j), ValueError, "only real valued inputs supported for rfft"),
    (lambda: jfft.fft(X2, n=2.0), TypeError, "'float' object cannot be interpreted as an integer"),
    (lambda: jfft.fftfreq([5]), ValueError,
     r"The n argument of jax.numpy.fft.fftfreq only takes an int. Got n = \[5\]"),
    (lambda: jfft.rfftfreq(5, [1.0]), ValueError,
     r"The d argument of jax.numpy.fft.rfftfreq only takes a single value. Got d = \[1.0\]"),
    (lambda: jfft.fftshift([1, 2]), TypeError, "fftshift requires ndarray or scalar arguments"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- transformations ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn, x", [
    (lambda v: jfft.fft2(v, norm="ortho"), rand((3, 4), C64)),
    (lambda v: jfft.rfft(v, n=7), rand((2, 5))),
    (lambda v: jfft.irfft(v, n=6, axis=0), rand((4, 2), C64)),
    (lambda v: jfft.hfft(v, norm="forward"), rand((4,), C64)),
    (lambda v: jfft.rfftn(v, axes=(0, 2), norm="ortho"), rand((3, 2, 4))),
    (lambda v: jfft.irfftn(v, s=(2, 2, 2, 4)), rand((2, 2, 2, 3), C64)),
], ids=["fft2", "rfft_padded", "irfft_axis0", "hfft", "rfftn", "irfftn_4d"])
def test_grads(fn, x):
    check_grads(fn, (x,), 1, modes=("fwd", "rev"))


def test_vmap_and_jit():
    xs = rand((3, 4, 6))
    check_vmap(jfft.rfft2, xs, in_axes=1, rtol=1e-5)
    check_vmap(lambda v: jfft.irfft(v, n=6), jfft.rfft(xs), in_axes=2, rtol=1e-5)
    f = plax.jit(lambda v: jfft.fftshift(jfft.fftn(v, axes=(0, 2), norm="ortho")))
    check(f(xs), np.fft.fftshift(np.fft.fftn(xs, axes=(0, 2), norm="ortho")), C64, rtol=1e-5)


def test_trailing_axes_need_no_transpose():
    """A transform over the last axes (the defaults) is one fft equation and nothing else."""
    z = rand((4, 8), C64)
    for fn in (jfft.fft2, jfft.fft, jfft.ifftn, jfft.rfft2):
        arg = z.real.copy() if fn is jfft.rfft2 else z
        eqns = plax.make_jaxpr(fn)(arg).jaxpr.eqns
        assert [e.primitive.name for e in eqns] == ["fft"], eqns


def test_submodule():
    import importlib
    assert importlib.import_module("plax.numpy.fft") is jnp.fft is jfft
    assert jfft.__name__ == "plax.numpy.fft"
    assert set(jfft.__all__) == {"fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2",
                                 "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfft", "ihfft",
                                 "fftfreq", "rfftfreq", "fftshift", "ifftshift"}
