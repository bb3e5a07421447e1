"""Tests for plax.first_order.dot: dot_general, dot, batch_matmul and Precision, against NumPy."""
import ml_dtypes
import numpy as np
import pytest

import plax
from plax import lax as L  # dot, dot_general, batch_matmul, Precision
from plax.core.config import config
from plax.lowering.stablehlo import lower_jaxpr_to_module
from helpers import dot_general_reference
from lax_rows import primitive

bf16 = np.dtype(ml_dtypes.bfloat16)
MM = (((1,), (0,)), ((), ()))  # plain matrix product
BMM = (((2,), (1,)), ((0,), (0,)))  # one leading batch dimension


def _rand(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -4
        return rng.integers(lo, 5, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _tol(dtype):
    dtype = np.dtype(dtype)
    if dtype in (np.dtype(np.float16), bf16):
        return dict(rtol=3e-2, atol=1e-1)
    return dict(rtol=1e-5, atol=1e-5)


# (name, lhs shape, rhs shape, dimension_numbers)
CASES = [
    ("matmul", (3, 4), (4, 5), MM),
    ("batched", (2, 3, 4), (2, 4, 5), BMM),
    ("two_contracting", (3, 4, 5), (5, 4, 2), (((1, 2), (1, 0)), ((), ()))),
    ("batch_not_leading", (3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    ("two_batch_swapped", (2, 3, 4, 5), (3, 2, 5, 6), (((3,), (2,)), ((0, 1), (1, 0)))),
    ("outer", (3,), (4,), (((), ()), ((), ()))),
    ("vector_dot", (5,), (5,), (((0,), (0,)), ((), ()))),
    ("scalars", (), (), (((), ()), ((), ()))),
    ("contract_size0", (3, 0), (0, 4), MM),
    ("free_size0", (0, 3), (3, 4), MM),
    ("batch_size0", (0, 2, 3), (0, 3, 4), BMM),
]
# Every case in float32; a representative subset in the other dtypes.
VALUE_PARAMS = ([pytest.param(c, np.float32, id=f"{c[0]}-float32") for c in CASES]
                + [pytest.param(c, dt, id=f"{c[0]}-{np.dtype(dt).name}")
                   for c in CASES if c[0] in ("matmul", "batched", "two_contracting", "contract_size0")
                   for dt in (np.int32, np.float16, bf16, np.bool_, np.complex64)])


@pytest.mark.parametrize("case,dtype", VALUE_PARAMS)
def test_dot_general_values(case, dtype):
    _, ls, rs, dn = case
    lhs, rhs = _rand(ls, dtype, 1), _rand(rs, dtype, 2)
    out = L.dot_general(lhs, rhs, dn)
    ref = dot_general_reference(lhs, rhs, dn)
    assert out.dtype == np.dtype(dtype) and out.shape == ref.shape
    got = np.asarray(out)
    if np.dtype(dtype) == np.bool_:
        np.testing.assert_array_equal(got, ref != 0)
    elif np.dtype(dtype).kind in "iu":
        np.testing.assert_array_equal(got, ref.astype(dtype))
    else:
        np.testing.assert_allclose(got.astype(ref.dtype), ref, **_tol(dtype))


def test_contracting_over_size_zero_gives_zeros():
    out = L.dot_general(np.ones((2, 0, 3), np.float32), np.ones((0, 3, 4), np.float32),
                        (((1, 2), (0, 1)), ((), ())))
    np.testing.assert_array_equal(np.asarray(out), np.zeros((2, 4), np.float32))


def test_accepts_device_arrays_and_list_dimension_numbers():
    lhs, rhs = _rand((2, 3, 4), np.float32), _rand((2, 4, 6), np.float32, 3)
    out = L.dot_general(plax.device_put(lhs), plax.device_put(rhs), [[[2], [1]], [[0], [0]]])
    np.testing.assert_allclose(np.asarray(out), np.matmul(lhs, rhs), rtol=1e-5, atol=1e-5)
    # A bare int stands for a one-element tuple.
    out = L.dot_general(lhs[0], rhs[0], ((1, 0), ((), ())))
    np.testing.assert_allclose(np.asarray(out), lhs[0] @ rhs[0], rtol=1e-5, atol=1e-5)


# --- preferred_element_type ------------------------------------------------------------
# (input dtype, preferred dtype, lhs fill, rhs fill): the fills overflow the input dtype.
PREFERRED = [
    (np.int8, np.int32, 100, 100),
    (np.uint8, np.int32, 200, 200),
    (np.bool_, np.int32, True, True),
    (np.float16, np.float32, 300.0, 300.0),
    (bf16, np.float32, 1.0078125, 1.0),  # the sum 3.0234375 needs more bits than bf16 has
    (np.int32, np.float32, 7, 3),
    (np.float32, np.int32, 2.0, 3.0),
    (np.float32, bf16, 1.0, 2.0),
    (np.float32, np.complex64, 1.0, 2.0),
]


@pytest.mark.parametrize("in_dtype,pet,a,b", PREFERRED,
                         ids=[f"{np.dtype(p[0]).name}->{np.dtype(p[1]).name}" for p in PREFERRED])
def test_preferred_element_type(in_dtype, pet, a, b):
    lhs = np.full((2, 3), a, dtype=in_dtype)
    rhs = np.full((3, 4), b, dtype=in_dtype)
    out = L.dot_general(lhs, rhs, MM, preferred_element_type=pet)
    assert out.dtype == np.dtype(pet) and out.shape == (2, 4)
    expected = np.full((2, 4), 3 * float(a) * float(b)).astype(pet)
    np.testing.assert_allclose(np.asarray(out).astype(np.complex128),
                               expected.astype(np.complex128),
                               rtol=1e-2 if np.dtype(pet) == bf16 else 1e-6)


def test_without_preferred_element_type_integer_products_wrap():
    out = L.dot_general(np.full((1, 3), 100, np.int8), np.full((3, 1), 100, np.int8), MM)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(out), np.array([[30000]]).astype(np.int8))


def test_complex_to_real_preferred_element_type_keeps_real_part():
    a = np.array([[1 + 2j, 3 - 1j]], np.complex64)
    b = np.array([[2 - 1j], [1 + 1j]], np.complex64)
    out = L.dot_general(a, b, MM, preferred_element_type=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), (a @ b).real, rtol=1e-6)


@pytest.mark.parametrize("pet,expected", [("float32", np.float32), (float, np.float32),
                                          (int, np.int32), (np.dtype("int64"), np.int32)])
def test_preferred_element_type_is_canonicalised(pet, expected):
    trace = lambda: plax.make_jaxpr(lambda x: L.dot_general(  # noqa: E731
        x, x, (((0,), (0,)), ((), ())), preferred_element_type=pet))(np.ones(3, np.int8))
    if isinstance(pet, np.dtype) and pet == np.int64:  # x64 is off: truncated, with JAX's warning
        with pytest.warns(UserWarning, match="Explicitly requested dtype int64"):
            j = trace()
    else:
        j = trace()
    assert j.jaxpr.eqns[0].params["preferred_element_type"] == np.dtype(expected)
    assert j.jaxpr.outvars[0].aval.dtype == np.dtype(expected)


@pytest.mark.parametrize("in_dtype,pet", [(np.int32, np.int8), (np.int32, np.int16),
                                          (np.int8, np.bool_), (np.int32, np.float16),
                                          (np.complex64, np.float16)])
def test_narrower_preferred_element_type_is_rejected(in_dtype, pet):
    with pytest.raises(TypeError, match="must not be narrower"):
        L.dot_general(np.ones((2, 3), in_dtype), np.ones((3, 2), in_dtype), MM,
                      preferred_element_type=pet)


@pytest.mark.parametrize("in_dtype,pet", [(np.float32, np.float16), (np.float32, np.int8),
                                          (np.int8, np.uint8), (np.complex64, np.int32),
                                          (np.float16, np.bool_)])
def test_float_inputs_may_ask_for_any_result_dtype(in_dtype, pet):
    j = plax.make_jaxpr(lambda x, y: L.dot_general(x, y, MM, preferred_element_type=pet))(
        np.ones((2, 3), in_dtype), np.ones((3, 2), in_dtype))
    assert j.jaxpr.outvars[0].aval.dtype == np.dtype(pet)


def test_bad_preferred_element_type():
    with pytest.raises(TypeError, match="preferred_element_type"):
        L.dot_general(np.ones((2, 3)), np.ones((3, 2)), MM, preferred_element_type="not_a_dtype")


# --- mixed operand dtypes (allowed, as in JAX) -----------------------------------------------
MIXED = [(np.float32, np.int32, np.float32), (np.float16, np.float32, np.float32),
         (np.int8, np.int32, np.int32), (np.int8, np.uint8, np.int8), (np.uint8, np.int8, np.int8),
         (np.uint16, np.int8, np.uint16), (np.bool_, np.int32, np.int32),
         (bf16, np.float16, bf16), (np.float16, bf16, bf16), (np.int32, np.float16, np.float16),
         (np.float32, np.complex64, np.complex64)]


@pytest.mark.parametrize("a,b,expected", MIXED,
                         ids=[f"{np.dtype(m[0]).name}x{np.dtype(m[1]).name}" for m in MIXED])
def test_mixed_dtypes_result_dtype(a, b, expected):
    j = plax.make_jaxpr(lambda x, y: L.dot_general(x, y, MM))(np.ones((2, 3), a), np.ones((3, 4), b))
    assert j.jaxpr.outvars[0].aval.dtype == np.dtype(expected)


def test_mixed_dtypes_values():
    lhs, rhs = _rand((2, 3), np.float32), _rand((3, 4), np.int32)
    out = L.dot_general(lhs, rhs, MM)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), lhs @ rhs.astype(np.float32), rtol=1e-5, atol=1e-5)
    # Mixed operands are both converted to the result dtype first (1.5 truncates to 1).
    out = L.dot_general(np.full((2, 3), 1.5, np.float32), np.ones((3, 4), np.int32), MM,
                        preferred_element_type=np.int32)
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 4), 3, np.int32))


