"""The narrow ml_dtypes types of plax.numpy, as JAX 0.10.2 has them on CPU: float8_e3m4,
float8_e4m3, float8_e8m0fnu, float4_e2m1fn, int2 and uint2 arrays are held by XLA (made,
converted with astype, computed on under jit/vmap, read back); float6_* and int1/uint1 are
scalar types whose arrays XLA's client cannot hold, refused with a clear error."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import dtypes

HELD = [  # (name, values exactly representable in the type)
    ("float8_e3m4", [1.0, 0.5, -2.0, 0.0]), ("float8_e4m3", [1.0, 0.5, -2.0, 0.0]),
    ("float8_e8m0fnu", [1.0, 0.5, 4.0, 0.25]), ("float4_e2m1fn", [1.0, 0.5, -3.0, 0.0]),
    ("int2", [1, -1, -2, 0]), ("uint2", [0, 1, 2, 3]),
]
UNHELD = ["float6_e2m3fn", "float6_e3m2fn", "int1", "uint1"]
BITS = {"float8_e3m4": 8, "float8_e4m3": 8, "float8_e8m0fnu": 8, "float4_e2m1fn": 4,
        "int2": 2, "uint2": 2, "float6_e2m3fn": 6, "int1": 1}


@pytest.mark.parametrize("name", [n for n, _ in HELD] + UNHELD)
def test_scalar_type_stands_for_ml_dtypes_type(name):
    t = getattr(jnp, name)
    ml = getattr(ml_dtypes, name)
    assert np.dtype(t) == np.dtype(ml) and t == ml and hash(t) == hash(ml)
    assert t.dtype.name == name
    if name in BITS and name not in UNHELD:
        assert dtypes.itemsize_bits(t) == BITS[name]


@pytest.mark.parametrize("name, values", HELD)
def test_held_types_round_trip(name, values):
    t = getattr(jnp, name)
    expected = np.array(values, dtype=np.dtype(t))
    made = [jnp.array(values, dtype=t), jnp.array(values).astype(t), jnp.asarray(expected),
            plax.jit(lambda x: x.astype(t))(jnp.array(values)),
            plax.jit(lambda: jnp.array(values, t))()]  # a constant in the module
    for x in made:
        assert x.dtype == np.dtype(t)
        np.testing.assert_array_equal(np.asarray(x), expected)
    back = made[0].astype(jnp.float32)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(back), expected.astype(np.float32))
    scalar = t(1)
    assert scalar.dtype == np.dtype(t) and scalar.shape == () and int(scalar) == 1


@pytest.mark.parametrize("name, values", HELD)
def test_held_types_compute_as_numpy_does_in_the_type(name, values):
    t = getattr(jnp, name)
    x = jnp.array(values, dtype=t)
    if name.startswith("float"):
        expected = (np.array(values, np.float32) * 2).astype(np.dtype(t))
    else:  # two's-complement wrap-around in 2 bits, as JAX's int2/uint2 (e.g. 1 + 1 == -2)
        wrapped = np.array(values) * 2 % 4
        expected = np.where(wrapped >= 2, wrapped - 4, wrapped) if name == "int2" else wrapped
    for out in (x + x, plax.jit(lambda a: a + a)(x), plax.vmap(lambda a: a + a)(x)):
        assert out.dtype == np.dtype(t)
        np.testing.assert_array_equal(np.asarray(out).astype(np.int32 if name[0] in "iu"
                                                              else np.float32), expected)


def test_categories_and_promotion():
    assert jnp.issubdtype(jnp.int2, jnp.signedinteger)
    assert jnp.issubdtype(jnp.uint2, jnp.unsignedinteger)
    assert not jnp.issubdtype(jnp.uint2, jnp.signedinteger)
    for f in ("float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn"):
        assert jnp.issubdtype(getattr(jnp, f), jnp.floating)
    assert jnp.iinfo(jnp.int2).min == -2 and jnp.iinfo(jnp.uint2).max == 3
    assert float(jnp.finfo(jnp.float4_e2m1fn).max) == 6.0
    assert jnp.promote_types(jnp.int2, jnp.int2) == np.dtype(ml_dtypes.int2)
    assert (jnp.array([1], jnp.int2) + 1).dtype == np.dtype(ml_dtypes.int2)  # weak scalar
    with pytest.raises(dtypes.TypePromotionError, match="no available implicit dtype "
                       "promotion path.*2-bit and 4-bit integers"):
        jnp.promote_types(jnp.int2, jnp.int8)
    with pytest.raises(dtypes.TypePromotionError, match="no available implicit dtype "
                       "promotion path.*8-bit floats"):
        jnp.promote_types(jnp.float8_e3m4, jnp.float32)


def test_grad_through_a_cast_from_float8():
    x = jnp.array([1.0, 2.0, 3.0], jnp.float8_e4m3)
    g = plax.grad(lambda v: (v.astype(jnp.float32) ** 2).sum())(x)
    assert g.dtype == np.dtype(ml_dtypes.float8_e4m3)
    np.testing.assert_array_equal(np.asarray(g).astype(np.float32), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("name", UNHELD)
def test_unheld_types_refused_clearly(name):
    t = getattr(jnp, name)
    with pytest.raises(TypeError, match=f"{name} is not a valid JAX array type.*cannot hold"):
        jnp.array([0], dtype=t)
    with pytest.raises(TypeError, match=f"{name} is not a valid JAX array type"):
        jnp.zeros(2).astype(t)
    with pytest.raises(TypeError, match=f"{name} is not a valid JAX array type"):
        t(0)
