"""Typed Python-scalar literals (``plax._src.literals``), the ``dtype``/``result_type``/
``safe_to_cast`` of ``plax._src.dtypes`` (JAX's private names), the scalar-only ml_dtypes
types (float6_*, int1, uint1) in plax's dtype tables, and weak-typed promotion results."""
import pickle
import warnings

import ml_dtypes
import numpy as np
import pytest

import plax.numpy as jnp
from plax._src import dtypes as jdtypes
from plax._src import literals
from plax._src.lax import lax as lax_internal
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.config import config, enable_x64, numpy_dtype_promotion

I32, I64, F32, F64 = (np.dtype(t) for t in ("int32", "int64", "float32", "float64"))
C64, C128 = np.dtype("complex64"), np.dtype("complex128")
BF16, F6, I1, U1 = (np.dtype(getattr(ml_dtypes, n))
                    for n in ("bfloat16", "float6_e2m3fn", "int1", "uint1"))


@pytest.mark.parametrize("cls, base, value, dt", [
    (literals.TypedInt, int, 6, I64), (literals.TypedInt, int, -3, I32),
    (literals.TypedFloat, float, 1.5, F64), (literals.TypedFloat, float, 2.0, F32),
    (literals.TypedComplex, complex, 1 + 2j, C128), (literals.TypedComplex, complex, 3j, C64)])
def test_typed_scalar_carries_its_dtype_whatever_the_x64_mode(cls, base, value, dt):
    x = cls(value, dt)
    assert isinstance(x, base) and base(x) == value
    assert x.dtype == dt and x.aval.dtype == dt and x.aval.weak_type and x.aval.shape == ()
    assert repr(x) == f"{cls.__name__}({base(value)!r}, dtype={dt.name})"
    assert str(x) == str(base(value))
    assert jdtypes.dtype(x) == dt and jdtypes.canonicalize_value(x) is x
    assert dtypes.is_weakly_typed(x)
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is cls and y == x and y.dtype == dt


def test_typed_scalar_meets_an_array_as_a_weak_scalar():
    x = literals.TypedFloat(2.0, F64)
    assert jdtypes.result_type(x, jnp.ones(2, jnp.bfloat16)) == BF16
    np.testing.assert_allclose(np.asarray(jnp.ones(2, jnp.float16) * x), [2.0, 2.0])
    assert (jnp.ones(2, jnp.float16) * x).dtype == np.float16


def test_typed_ndarray_keeps_its_dtype_and_weakness():
    plain = literals.TypedNdArray(np.array([1, 2], np.int64))
    assert plain.aval.dtype == I64 and plain.aval.shape == (2,) and not plain.weak_type
    assert jdtypes.dtype(plain) == I64 and jdtypes.canonicalize_value(plain) is plain
    weak = literals.TypedNdArray(np.array(3.0), ShapedArray((), F64, weak_type=True))
    assert weak.weak_type and "weak_type=True" in repr(weak)
    assert repr(plain) == "TypedNdArray([1, 2], dtype=int64)"
    total = plain + 1  # NumPy arithmetic gives a plain array
    assert type(total) is np.ndarray and total.tolist() == [2, 3]
    back = pickle.loads(pickle.dumps(weak))
    assert type(back) is literals.TypedNdArray and back.weak_type and back.dtype == F64


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("arg, want32, want64", [
    (int, I32, I64), (float, F32, F64), (complex, C64, C128), (bool, np.dtype(bool), None),
    (0, I32, I64), (0.0, F32, F64), (0j, C64, C128), (np.int64(0), I32, I64),
    (np.zeros(2, np.float64), F32, F64), ("int1", I1, None), (F6, F6, None),
    (np.uint16, np.dtype(np.uint16), None)])
def test_dtype_of_values_and_types(arg, want32, want64, x64):
    with enable_x64(x64), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert jdtypes.dtype(arg) == (want64 if x64 and want64 is not None else want32)


@pytest.mark.parametrize("bad, err, match", [
    (None, ValueError, "Invalid argument to dtype"),
    ([1, 2], TypeError, "Cannot determine dtype of"),
    ("object", TypeError, "is not a valid JAX array type"),
])
def test_dtype_bad_arguments(bad, err, match):
    with pytest.raises(err, match=match):
        jdtypes.dtype(bad)