def test_weak_type():
    assert L.dot_general(2.0, 3.0, (((), ()), ((), ()))).aval.weak_type
    out = L.dot_general(np.float32(2.0), 3.0, (((), ()), ((), ())))
    assert not out.aval.weak_type and float(np.asarray(out)) == 6.0
    j = plax.make_jaxpr(lambda x: L.dot_general(x, 2, (((), ()), ((), ())),
                                                preferred_element_type=np.float32))(1.0)
    assert j.jaxpr.outvars[0].aval.weak_type


# --- precision -------------------------------------------------------------------------
P = L.Precision


@pytest.mark.parametrize("value,expected", [
    ("default", P.DEFAULT), ("fastest", P.DEFAULT), ("bfloat16", P.DEFAULT), (None, P.DEFAULT),
    ("high", P.HIGH), ("bfloat16_3x", P.HIGH), ("tensorfloat32", P.HIGH),
    ("highest", P.HIGHEST), ("float32", P.HIGHEST), (0, P.DEFAULT), (2, P.HIGHEST),
    (P.HIGH, P.HIGH)])
def test_precision_constructor(value, expected):
    assert P(value) is expected


@pytest.mark.parametrize("value", ["HIGH", "foo", 5])
def test_precision_constructor_rejects(value):
    with pytest.raises(ValueError, match="is not a valid Precision"):
        P(value)


