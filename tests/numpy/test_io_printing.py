"""plax.numpy's printing options and file/buffer I/O, checked against NumPy and JAX 0.10.2's
behaviour (its outputs quoted here): arrays print through NumPy's options; save/load use
NumPy's .npy/.npz formats, load returning plax Arrays (bfloat16 restored)."""
import io

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.runtime.array import ArrayImpl


@pytest.mark.parametrize("options, make, expected_repr, expected_str", [
    ({"threshold": 5}, lambda: jnp.arange(10),
     "Array([0, 1, 2, ..., 7, 8, 9], dtype=int32)", "[0 1 2 ... 7 8 9]"),
    ({"precision": 2, "suppress": True}, lambda: jnp.array([1 / 3, 1e-9, 2.0]),
     "Array([0.33, 0.  , 2.  ], dtype=float32)", "[0.33 0.   2.  ]"),
    ({"precision": 3}, lambda: jnp.array([[1 / 3, 2 / 3]]),
     "Array([[0.333, 0.667]], dtype=float32)", "[[0.333 0.667]]"),
])
def test_printoptions_block_governs_repr_and_str(options, make, expected_repr, expected_str):
    x = make()
    before = jnp.get_printoptions()
    with jnp.printoptions(**options):
        assert repr(x) == expected_repr
        assert str(x) == expected_str
        assert all(jnp.get_printoptions()[k] == v for k, v in options.items())
    assert jnp.get_printoptions() == before


def test_set_printoptions_then_restore():
    before = jnp.get_printoptions()
    try:
        jnp.set_printoptions(precision=1)
        assert repr(jnp.array([0.25, 1 / 3])) == "Array([0.2, 0.3], dtype=float32)"
        assert np.get_printoptions()["precision"] == 1  # one set of options, NumPy's
    finally:
        np.set_printoptions(**before)
    assert repr(jnp.array([0.25])) == "Array([0.25], dtype=float32)"


def test_array_str_and_repr_as_jax():
    x = jnp.array([1 / 3, 2.0])
    assert jnp.array_repr(x, precision=2) == "ArrayImpl([0.33, 2.  ], dtype=float32)"
    assert jnp.array_str(x, precision=2) == "[0.33 2.  ]"
    assert jnp.array_str(jnp.arange(3)) == "[0 1 2]"


@pytest.mark.parametrize("value", [
    np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, -2, 3], np.int8),
    np.array([True, False]), np.array([1.5, -2.0], ml_dtypes.bfloat16),
    np.array(3 + 4j, np.complex64)])
def test_save_load_round_trip(value):
    f = io.BytesIO()
    jnp.save(f, jnp.asarray(value))
    f.seek(0)
    out = jnp.load(f)
    assert isinstance(out, ArrayImpl)
    assert out.dtype == value.dtype and out.shape == value.shape
    np.testing.assert_array_equal(np.asarray(out), value)


def test_save_load_on_disk(tmp_path):
    path = tmp_path / "x.npy"
    jnp.save(path, jnp.arange(4.0))
    np.testing.assert_array_equal(np.load(path), np.arange(4.0, dtype=np.float32))
    out = jnp.load(path)
    assert isinstance(out, ArrayImpl) and out.dtype == np.float32


def test_load_keeps_what_plax_cannot_hold_and_npz_as_numpy():
    f = io.BytesIO()
    np.save(f, np.array(["a", "bc"]))
    f.seek(0)
    strings = jnp.load(f)
    assert isinstance(strings, np.ndarray) and strings.tolist() == ["a", "bc"]
    f = io.BytesIO()
    jnp.savez(f, a=jnp.array([1.0, 2.0]), b=jnp.arange(3))
    f.seek(0)
    archive = jnp.load(f)
    assert sorted(archive.files) == ["a", "b"]
    assert isinstance(archive["a"], np.ndarray)  # as JAX: .npz members stay NumPy arrays
    np.testing.assert_array_equal(archive["b"], [0, 1, 2])