@pytest.mark.parametrize("mode, want", [("allow", I64), ("warn", I32), ("error", None)])
def test_explicit_x64_dtypes_mode_governs_an_explicit_request(mode, want):
    old = config.read("explicit_x64_dtypes")
    config.update("jax_explicit_x64_dtypes", mode)
    try:
        with enable_x64(False):
            if want is None:
                with pytest.raises(ValueError, match="Explicitly requested dtype int64"):
                    jdtypes.dtype(np.int64)
            elif mode == "warn":
                with pytest.warns(UserWarning, match="Explicitly requested dtype int64"):
                    assert jdtypes.dtype(np.int64) == want
            else:
                assert jdtypes.dtype(np.int64) == want
    finally:
        config.update("jax_explicit_x64_dtypes", old)


def test_result_type_of_none_is_the_default_float():
    for x64, want in ((False, F32), (True, F64)):
        with enable_x64(x64):
            assert jdtypes.result_type(None) == want
            assert jdtypes.result_type(None, return_weak_type_flag=True) == (want, False)


@pytest.mark.parametrize("src, dst, want", [
    (np.complex64, complex, True), (np.bool_, int, True), (int, complex, True),
    (np.int16, np.float32, True), (np.float32, np.int16, False),
    (np.complex64, np.float32, False)])
def test_safe_to_cast(src, dst, want):
    assert jdtypes.safe_to_cast(src, dst) is want


@pytest.mark.parametrize("dt, bits, category", [
    (F6, 6, np.floating), (np.dtype(ml_dtypes.float6_e3m2fn), 6, np.floating),
    (I1, 1, np.signedinteger), (U1, 1, np.unsignedinteger)])
def test_scalar_only_types_are_dtypes(dt, bits, category):
    assert dtypes.itemsize_bits(dt) == bits
    for form in (dt, dt.name):
        assert dtypes.issubdtype(form, category) and dtypes.issubdtype(form, dt)
    assert jdtypes.canonicalize_dtype(dt) == dt
    with pytest.raises(TypeError, match="not a valid JAX array type on this backend"):
        jnp.zeros(2, dt)


@pytest.mark.parametrize("a, b, want", [(F6, float, F6), (I1, int, I1), (F6, F6, F6)])
def test_scalar_only_types_absorb_weak_scalars(a, b, want):
    assert dtypes.promote_types(a, b) == want


@pytest.mark.parametrize("a, b, match", [
    (F6, np.float32, "6-bit floats do not support implicit promotion"),
    (np.dtype(ml_dtypes.float8_e5m2), np.float32, "8-bit floats do not support"),
    (np.dtype(ml_dtypes.float4_e2m1fn), np.float32, "4-bit floats do not support"),
    (I1, np.int8, "1-bit, 2-bit and 4-bit integers do not support implicit promotion")])
def test_narrow_types_have_no_promotion_path(a, b, match):
    with pytest.raises(dtypes.TypePromotionError, match=match):
        dtypes.promote_types(a, b)


def test_strict_promotion_lets_narrow_types_absorb_their_kind():
    with numpy_dtype_promotion("strict"):
        assert dtypes.promote_types(I1, int) == I1
        assert dtypes.promote_types(BF16, float) == BF16


def _weak(value, dt):
    return lax_internal._convert_element_type(value, np.dtype(dt), weak_type=True)


@pytest.mark.parametrize("dt, result", [
    (np.uint8, np.uint32), (np.uint32, np.uint32), (np.int16, np.int32),
    (BF16, np.float32), (np.float16, np.float32), (np.complex64, np.complex64)])
def test_weak_result_has_the_default_dtype_of_its_kind(dt, result):
    assert dtypes.result_type(_weak(0, dt)) == np.dtype(result)
    # ... while the lattice (and so plax.numpy's promotion) keeps the dtype itself
    assert dtypes.lattice_result(_weak(0, dt)) == (np.dtype(dt), True)


def test_all_weak_values_meet_as_their_dtypes():
    u8, u16 = _weak(1, np.uint8), _weak(1, np.uint16)
    assert dtypes.lattice_result(u8, u16) == (np.dtype(np.uint16), True)
    assert dtypes.result_type(u8, u16, return_weak_type_flag=True) == (np.dtype(np.uint32), True)
    out = jnp.add(u8, u16)
    assert out.dtype == np.uint16 and out.weak_type and int(out) == 2
    assert jnp.sin(_weak(1, BF16)).dtype == BF16
    assert jnp.concatenate([u8[None], u16[None]]).dtype == np.uint16


def test_itemsize_bits_and_user_dtype_refuse_bad_arguments():
    with pytest.raises(ValueError, match="dtype cannot be None"):
        dtypes.itemsize_bits(None)
    with pytest.raises(ValueError, match="Passing an array as a dtype argument"):
        jdtypes.check_and_canonicalize_user_dtype(jnp.arange(3))