def test_precision_names():
    assert [p.name for p in P] == ["DEFAULT", "HIGH", "HIGHEST"]
    assert str(P.HIGH) == "HIGH" and repr(P.HIGHEST) == "Precision.HIGHEST"
    assert hash((P.HIGH, P.HIGH)) == hash((P.HIGH, P.HIGH))


@pytest.mark.parametrize("precision,expected", [
    (None, None),
    (P.HIGHEST, (P.HIGHEST, P.HIGHEST)),
    ("high", (P.HIGH, P.HIGH)),
    ("tensorfloat32", (P.HIGH, P.HIGH)),
    ("bfloat16", (P.DEFAULT, P.DEFAULT)),
    ("float32", (P.HIGHEST, P.HIGHEST)),
    ((P.HIGH, P.DEFAULT), (P.HIGH, P.DEFAULT)),
    (("high", "highest"), (P.HIGH, P.HIGHEST)),
    (["bfloat16", "float32"], (P.DEFAULT, P.HIGHEST)),
])
def test_precision_forms(precision, expected):
    assert L.canonicalize_precision(precision) == expected
    lhs, rhs = _rand((2, 3), np.float32), _rand((3, 4), np.float32, 1)
    out = L.dot_general(lhs, rhs, MM, precision=precision)
    np.testing.assert_allclose(np.asarray(out), lhs @ rhs, rtol=1e-5, atol=1e-5)
    j = plax.make_jaxpr(lambda x, y: L.dot_general(x, y, MM, precision=precision))(lhs, rhs)
    assert j.jaxpr.eqns[0].params["precision"] == expected