@pytest.mark.parametrize("make, expected, dtype", [
    (lambda: jnp.frombuffer(b"\x01\x02\x03\x04", dtype=jnp.uint8), [1, 2, 3, 4], np.uint8),
    (lambda: jnp.frombuffer(np.arange(4.0).tobytes()), [0.0, 1.0, 2.0, 3.0], np.float32),
    (lambda: jnp.frombuffer(np.arange(4, dtype=np.int16).tobytes(), dtype=jnp.int16,
                            count=2, offset=2), [1, 2], np.int16),
    (lambda: jnp.fromstring("1 2 3", sep=" "), [1.0, 2.0, 3.0], np.float32),
    (lambda: jnp.fromstring("1,2", dtype=int, sep=","), [1, 2], np.int32),
])
def test_frombuffer_fromstring(make, expected, dtype):
    out = make()
    assert isinstance(out, ArrayImpl) and out.dtype == dtype
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_fromstring_needs_sep():
    with pytest.raises(TypeError, match="sep"):
        jnp.fromstring("1 2")


@pytest.mark.parametrize("name, arg", [("fromiter", iter([1, 2])), ("fromfile", "x.bin")])
def test_impure_readers_refused_as_in_jax(name, arg):
    with pytest.raises(NotImplementedError, match=f"jnp.{name}\\(\\) is not implemented "
                       "because it may be non-pure"):
        getattr(jnp, name)(arg)


def test_frombuffer_on_a_tracer_is_refused():
    with pytest.raises(TypeError, match="bytes-like object is required"):
        plax.jit(lambda b: jnp.frombuffer(b))(jnp.ones(2))


def test_numpy_aliases_as_in_jax():
    assert jnp.ComplexWarning is np.exceptions.ComplexWarning
    assert (jnp.character, jnp.flexible, jnp.object_) == (np.character, np.flexible, np.object_)
    assert jnp.iterable(jnp.ones(3)) and jnp.iterable([1]) and not jnp.iterable(jnp.float32(1))


_NUMPY_ALIASES = [  # (alias, the function it names, arguments)
    ("acos", "arccos", (0.5,)), ("acosh", "arccosh", (1.5,)), ("asin", "arcsin", (0.5,)),
    ("asinh", "arcsinh", (0.5,)), ("atan", "arctan", (0.5,)), ("atanh", "arctanh", (0.5,)),
    ("atan2", "arctan2", (1.0, 2.0)), ("amax", "max", (np.array([1, 5, 2]),)),
    ("amin", "min", (np.array([4, 1, 2]),)), ("around", "round", (2.567, 1)),
    ("bitwise_invert", "bitwise_not", (6,)), ("invert", "bitwise_not", (6,)),
    ("bitwise_left_shift", "left_shift", (3, 2)), ("bitwise_right_shift", "right_shift", (12, 2)),
    ("conj", "conjugate", (1 + 2j,)), ("degrees", "rad2deg", (np.pi,)),
    ("radians", "deg2rad", (180.0,)), ("divide", "true_divide", (3, 2)),
    ("mod", "remainder", (-3, 2)), ("pow", "power", (2, 5)),
]


@pytest.mark.parametrize("alias, target, args", _NUMPY_ALIASES)
def test_each_alias_is_its_own_function_named_as_called(alias, target, args):
    # JAX's aliases are distinct functions; code that dispatches on __name__ relies on it.
    fn = getattr(jnp, alias)
    assert fn.__name__ == alias and fn is not getattr(jnp, target)
    np.testing.assert_allclose(fn(*args), getattr(np, target)(*args), rtol=1e-6)


class _Wrapped:  # converts itself to an array (__jax_array__), with no shape of its own
    def __init__(self, value):
        self.value = value

    def __jax_array__(self):
        return jnp.asarray(self.value)


class _DuckShapeOnly:  # a shape and dtype, and a __jax_array__ that must not be called
    shape, dtype = (2, 3), np.dtype("float32")

    def __jax_array__(self):
        raise ValueError("__jax_array__ was called")


def test_shape_queries_and_roll_read_jax_array_objects():
    w = _Wrapped(np.ones((5, 3), np.complex64))
    assert (jnp.shape(w), jnp.size(w), jnp.ndim(w), jnp.iscomplexobj(w)) == ((5, 3), 15, 2, True)
    np.testing.assert_array_equal(jnp.roll(jnp.arange(5.0), _Wrapped(np.array([2]))),
                                  np.roll(np.arange(5.0), 2))


@pytest.mark.parametrize("fn", [jnp.zeros_like, jnp.ones_like, jnp.empty_like,
                                lambda a: jnp.full_like(a, 2.0)])
def test_like_functions_prefer_shape_and_dtype_to_jax_array(fn):
    out = fn(_DuckShapeOnly())
    assert out.shape == (2, 3) and out.dtype == np.float32
