"""plax.numpy's scalar types (jnp.float32, jnp.int8, jnp.bool_, ...), checked against JAX's
behaviour: calling one is asarray(x, dtype=...), so it works on tracers and returns an Array;
otherwise each type stands for its NumPy type (np.dtype, ==, hash, isinstance, dtype=)."""
import pickle
import warnings

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import dtypes, lax
from plax.core import dtypes as core_dtypes
from plax.core.config import config
from plax.numpy import scalar_types
from plax.runtime.array import ArrayImpl

# (name in plax.numpy, NumPy / ml_dtypes type it stands for)
TYPES = [
    ("bool_", np.bool_), ("int4", ml_dtypes.int4), ("int8", np.int8), ("int16", np.int16),
    ("int32", np.int32), ("int64", np.int64), ("uint4", ml_dtypes.uint4), ("uint8", np.uint8),
    ("uint16", np.uint16), ("uint32", np.uint32), ("uint64", np.uint64),
    ("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16), ("float32", np.float32),
    ("float64", np.float64), ("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
    ("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz), ("float8_e5m2", ml_dtypes.float8_e5m2),
    ("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
    ("float8_e4m3b11fnuz", ml_dtypes.float8_e4m3b11fnuz),
    ("complex64", np.complex64), ("complex128", np.complex128),
]
NAMES = [n for n, _ in TYPES]
NARROW = [(n, t) for n, t in TYPES if np.dtype(t).itemsize < 8 or np.dtype(t) == np.complex64]
WIDE = [(n, t) for n, t in TYPES if (n, t) not in NARROW]
# Aliases JAX has too.
ALIASES = {"bool": "bool_", "single": "float32", "double": "float64", "csingle": "complex64",
           "cdouble": "complex128", "int_": "int64", "uint": "uint64", "float_": "float64",
           "complex_": "complex128"}


def _expected(x, np_type):
    return np.asarray(x, dtype=core_dtypes.canonicalize_dtype(np_type))


def _check(out, want):
    assert type(out) is ArrayImpl
    assert not out.weak_type
    assert out.dtype == want.dtype
    assert out.shape == want.shape
    np.testing.assert_array_equal(np.asarray(out), want)


# --- calling: asarray(x, dtype=T) ------------------------------------------------
@pytest.mark.parametrize("name,np_type", NARROW, ids=[n for n, _ in NARROW])
@pytest.mark.parametrize("x", [0, 1, 3, 2.75, True, [1, 2.5, 0], np.arange(4, dtype=np.float32),
                               np.float64(1.5)], ids=lambda x: type(x).__name__ + str(x)[:8])
def test_call_matches_numpy_values(name, np_type, x):
    _check(getattr(jnp, name)(x), _expected(x, np_type))


@pytest.mark.parametrize("name,np_type", NARROW, ids=[n for n, _ in NARROW])
def test_call_on_an_array(name, np_type):
    x = jnp.asarray([0.0, 1.0, 2.5])
    _check(getattr(jnp, name)(x), _expected(np.array([0.0, 1.0, 2.5], np.float32), np_type))


def test_call_details():
    assert float(jnp.int32(3.7)) == 3 and jnp.int32(3.7).dtype == np.int32
    assert jnp.int32(-3.7).item() == -3
    assert jnp.float32("1.5").item() == 1.5
    assert jnp.int8(np.int64(200)).item() == -56  # NumPy's wrapping cast, as JAX
    assert jnp.bfloat16(1).dtype == ml_dtypes.bfloat16
    assert complex(jnp.complex64(1 + 2j)) == 1 + 2j
    assert jnp.bool_(2.5).item() is True
    np.testing.assert_array_equal(np.asarray(jnp.bool_([0, 1])), [False, True])
    assert jnp.float32(x=2.0).item() == 2.0
    # Python scalars give a strongly typed array; so does an already weakly typed one
    weak = jnp.asarray(1.0)
    assert weak.weak_type and not jnp.float32(weak).weak_type
    assert not jnp.asarray(weak, dtype=np.float32).weak_type
    strong = jnp.ones(3, jnp.float32)
    assert jnp.float32(strong) is strong  # nothing to do: the same array


def test_call_errors():
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        jnp.float32()
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        jnp.uint8(300)
    with pytest.raises(ValueError, match="could not convert string to float"):
        jnp.float32("abc")


# --- on tracers -------------------------------------------------------------------
@pytest.mark.parametrize("name,np_type", NARROW, ids=[n for n, _ in NARROW])
def test_call_under_jit(name, np_type):
    t = getattr(jnp, name)
    out = plax.jit(lambda x: t(x))(np.float32(2.0))
    _check(out, _expected(np.float32(2.0), np_type))
    _check(plax.jit(t)(np.float32(2.0)), _expected(np.float32(2.0), np_type))


def test_call_under_jit_traces_a_conversion():
    text = str(plax.make_jaxpr(lambda x: jnp.float32(x))(1))
    assert "convert_element_type[new_dtype=float32 weak_type=False]" in text
    # a weakly typed float32 input is made strong, as in JAX
    text = str(plax.make_jaxpr(jnp.float32)(1.0))
    assert "convert_element_type[new_dtype=float32 weak_type=False]" in text
    out = plax.jit(lambda step: jnp.int32(step) + jnp.int32(1))(np.float32(4.5))
    assert out.dtype == np.int32 and out.item() == 5


def test_call_under_grad():
    assert plax.grad(lambda x: jnp.float32(x) * 2)(1.0).item() == 2.0
    assert plax.grad(jnp.float32)(2.0).item() == 1.0
    g = plax.grad(lambda x: jnp.float16(x).astype(np.float32) ** 2)(np.float32(3.0))
    assert g.dtype == np.float32 and g.item() == 6.0
    # through an integer cast the gradient is zero, as JAX
    assert plax.grad(lambda x: jnp.float32(jnp.int32(x)) * x)(np.float32(2.5)).item() == 2.0


def test_call_under_vmap():
    out = plax.vmap(jnp.int32)(jnp.arange(3.0) + 0.5)
    _check(out, np.array([0, 1, 2], np.int32))
    out = plax.vmap(lambda x: jnp.bool_(x) & True)(jnp.array([0, 2, 0]))
    _check(out, np.array([False, True, False]))
    out = plax.vmap(lambda: jnp.float32(1.5), axis_size=3)()
    _check(out, np.full(3, 1.5, np.float32))


# --- x64 ----------------------------------------------------------------------------
@pytest.mark.parametrize("name,np_type", WIDE, ids=[n for n, _ in WIDE])
def test_64_bit_type_with_x64_off_warns_and_truncates(name, np_type):
    assert not config.read("enable_x64")
    narrow = core_dtypes.canonicalize_dtype(np_type)
    with pytest.warns(UserWarning, match=f"Explicitly requested dtype {np.dtype(np_type).name} "
                                         f"requested in asarray is not available, and will be "
                                         f"truncated to dtype {narrow.name}") as record:
        out = getattr(jnp, name)(1)
    assert any(w.filename == __file__ for w in record)  # points at the user's line
    _check(out, np.asarray(1, narrow))


@pytest.mark.parametrize("name,np_type", WIDE, ids=[n for n, _ in WIDE])
def test_64_bit_type_with_x64_on(name, np_type):
    with plax.enable_x64(True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _check(getattr(jnp, name)(1), np.asarray(1, np_type))
            _check(plax.jit(getattr(jnp, name))(np.float32(3.0)), np.asarray(3, np_type))


def test_32_bit_type_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jnp.float32(1.0), jnp.int32(1), jnp.complex64(1), jnp.bool_(1)


# --- standing for the NumPy type ----------------------------------------------------
@pytest.mark.parametrize("name,np_type", TYPES, ids=NAMES)
def test_equality_hash_and_dtype(name, np_type):
    t = getattr(jnp, name)
    assert t is not np_type
    assert t.dtype == np.dtype(np_type) and isinstance(t.dtype, np.dtype)
    assert np.dtype(t) == np.dtype(np_type)
    assert t == np_type and np_type == t and not (t != np_type) and not (np_type != t)
    assert t == np.dtype(np_type) and np.dtype(np_type) == t
    assert t == t and not (t != t)
    assert hash(t) == hash(np_type)
    assert {np_type: 1}[t] == 1 and {t: 1}[np_type] == 1 and len({t, np_type}) == 1
    assert t in [np_type] and np_type in {t}
    assert t != float and t != "float32" and t != object()
    others = [getattr(jnp, n) for n in NAMES if n != name]
    assert all(t != o for o in others)


@pytest.mark.parametrize("name,np_type", TYPES, ids=NAMES)
def test_isinstance_issubclass(name, np_type):
    t = getattr(jnp, name)
    assert isinstance(t, type)
    assert isinstance(np.zeros((), np_type)[()], t)       # a NumPy scalar of the type
    assert not isinstance(np.zeros(2, np_type), t)        # an ndarray is not
    assert not isinstance(jnp.zeros(2, np.float32), t)    # nor a plax Array
    assert not isinstance(1.0, t) and not isinstance(True, t)
    other = np.float16 if np_type is not np.float16 else np.float32
    assert not isinstance(other(1), t)
    # Like JAX's, the types are not NumPy subclasses
    assert not issubclass(t, np.generic) and not issubclass(np_type, t)


def test_repr_name_module_doc():
    assert repr(jnp.float32) == "<class 'plax.numpy.float32'>"
    assert str(jnp.bfloat16) == "<class 'plax.numpy.bfloat16'>"
    assert repr(jnp.bool_) == "<class 'plax.numpy.bool'>" and jnp.bool_.__name__ == "bool"
    assert jnp.float8_e4m3fn.__name__ == "float8_e4m3fn"
    for name in NAMES:
        t = getattr(jnp, name)
        assert t.__module__ == "plax.numpy"
        assert getattr(jnp, t.__qualname__) is t
        assert np.dtype(t).name in t.__doc__


@pytest.mark.parametrize("name", NAMES + list(ALIASES))
def test_pickle(name):
    t = getattr(jnp, name)
    assert pickle.loads(pickle.dumps(t)) is t
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps({"dtype": t}, protocol))["dtype"] is t


def test_aliases_and_exports():
    for alias, target in ALIASES.items():
        assert getattr(jnp, alias) is getattr(jnp, target), alias
    for name in NAMES:
        assert getattr(jnp, name) is getattr(scalar_types, name)
        assert type(getattr(jnp, name)) is type(jnp.float32)
    # the abstract categories stay NumPy's
    assert (jnp.generic, jnp.number, jnp.integer, jnp.signedinteger, jnp.unsignedinteger,
            jnp.inexact, jnp.floating, jnp.complexfloating) == (
        np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact,
        np.floating, np.complexfloating)
    assert jnp.dtype is np.dtype
    # plax's own dtype module keeps NumPy's (and ml_dtypes') types
    assert core_dtypes.float32 is np.float32 and core_dtypes.bool_ is np.bool_
    assert core_dtypes.bfloat16 is ml_dtypes.bfloat16 and dtypes.bfloat16 is ml_dtypes.bfloat16


# --- dtype helpers ----------------------------------------------------------------
def test_dtype_helpers_accept_the_types():
    assert dtypes.canonicalize_dtype(jnp.float64) == np.float32
    with plax.enable_x64(True):
        assert dtypes.canonicalize_dtype(jnp.float64) == np.float64
    assert jnp.result_type(jnp.float32, 1) == np.float32
    assert jnp.result_type(jnp.bfloat16, 1.0) == ml_dtypes.bfloat16
    assert jnp.result_type(jnp.int8, jnp.uint8) == np.int16
    assert jnp.promote_types(jnp.float32, jnp.bfloat16) == np.float32
    assert jnp.promote_types(jnp.int8, np.int16) == np.int16
    assert jnp.issubdtype(jnp.float32, jnp.floating)
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating) and jnp.issubdtype(jnp.bfloat16, jnp.inexact)
    assert jnp.issubdtype(jnp.int4, jnp.signedinteger) and jnp.issubdtype(jnp.uint4, jnp.integer)
    assert jnp.issubdtype(jnp.int8, jnp.integer) and not jnp.issubdtype(jnp.int8, jnp.floating)
    assert jnp.issubdtype(jnp.float32, np.float32) and jnp.issubdtype(np.float32, jnp.float32)
    assert not jnp.issubdtype(jnp.float32, jnp.bfloat16)
    assert jnp.issubdtype(jnp.bool_, jnp.bool_) and not jnp.issubdtype(jnp.bool_, jnp.number)
    assert np.issubdtype(jnp.float32, np.floating) and np.issubdtype(jnp.complex64, np.complexfloating)
    assert jnp.finfo(jnp.bfloat16).eps == ml_dtypes.finfo(ml_dtypes.bfloat16).eps
    assert jnp.finfo(jnp.float32).eps == np.finfo(np.float32).eps
    assert jnp.iinfo(jnp.int8).min == -128 and jnp.iinfo(jnp.uint4).max == 15
    assert dtypes.itemsize_bits(jnp.int4) == 4
    assert dtypes.scalar_type_of(jnp.zeros(1, jnp.int8)) is int
    assert core_dtypes.dtype(jnp.float16) == np.float16


@pytest.mark.parametrize("name,np_type", TYPES, ids=NAMES)
def test_iscomplexobj_isrealobj_of_the_types(name, np_type):
    # As JAX: a scalar type has a dtype, and is judged by it (JAX 0.10.2: jnp.complex64 is
    # complex, jnp.float32 real). issubdtype takes the types as NumPy's.
    t = getattr(jnp, name)
    cplx = np.dtype(np_type).kind == "c"
    assert (jnp.iscomplexobj(t), jnp.isrealobj(t)) == (cplx, not cplx)
    assert jnp.issubdtype(t, jnp.complexfloating) == np.issubdtype(np_type, np.complexfloating)
    assert jnp.issubdtype(t, jnp.inexact) == jnp.issubdtype(np.dtype(np_type), jnp.inexact)
    assert jnp.issubdtype(t, np_type) and jnp.issubdtype(np_type, t)


def test_iscomplexobj_of_other_objects_with_a_dtype():
    assert jnp.iscomplexobj(plax.ShapeDtypeStruct((2,), jnp.complex64))
    assert jnp.isrealobj(plax.ShapeDtypeStruct((2,), jnp.float32))
    assert jnp.iscomplexobj(np.complex64(1)) and not jnp.iscomplexobj(np.float32(1))
    assert not jnp.iscomplexobj("abc") and not jnp.iscomplexobj(None)
    # NumPy's types and dtypes are not arrays: JAX raises a TypeError for them too.
    for t in (np.complex64, np.dtype(np.float32), complex):
        with pytest.raises(TypeError, match="iscomplexobj/isrealobj take an array or a scalar"):
            jnp.iscomplexobj(t)


# --- dtype= everywhere ----------------------------------------------------------------
DTYPE_ARGS = [
    ("zeros", lambda t: jnp.zeros(3, t)), ("ones", lambda t: jnp.ones((2,), dtype=t)),
    ("full", lambda t: jnp.full(2, 1, t)), ("empty", lambda t: jnp.empty(2, t)),
    ("zeros_like", lambda t: jnp.zeros_like(np.ones(2), dtype=t)),
    ("full_like", lambda t: jnp.full_like(jnp.ones(2), 1, t)),
    ("array", lambda t: jnp.array([1, 0], dtype=t)), ("asarray", lambda t: jnp.asarray(1, t)),
    ("eye", lambda t: jnp.eye(2, dtype=t)), ("tri", lambda t: jnp.tri(2, dtype=t)),
    ("astype", lambda t: jnp.ones(2).astype(t)), ("jnp.astype", lambda t: jnp.astype(jnp.ones(2), t)),
    ("convert_element_type", lambda t: lax.convert_element_type(np.ones(2, np.float32), t)),
    ("lax.full", lambda t: lax.full((2,), 1, t)),
    ("jit", lambda t: plax.jit(lambda x: x.astype(t))(np.ones(2, np.float32))),
]


@pytest.mark.parametrize("name,np_type", NARROW, ids=[n for n, _ in NARROW])
@pytest.mark.parametrize("fn", [f for _, f in DTYPE_ARGS], ids=[n for n, _ in DTYPE_ARGS])
def test_dtype_argument(fn, name, np_type):
    out = fn(getattr(jnp, name))
    assert type(out) is ArrayImpl and out.dtype == np.dtype(np_type) and not out.weak_type


def test_dtype_argument_numeric_functions():
    assert jnp.arange(3, dtype=jnp.float16).dtype == np.float16
    assert jnp.linspace(0, 1, 3, dtype=jnp.bfloat16).dtype == ml_dtypes.bfloat16
    assert jnp.sum(jnp.ones(3), dtype=jnp.int32).dtype == np.int32
    assert jnp.cumsum(jnp.ones(3), dtype=jnp.float16).dtype == np.float16
    assert lax.iota(jnp.int8, 3).dtype == np.int8
    assert lax.bitcast_convert_type(np.ones(2, np.float32), jnp.int32).dtype == np.int32
    assert plax.ShapeDtypeStruct((2,), jnp.float32).dtype == np.float32
    x = jnp.ones(2, jnp.float32)
    assert x.dtype == jnp.float32 and jnp.float32 == x.dtype  # an Array's dtype compares equal
    text = str(plax.make_jaxpr(lambda x: x.astype(jnp.bfloat16))(1.0))
    assert "new_dtype=bfloat16" in text


@pytest.mark.parametrize("name,np_type", TYPES, ids=NAMES)
def test_numpy_accepts_the_types(name, np_type):
    t = getattr(jnp, name)
    assert np.ones(3, t).dtype == np.dtype(np_type)
    assert np.zeros(2, dtype=t).dtype == np.dtype(np_type)
    assert np.arange(3).astype(t).dtype == np.dtype(np_type)
    assert np.dtype([("a", t)])["a"] == np.dtype(np_type)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy deprecation warning for the dtype protocol
        np.dtype(t)


# Under x64, where a float is needed an integer or bool input computes in float32 up to 32
# bits and in float64 from 64 bits (JAX's rule; NumPy would give float64 throughout).
_INEXACT_OF = {"bool": "float32", "int8": "float32", "uint8": "float32", "int16": "float32",
               "uint16": "float32", "int32": "float32", "uint32": "float32",
               "int64": "float64", "uint64": "float64", "float16": "float16"}
_NEEDS_FLOAT = {
    "sin": jnp.sin, "sqrt": jnp.sqrt, "true_divide": lambda x: x / x, "mean": jnp.mean,
    "var": jnp.var, "norm": jnp.linalg.norm, "erf": lambda x: plax.scipy.special.erf(x),
    "linspace": lambda x: jnp.linspace(x[0], 3 * x[0], 3),
}
_WANT = {"sin": np.sin(1.0), "sqrt": 1.0, "true_divide": 1.0, "mean": 1.0, "var": 0.0,
         "norm": np.sqrt(3.0), "erf": 0.8427007929497149, "linspace": [1.0, 2.0, 3.0]}


@pytest.mark.parametrize("fn", sorted(_NEEDS_FLOAT))
@pytest.mark.parametrize("dtype", sorted(_INEXACT_OF))
def test_x64_float_of_integers_follows_jax(fn, dtype):
    with plax.enable_x64():
        got = _NEEDS_FLOAT[fn](jnp.ones(3, dtype))
        # (3 * True is a 64-bit integer, so bool's linspace is float64 as in JAX.)
        want_dtype = "float64" if (fn, dtype) == ("linspace", "bool") else _INEXACT_OF[dtype]
        assert got.dtype == np.dtype(want_dtype)
        want = np.broadcast_to(np.asarray(_WANT[fn], np.float64), got.shape)
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-3, atol=1e-6)


def test_x64_float_of_python_and_mixed_integers():
    with plax.enable_x64():
        assert jnp.sin(3).dtype == np.float64  # a Python int is a weak 64-bit integer
        assert (jnp.ones(3, "int32") * 1.5).dtype == np.float64  # a weak float: float64
        assert jnp.pad(jnp.ones(3, "int8"), 1, "mean").dtype == np.int8  # cast back
        assert (jnp.ones(2, "int32") / jnp.ones(2, "int64")).dtype == np.float64