@pytest.mark.parametrize("precision", ["HIGH", "foo", 3, ("high",), ("high", None), (None, None),
                                       ("a", "b", "c")])
def test_bad_precision(precision):
    with pytest.raises(ValueError, match="precision must be"):
        L.dot_general(np.ones((2, 3)), np.ones((3, 2)), MM, precision=precision)


def test_default_matmul_precision_config():
    x, y = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    with config.override("default_matmul_precision", "float32"):
        j = plax.make_jaxpr(L.dot)(x, y)
        assert j.jaxpr.eqns[-1].params["precision"] == (P.HIGHEST, P.HIGHEST)
        j = plax.make_jaxpr(lambda a, b: L.dot(a, b, precision="high"))(x, y)
        assert j.jaxpr.eqns[-1].params["precision"] == (P.HIGH, P.HIGH)
    j = plax.make_jaxpr(L.dot)(x, y)
    assert j.jaxpr.eqns[-1].params["precision"] is None


# --- jaxpr and lowering ----------------------------------------------------------------
def test_make_jaxpr():
    j = plax.make_jaxpr(lambda a, b: L.dot_general(a, b, BMM, precision=("high", "highest"),
                                                   preferred_element_type=np.int32))(
        np.ones((2, 3, 4), np.int8), np.ones((2, 4, 5), np.int8))
    (eqn,) = j.jaxpr.eqns
    assert eqn.primitive is primitive("dot_general")
    assert eqn.params == {"dimension_numbers": (((2,), (1,)), ((0,), (0,))),
                          "precision": (P.HIGH, P.HIGHEST),
                          "preferred_element_type": np.dtype(np.int32), "out_sharding": None}
    text = str(j)
    assert "a:i8[2,3,4] b:i8[2,4,5]" in text and "c:i32[2,3,5] = dot_general[" in text
    for piece in ("dimension_numbers=", "precision=(Precision.HIGH, Precision.HIGHEST)",
                  "preferred_element_type=int32"):
        assert piece in text


def test_lowering_text():
    j = plax.make_jaxpr(lambda a, b: L.dot_general(a, b, BMM, precision="highest"))(
        np.ones((2, 3, 4), np.float32), np.ones((2, 4, 5), np.float32))
    text = lower_jaxpr_to_module(j.jaxpr)
    assert ("dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], "
            "rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], "
            "rhs_contracting_dimensions = [1]>") in text
    assert ("precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]"
            in text)


# --- errors ----------------------------------------------------------------------------
A, B = np.ones((2, 3, 4), np.float32), np.ones((2, 5, 6), np.float32)
ERRORS = [
    ("contract_sizes", A, B, (((2,), (1,)), ((), ())), "contracting dimensions to have the same shape"),
    ("contract_counts", A, B, (((1, 2), (1,)), ((), ())), "contracting dimensions to have the same shape"),
    ("out_of_range", A, B, (((3,), (1,)), ((), ())), "lhs dimension numbers to be nonnegative"),
    ("negative", A, B, (((-1,), (1,)), ((), ())), "lhs dimension numbers to be nonnegative"),
    ("rhs_out_of_range", A, B, (((1,), (7,)), ((), ())), "rhs dimension numbers to be nonnegative"),
    ("duplicate_contract", A, A, (((1, 1), (1, 1)), ((), ())), "contracting dimensions to be distinct"),
    ("duplicate_batch", A, A, (((), ()), ((0, 0), (0, 0))), "batch dimensions to be distinct"),
    ("batch_and_contract", A, A, (((0,), (0,)), ((0,), (0,))), "disjoint from contracting"),
    ("batch_counts", A, B, (((), ()), ((0,), ())), "equal numbers of lhs_batch and rhs_batch"),
    ("batch_sizes", A, B, (((), ()), ((1,), (0,))), "batch dimensions to have the same shape"),
]


@pytest.mark.parametrize("lhs,rhs,dn,match", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_dimension_errors(lhs, rhs, dn, match):
    with pytest.raises(TypeError, match=match):
        L.dot_general(lhs, rhs, dn)


@pytest.mark.parametrize("dn,match", [
    (((1, 0),), "must have the form"),
    (5, "must have the form"),
    ((((1.5,), (0,)), ((), ())), "lhs_contracting must be a sequence of integers"),
    (((("a",), (0,)), ((), ())), "lhs_contracting must be a sequence of integers"),
])
def test_malformed_dimension_numbers(dn, match):
    with pytest.raises(TypeError, match=match):
        L.dot_general(np.ones((3, 4)), np.ones((4, 5)), dn)


def test_out_sharding_must_be_a_sharding():
    with pytest.raises(TypeError, match="out_sharding must be a PartitionSpec or a NamedSharding"):
        L.dot_general(np.ones((3, 4)), np.ones((4, 5)), MM, out_sharding="x")
    with pytest.raises(ValueError, match="no mesh is set"):
        L.dot_general(np.ones((3, 4)), np.ones((4, 5)), MM, out_sharding=plax.P("x"))


# --- dot and batch_matmul ----------------------------------------------------------------
@pytest.mark.parametrize("ls,rs", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                   ((0, 3), (3, 2)), ((2, 0), (0, 3))])
def test_dot_values(ls, rs):
    lhs, rhs = _rand(ls, np.float32, 1), _rand(rs, np.float32, 2)
    out = L.dot(lhs, rhs)
    ref = np.matmul(lhs, rhs)
    assert out.shape == ref.shape and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)


def test_dot_options():
    lhs, rhs = np.full((2, 3), 100, np.int8), np.full((3, 4), 100, np.int8)
    out = L.dot(lhs, rhs, preferred_element_type=np.int32, precision="highest")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 4), 30000, np.int32))
    a, b = _rand((2, 3, 4), np.float32), _rand((2, 4, 5), np.float32, 1)
    out = L.dot(a, b, dimension_numbers=BMM)
    np.testing.assert_allclose(np.asarray(out), np.matmul(a, b), rtol=1e-5, atol=1e-5)
    j = plax.make_jaxpr(lambda x, y: L.dot(x, y))(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    assert j.jaxpr.eqns[0].params["dimension_numbers"] == (((1,), (0,)), ((), ()))


@pytest.mark.parametrize("ls,rs", [((3,), (4,)), ((2, 3), (4, 5)), ((2, 3), (4,)), ((5,), (4, 3)),
                                   ((), ()), ((), (3,)), ((2, 3, 4), (4, 5)), ((3,), (2, 3, 4))])
def test_dot_rejects(ls, rs):
    with pytest.raises(ValueError, match="lax.dot"):
        L.dot(np.ones(ls, np.float32), np.ones(rs, np.float32))


@pytest.mark.parametrize("ls,rs", [((2, 3, 4), (2, 4, 5)), ((3, 2, 3, 4), (3, 2, 4, 5)),
                                   ((3, 4), (4, 5)), ((0, 3, 4), (0, 4, 5))])
def test_batch_matmul_values(ls, rs):
    lhs, rhs = _rand(ls, np.float32, 1), _rand(rs, np.float32, 2)
    out = L.batch_matmul(lhs, rhs, precision=P.HIGHEST)
    ref = np.matmul(lhs, rhs)
    assert out.shape == ref.shape and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)


def test_batch_matmul_jaxpr():
    j = plax.make_jaxpr(L.batch_matmul)(np.ones((5, 2, 3, 4), np.float32),
                                        np.ones((5, 2, 4, 5), np.float32))
    assert j.jaxpr.eqns[0].params["dimension_numbers"] == (((3,), (2,)), ((0, 1), (0, 1)))
    assert j.jaxpr.outvars[0].aval.shape == (5, 2, 3, 5)


@pytest.mark.parametrize("ls,rs,err,match", [
    ((3,), (3,), ValueError, "at least 2D"),
    ((2, 3, 4), (2, 4), ValueError, "same ndim"),
    ((2, 3, 4), (3, 4, 5), TypeError, "batch dimensions to have the same shape"),
    ((2, 3, 4), (2, 5, 6), TypeError, "contracting dimensions to have the same shape"),
])
def test_batch_matmul_rejects(ls, rs, err, match):
    with pytest.raises(err, match=match):
        L.batch_matmul(np.ones(ls, np.float32), np.ones(rs, np.float32))
