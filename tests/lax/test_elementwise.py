"""Elementwise lax primitives against NumPy/SciPy: values, dtypes, weak types, errors, jaxprs.

One table row per primitive (NumPy reference, accepted dtypes, input domain); each row runs
over its dtypes at shape (2, 3) and over the other shapes at its first dtype.
"""
import re
from dataclasses import dataclass, field

import numpy as np
import pytest
import scipy.special as sp

from helpers import BF16, BOOL, C64, F16, F32, I8, I32, U8, check, sample, wide
import plax
from plax import lax
from plax.core.avals import short_dtype_name

FLOATS = [F32, F16, BF16]
INEXACT = FLOATS + [C64]
# Transcendental functions run at float32 and complex64 plus one 16-bit float, alternately.
INEXACT_A, INEXACT_B = [F32, C64, F16], [F32, C64, BF16]
INTS = [I32, U8, I8]
SIGNED = [F32, F16, BF16, I32, I8, C64]
NUMERIC_C = [F32, F16, BF16, I32, U8, C64, I8]  # NUMERIC with complex64 at shape (2, 3)
NUMERIC = FLOATS + INTS + [C64]
INTBOOL = INTS + [BOOL]
REAL = FLOATS + INTS + [BOOL]
ALL = NUMERIC + [BOOL]

# Input domains: (low, high) for floats (complex values add a small imaginary part) and ints.


# --- the op tables ------------------------------------------------------------------------
SAME = "same"  # output dtype is the input dtype


def _real_of(dtype):
    return F32 if dtype == C64 else dtype


def _unsigned(x):
    """The same bits as an unsigned integer array."""
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _clz(x):
    bits = x.dtype.itemsize * 8
    u = _unsigned(x)
    return np.vectorize(lambda v: bits - int(v).bit_length(), otypes=[x.dtype])(u).reshape(x.shape)


def _int_div(x, y):
    """C division: the quotient rounds toward zero."""
    q = np.abs(x.astype(np.int64)) // np.abs(y.astype(np.int64))
    return (np.sign(x.astype(np.int64)) * np.sign(y.astype(np.int64)) * q).astype(x.dtype)


def _shift_right_logical(x, y):
    u = _unsigned(x)
    return np.right_shift(u, y.astype(u.dtype)).view(x.dtype)


@dataclass
class Op:
    name: str          # the lax function
    ref: object        # NumPy reference on wide() inputs
    dtypes: list       # the dtypes tested, in order (the last one runs at 0-d)
    domains: tuple = ("real",)
    out: object = SAME  # SAME, a dtype, or a function of the input dtype
    prim: str = ""     # primitive name in jaxprs (defaults to name)
    rtol: dict = field(default_factory=dict)  # looser tolerances for some dtypes
    accepts: list = None  # every dtype the primitive accepts (defaults to dtypes)

    def __post_init__(self):
        self.prim = self.prim or self.name
        self.accepts = self.accepts or self.dtypes

    @property
    def fn(self):
        return getattr(lax, self.name)

    def out_dtype(self, dtype):
        if self.out is SAME:
            return np.dtype(dtype)
        return self.out(dtype) if callable(self.out) else np.dtype(self.out)

    def __repr__(self):
        return self.name


UNARY = [
    Op("neg", np.negative, NUMERIC),
    Op("floor", np.floor, FLOATS),
    Op("ceil", np.ceil, FLOATS),
    Op("exp", np.exp, INEXACT_A, accepts=INEXACT),
    Op("exp2", np.exp2, INEXACT_B, accepts=INEXACT),
    Op("log", np.log, INEXACT_A, ("pos",), accepts=INEXACT),
    Op("expm1", np.expm1, INEXACT_B, accepts=INEXACT),
    Op("log1p", np.log1p, INEXACT_A, ("pos",), accepts=INEXACT),
    Op("tanh", np.tanh, INEXACT_B, accepts=INEXACT),
    Op("logistic", lambda x: 1 / (1 + np.exp(-x)), INEXACT_A, accepts=INEXACT),
    Op("sin", np.sin, INEXACT_B, accepts=INEXACT),
    Op("cos", np.cos, INEXACT_A, accepts=INEXACT),
    Op("tan", np.tan, INEXACT_B, ("unit",), accepts=INEXACT),
    Op("asin", np.arcsin, INEXACT_A, ("unit",), accepts=INEXACT),
    Op("acos", np.arccos, INEXACT_B, ("unit",), rtol={C64: 1e-4}, accepts=INEXACT),
    Op("atan", np.arctan, INEXACT_A, accepts=INEXACT),
    Op("sinh", np.sinh, INEXACT_B, accepts=INEXACT),
    Op("cosh", np.cosh, INEXACT_A, accepts=INEXACT),
    Op("asinh", np.arcsinh, INEXACT_B, accepts=INEXACT),
    Op("acosh", np.arccosh, INEXACT_A, ("ge1",), accepts=INEXACT),
    Op("atanh", np.arctanh, INEXACT_B, ("unit",), accepts=INEXACT),
    Op("sqrt", np.sqrt, INEXACT_A, ("pos",), accepts=INEXACT),
    Op("rsqrt", lambda x: 1 / np.sqrt(x), INEXACT_B, ("pos",), accepts=INEXACT),
    Op("cbrt", np.cbrt, FLOATS),
    Op("erf", sp.erf, FLOATS),
    Op("erfc", sp.erfc, FLOATS),
    Op("erf_inv", sp.erfinv, FLOATS, ("unit",), rtol={F32: 1e-4}),
    Op("lgamma", sp.gammaln, FLOATS, ("pos",), rtol={F32: 1e-4}),
    Op("digamma", sp.digamma, FLOATS, ("pos",), rtol={F32: 1e-4}),
    Op("bitwise_not", np.invert, INTBOOL, prim="not"),
    Op("population_count", lambda x: np.bitwise_count(_unsigned(x)).astype(x.dtype), INTS),
    Op("clz", _clz, INTS),
    Op("sign", np.sign, NUMERIC_C, accepts=NUMERIC),
    Op("is_finite", np.isfinite, FLOATS, out=BOOL),
    Op("abs", np.abs, [F32, F16, BF16, I32, C64, I8], out=_real_of, accepts=SIGNED),
    Op("real", np.real, [C64], out=_real_of),
    Op("imag", np.imag, [C64], out=_real_of),
    Op("conj", np.conj, [C64, F32], out=C64),
    Op("square", np.square, [F32, BF16, I8, U8, C64], accepts=NUMERIC),
]

BINARY = [
    Op("add", np.add, NUMERIC, ("real", "real")),
    Op("sub", np.subtract, [F32, BF16, I32, U8, C64], ("real", "real"), accepts=NUMERIC),
    Op("mul", np.multiply, [F32, F16, I8, U8, C64], ("real", "real"), accepts=NUMERIC),
    Op("div", lambda x, y: _int_div(x, y) if x.dtype.kind in "iu" else x / y,
       [F32, F16, I32, I8, U8, C64], ("real", "nonzero"), accepts=NUMERIC),
    Op("rem", np.fmod, FLOATS + INTS, ("real", "nonzero")),
    Op("pow", np.power, INEXACT_B, ("pos", "real"), accepts=INEXACT),
    Op("max", np.maximum, [F32, F16, BF16, I32, U8, C64, BOOL, I8], ("real", "real"),
       accepts=ALL),
    Op("min", np.minimum, [F32, I8, C64, BOOL, U8], ("real", "real"), accepts=ALL),
    Op("atan2", np.arctan2, FLOATS, ("real", "real")),
    Op("nextafter", None, FLOATS, ("real", "real")),  # reference: np.nextafter in the dtype
    Op("bitwise_and", np.bitwise_and, INTBOOL, ("real", "real"), prim="and"),
    Op("bitwise_or", np.bitwise_or, INTBOOL, ("real", "real"), prim="or"),
    Op("bitwise_xor", np.bitwise_xor, INTBOOL, ("real", "real"), prim="xor"),
    Op("shift_left", np.left_shift, INTS, ("real", "shift")),
    Op("shift_right_arithmetic", np.right_shift, INTS, ("real", "shift")),
    Op("shift_right_logical", _shift_right_logical, INTS, ("real", "shift")),
    Op("complex", lambda x, y: x + 1j * y, [F32], ("real", "real"), out=C64),
    Op("eq", np.equal, [F32, BF16, I32, U8, BOOL, C64], ("real", "real"), out=BOOL, accepts=ALL),
    Op("ne", np.not_equal, [F32, F16, I8, U8, BOOL, C64], ("real", "real"), out=BOOL, accepts=ALL),
    Op("lt", np.less, [F32, I32, U8, BOOL], ("real", "real"), out=BOOL, accepts=REAL),
    Op("le", np.less_equal, [F32, I32, U8, BOOL], ("real", "real"), out=BOOL, accepts=REAL),
    Op("gt", np.greater, [F32, I8, U8, BOOL], ("real", "real"), out=BOOL, accepts=REAL),
    Op("ge", np.greater_equal, [F32, I8, U8, BOOL], ("real", "real"), out=BOOL, accepts=REAL),
]


def _inputs(op, shape, dtype):
    # Equal seeds would give comparisons only equal pairs: offset them per argument.
    return [sample(shape, dtype, d, seed=i) for i, d in enumerate(op.domains)]


def _reference(op, args):
    if op.ref is None:  # nextafter: exact, in the dtype itself
        return np.nextafter(*args)
    return np.asarray(op.ref(*[wide(a) for a in args]))


def check_op(op, dtype, shape):
    args = _inputs(op, shape, dtype)
    if shape == (2, 3) and len(args) == 2 and dtype != BOOL and args[0].size:
        args[0][0, 0] = args[1][0, 0]  # one equal pair, so comparisons see equality too
    out = op.fn(*args)
    out_dtype = op.out_dtype(dtype)
    want = _reference(op, args)
    if out_dtype.kind in "iub":
        want = want.astype(out_dtype)
    check(out, want, out_dtype, rtol=op.rtol.get(np.dtype(dtype)))


def _cases(table):
    """Every dtype of every row at shape (2, 3), except the last one at 0-d; plus (0, 4).

    Each case compiles an executable, so shapes ride along with the dtypes instead of
    multiplying them.
    """
    cases = []
    for op in table:
        shapes = [(2, 3)] * (len(op.dtypes) - 1) + [()] if len(op.dtypes) > 1 else [(2, 3), ()]
        dtypes = op.dtypes if len(op.dtypes) > 1 else op.dtypes * 2
        for d, shape in list(zip(dtypes, shapes)) + [(op.dtypes[0], (0, 4))]:
            cases.append(pytest.param(op, d, shape, id=f"{op.name}-{np.dtype(d).name}-{shape}"))
    return cases


@pytest.mark.parametrize("op,dtype,shape", _cases(UNARY))
def test_unary(op, dtype, shape):
    check_op(op, dtype, shape)


@pytest.mark.parametrize("op,dtype,shape", _cases(BINARY))
def test_binary(op, dtype, shape):
    check_op(op, dtype, shape)


def _rejected_dtype(op):
    return next((d for d in [BOOL, U8, I32, F32, C64] if d not in op.accepts), None)


@pytest.mark.parametrize("op", [op for op in UNARY + BINARY if _rejected_dtype(op)], ids=repr)
def test_rejects_dtype(op):
    dtype = _rejected_dtype(op)
    args = [np.zeros((2,), dtype)] * len(op.domains)
    with pytest.raises(TypeError, match=f"{op.prim} does not accept dtype {dtype.name}"):
        op.fn(*args)


@pytest.mark.parametrize("op", UNARY + BINARY, ids=repr)
def test_staging(op):
    args = [sample((2,), op.dtypes[0], d) for d in op.domains]
    text = str(plax.make_jaxpr(op.fn)(*args))
    out = op.out_dtype(op.dtypes[0])
    assert re.search(rf":{short_dtype_name(out)}\[2\] = {op.prim}[\[ ]", text), text


# --- special values -----------------------------------------------------------------------
# These use shape (2, 3) and dtypes of the tables above, so they reuse those executables.
def m23(*values, dtype=F32):
    """A (2, 3) array of ``dtype`` from six values."""
    return np.array(values).astype(dtype).reshape(2, 3)


def test_comparisons_with_nan():
    x = m23(np.nan, 1, np.nan, 1, 2, -np.inf)
    y = m23(np.nan, np.nan, 1, 1, 1, np.nan)
    for name, ref in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                      ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)]:
        check(getattr(lax, name)(x, y), ref(x, y), BOOL)


def test_max_min_propagate_nan_and_complex_is_lexicographic():
    x, y = m23(np.nan, 1, 3, -0.0, np.inf, 2), m23(1, np.nan, 2, 0.0, np.nan, -np.inf)
    check(lax.max(x, y), m23(np.nan, np.nan, 3, 0, np.nan, 2), F32)
    check(lax.min(x, y), m23(np.nan, np.nan, 2, 0, np.nan, -np.inf), F32)
    a = m23(1 + 1j, 1 + 2j, 2, 1 + 5j, -1, 1j, dtype=C64)
    b = m23(1 + 2j, 1 + 1j, 1 + 5j, 1 + 5j, -1 - 1j, 0, dtype=C64)
    check(lax.max(a, b), np.maximum(a, b), C64)
    check(lax.min(a, b), np.minimum(a, b), C64)
    check(lax.max(np.complex64(1 + 3j), b), np.maximum(np.complex64(1 + 3j), b), C64)


def test_complex_atan2_and_clamp():
    x, y = np.complex64([1 + 1j, 0.5 - 0.2j]), np.complex64([2j, 1 + 0.5j])
    # atan2(x, y) = -i log((y + i x) / sqrt(x**2 + y**2))
    xw, yw = wide(x), wide(y)
    check(lax.atan2(x, y), -1j * np.log((yw + 1j * xw) / np.sqrt(xw * xw + yw * yw)), C64,
          rtol=1e-4)
    check(lax.clamp(np.complex64(1 + 1.5j), np.complex64([1 + 1j, 2]), np.complex64(1.5)),
          np.complex64([1 + 1.5j, 1.5]), C64)


def test_integer_division_truncates_and_edge_values():
    x, y = m23(7, -7, 7, -7, 0, 9, dtype=I32), m23(2, 2, -2, -2, 5, 3, dtype=I32)
    check(lax.div(x, y), m23(3, -3, -3, 3, 0, 3, dtype=I32), I32)
    check(lax.rem(x, y), m23(1, -1, 1, -1, 0, 0, dtype=I32), I32)
    check(lax.abs(m23(-128, -3, 127, 0, 1, -1, dtype=I8)),
          m23(-128, 3, 127, 0, 1, 1, dtype=I8), I8)  # wraps, as in C
    check(lax.neg(m23(1, 0, 255, 128, 2, 3, dtype=U8)),
          m23(255, 0, 1, 128, 254, 253, dtype=U8), U8)
    check(lax.sign(m23(-2, -0.0, 0, 3, np.nan, -np.inf)), m23(-1, 0, 0, 1, np.nan, -1), F32)
    check(lax.sign(m23(0, 3, 255, 1, 0, 9, dtype=U8)), m23(0, 1, 1, 1, 0, 1, dtype=U8), U8)
    check(lax.sign(np.complex64([3 + 4j, 0])), [0.6 + 0.8j, 0], C64)


def test_shifts_past_the_bit_width():
    n = m23(31, 32, 40, 1, 32, 40, dtype=I32)
    check(lax.shift_left(m23(1, 1, -8, 3, 5, 7, dtype=I32), n),
          m23(-2 ** 31, 0, 0, 6, 0, 0, dtype=I32), I32)
    x = m23(-8, -8, 8, -8, -8, 8, dtype=I32)
    check(lax.shift_right_arithmetic(x, n), m23(-1, -1, 0, -4, -1, 0, dtype=I32), I32)
    check(lax.shift_right_logical(x, n), m23(1, 0, 0, 2 ** 31 - 4, 0, 0, dtype=I32), I32)


def test_float_special_values():
    x = m23(np.inf, -np.inf, np.nan, 0.0, -0.0, -1)
    check(lax.is_finite(x), m23(False, False, False, True, True, True, dtype=BOOL), BOOL)
    check(lax.exp(x), np.exp(x), F32)
    with np.errstate(invalid="ignore", divide="ignore"):
        check(lax.sqrt(x), np.sqrt(x), F32)
        check(lax.log(x), np.log(x), F32)
    check(lax.nextafter(x, m23(0, 0, 1, 1, -1, 0)),
          np.nextafter(x, m23(0, 0, 1, 1, -1, 0)), F32, rtol=0)


def test_pow_with_an_integer_exponent():
    x, n = m23(1.5, 2, 0, -2, 0.5, 3), m23(2, -1, -2, 3, 0, 1, dtype=I32)
    with np.errstate(divide="ignore"):
        check(lax.pow(x, n), np.power(wide(x), n), F32)
    check(lax.pow(np.complex64([1j, 2]), np.int8([3, -1])), [-1j, 0.5], C64)
    assert "c:f32[2,3] = pow a b" in str(plax.make_jaxpr(lax.pow)(x, n))
    with pytest.raises(TypeError, match="pow does not accept dtype int32 for argument x"):
        lax.pow(n, x)
    with pytest.raises(TypeError, match="lax.pow requires arguments to have the same dtypes"):
        lax.pow(x, x.astype(np.float16))


# --- integer_pow and round ------------------------------------------------------------------
@pytest.mark.parametrize("dtype,exponents", [(F32, [-3, -1, 0, 1, 2, 5]), (BF16, [-1, 3]),
                                             (C64, [-2, 3]), (I32, [0, 3])])
def test_integer_pow(dtype, exponents):
    x = sample((2, 3), dtype, "nonzero")
    for y in exponents:
        want = np.power(wide(x), y) if dtype.kind != "i" else np.power(x, y)
        check(lax.integer_pow(x, y), want, dtype, rtol=3e-2 if dtype == BF16 else 1e-5)
    y = exponents[-1]
    assert f"integer_pow[y={y}]" in str(plax.make_jaxpr(lambda v: lax.integer_pow(v, y))(x))


def test_integer_pow_errors():
    with pytest.raises(TypeError, match="negative exponent"):
        lax.integer_pow(np.int32([2]), -1)
    with pytest.raises(TypeError, match="must be a static Python int"):
        lax.integer_pow(np.float32([2]), 1.5)
    with pytest.raises(TypeError, match="integer_pow does not accept dtype bool"):
        lax.integer_pow(np.array([True]), 2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_round_both_methods(dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.4, -0.6, 3.0], dtype)
    away = lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)
    even = lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    check(away, [1, 2, 3, -1, -2, -3, 0, -1, 3], dtype, rtol=0)
    check(even, [0, 2, 2, -0.0, -2, -2, 0, -1, 3], dtype, rtol=0)
    check(lax.round(x), np.asarray(away), dtype, rtol=0)  # AWAY_FROM_ZERO by default


def test_round_params_and_errors():
    x = np.float32([0.5, 1.5])
    check(lax.round(x, 1), [0, 2], F32)  # the enum's integer value is accepted
    assert "round[rounding_method=1]" in str(plax.make_jaxpr(lambda v: lax.round(v, 1))(x))
    assert "round[rounding_method=0]" in str(plax.make_jaxpr(lax.round)(x))
    with pytest.raises(ValueError, match="not a valid RoundingMethod"):
        lax.round(x, "foo")
    with pytest.raises(TypeError, match="round does not accept dtype int32"):
        lax.round(np.int32([1]))


# --- select_n and clamp --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, I32, BOOL, BF16, C64])
def test_select_n(dtype):
    a, b, c = (sample((2, 3), dtype, seed=s) for s in range(3))
    pred = sample((2, 3), BOOL, seed=7)
    check(lax.select_n(pred, a, b), np.where(pred, b, a), dtype, rtol=0)
    check(lax.select(pred, a, b), np.where(pred, a, b), dtype, rtol=0)
    which = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    check(lax.select_n(which, a, b, c), np.choose(which, [a, b, c]), dtype, rtol=0)
    if dtype == F32:  # the other forms once
        check(lax.select_n(np.int32(2), a, b, c), c, dtype, rtol=0)
        check(lax.select_n(True, a, b), b, dtype, rtol=0)
        check(lax.select_n(pred, a), a, dtype, rtol=0)


def test_select_n_shapes_weak_type_and_staging():
    out = lax.select_n(np.zeros((0, 4), bool), np.zeros((0, 4), np.float32), np.ones((0, 4), np.float32))
    check(out, np.zeros((0, 4), np.float32), F32)
    assert lax.select_n(True, 1.0, 2.0).aval.weak_type
    assert not lax.select_n(True, np.float32(1), 2.0).aval.weak_type
    text = str(plax.make_jaxpr(lambda p, x: lax.select_n(p, x, x))(np.array([True]), np.float32([1])))
    assert "select_n" in text


@pytest.mark.parametrize("args,exc,match", [
    ((np.float32([1.0]), np.ones(1, np.float32), np.ones(1, np.float32)), TypeError,
     "must be bool or int32"),
    ((np.array([True]),) + (np.ones(1, np.float32),) * 3, TypeError, "at most 2 cases"),
    ((np.array([True]),), ValueError, "at least one case"),
    ((np.array([True, False]), np.float32(1), np.float32([2, 3])), TypeError,
     "cases must have the same shapes"),
    ((np.array([True, False]), np.ones(3, np.float32), np.ones(3, np.float32)), TypeError,
     "must be a scalar or have the cases' shape"),
    ((np.int32(1), np.ones(2, np.float32), np.ones(2, np.int32)), TypeError,
     "requires arguments to have the same dtypes.*plax.numpy.where"),
])
def test_select_n_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        lax.select_n(*args)


@pytest.mark.parametrize("dtype", [F32, I32, U8, BF16, BOOL])
def test_clamp(dtype):
    x = sample((2, 3), dtype)
    lo, hi = (np.array(False), np.array(True)) if dtype == BOOL else \
        (np.array(1 if dtype == U8 else -1, dtype), np.array(3, dtype))
    check(lax.clamp(lo, x, hi), np.clip(x, lo, hi), dtype, rtol=0)
    lo_arr = np.broadcast_to(lo, x.shape).copy()
    check(lax.clamp(lo_arr, x, hi), np.clip(x, lo, hi), dtype, rtol=0)


def test_clamp_python_scalars_staging_and_errors():
    x = np.float32([-2, 0.5, 3, np.nan])
    out = lax.clamp(0.0, x, 1.0)
    check(out, [0, 0.5, 1, np.nan], F32)
    assert not out.aval.weak_type
    assert "clamp 0.0:f32[] a 1.0:f32[]" in str(plax.make_jaxpr(lambda v: lax.clamp(0.0, v, 1.0))(x))
    with pytest.raises(TypeError, match="clamp's min must be a scalar or have the operand's shape"):
        lax.clamp(np.zeros(2, np.float32), np.zeros(3, np.float32), np.float32(1))
    with pytest.raises(TypeError, match="lax.clamp requires arguments to have the same dtypes"):
        lax.clamp(np.int32(0), x, np.float32(1))


# --- conversions ---------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst,values,want", [
    (F32, I32, [-1.7, 1.7, -0.5, 2.5, 0.0], [-1, 1, 0, 2, 0]),  # truncation toward zero
    (F32, I8, [-1.7, 1.7, 100.9, -100.9], [-1, 1, 100, -100]),
    (F32, BOOL, [np.nan, 0.0, -0.0, 0.5, -2], [True, False, False, True, True]),
    (I32, BOOL, [0, 3, -1], [False, True, True]),
    (C64, F32, [1 + 2j, -3.5 + 1j], [1, -3.5]),  # complex -> real keeps the real part
    (C64, I32, [1 + 2j, -3.5 + 1j], [1, -3]),
    (C64, BOOL, [1 + 2j, 0j, 2j], [True, False, False]),  # the real part, as in JAX
    (F32, BF16, [1.0, 3.14159, -1e-3, 1e30], None),
    (BF16, F32, [1.0, 3.140625, -2.5], [1.0, 3.140625, -2.5]),
    (F32, C64, [1.5, -2.0], [1.5, -2.0]),
    (BOOL, F32, [True, False], [1.0, 0.0]),
    (U8, I8, [200, 5], [-56, 5]),
    (I32, U8, [300, -1], [44, 255]),
    (F16, F32, [0.1, 65504.0], None),
])
def test_convert_element_type(src, dst, values, want):
    x = np.array(values).astype(src)
    out = lax.convert_element_type(x, dst)
    if want is None:
        want = wide(x).astype(dst)
    check(out, np.array(want).astype(dst), dst, rtol=0)
    assert not out.aval.weak_type


def test_convert_element_type_weak_types_and_staging():
    out = lax.convert_element_type(2.0, np.float32)
    assert isinstance(out, plax.Array) and out.dtype == F32 and not out.aval.weak_type
    same = lax.convert_element_type(np.float32([1, 2]), np.float32)
    assert isinstance(same, plax.Array)  # host values become Arrays even without a change
    arr = plax.device_put(np.float32([1, 2]))
    assert lax.convert_element_type(arr, np.float32) is arr
    check(lax.convert_element_type(np.float32([1.9]), "int32"), [1], I32)
    text = str(plax.make_jaxpr(lambda v: lax.convert_element_type(v, np.int32))(np.float32([1])))
    assert "convert_element_type[new_dtype=int32" in text and "weak_type=False" in text
    with pytest.raises(TypeError, match="new_dtype"):
        lax.convert_element_type(np.float32([1]), "foo")


@pytest.mark.parametrize("src,dst", [(F32, I32), (I32, F32), (F16, np.dtype(np.int16)),
                                     (BF16, np.dtype(np.uint16)), (U8, I8), (C64, C64)])
def test_bitcast_same_width(src, dst):
    x = sample((2, 3), src)
    check(lax.bitcast_convert_type(x, dst), x.view(dst), dst, rtol=0)


def test_bitcast_narrowing_and_widening():
    x = np.float32([1.0, -2.0, 0.1])
    out = lax.bitcast_convert_type(x, np.uint8)
    check(out, x.view(np.uint8).reshape(3, 4), U8)
    check(lax.bitcast_convert_type(np.float32(1.0), np.uint16),  # 0-d gains a dimension
                np.float32([1.0]).view(np.uint16), np.dtype(np.uint16))
    back = lax.bitcast_convert_type(np.asarray(out), np.float32)
    check(back, x, F32, rtol=0)
    check(lax.bitcast_convert_type(np.zeros((0, 2), np.int16), np.int32),
          np.zeros(0, np.int32), I32)
    assert "bitcast_convert_type[new_dtype=int32]" in str(
        plax.make_jaxpr(lambda v: lax.bitcast_convert_type(v, np.int32))(x))


@pytest.mark.parametrize("x,dst,exc,match", [
    (np.array([True]), np.uint8, TypeError, "does not convert to or from bool"),
    (np.uint8([1]), np.bool_, TypeError, "does not convert to or from bool"),
    (np.complex64([1]), np.float32, TypeError, "does not convert to or from complex64"),
    (np.float32([1]), np.complex64, TypeError, "does not convert to or from complex64"),
    (np.uint8([1, 2, 3]), np.float32, ValueError, "needs a last dimension of size 4"),
    (np.float16(1), np.float32, ValueError, "needs a last dimension of size 2"),
])
def test_bitcast_errors(x, dst, exc, match):
    with pytest.raises(exc, match=match):
        lax.bitcast_convert_type(x, dst)


# --- weak types and dtype agreement -------------------------------------------------------------
def test_python_scalars_are_weak():
    x32 = np.float32([1, 2])
    out = lax.add(x32, 2.0)
    check(out, [3, 4], F32)
    assert not out.aval.weak_type
    both = lax.add(1.0, 2.0)
    assert both.dtype == F32 and both.aval.weak_type
    assert lax.add(np.int32([1]), 2).dtype == I32
    assert lax.lt(1.0, 2.0).aval.weak_type and not lax.lt(x32, 2.0).aval.weak_type
    assert lax.is_finite(1.0).aval.weak_type
    assert lax.complex(1.0, 2.0).aval.weak_type


@pytest.mark.parametrize("x,y,got", [
    (np.float16([1]), 2.0, "float16, float32"),   # a weak float is float32 at the lax level
    (np.float32([1]), 2, "float32, int32"),
    (np.int8([1]), 2, "int8, int32"),
    (np.int32(1), np.uint32(1), "int32, uint32"),
    (np.float32(1), 1j, "float32, complex64"),
])
def test_lax_does_not_promote(x, y, got):
    match = f"lax.add requires arguments to have the same dtypes, got {got}"
    with pytest.raises(TypeError, match=match):
        lax.add(x, y)


def test_dtype_error_names_the_numpy_function():
    with pytest.raises(TypeError, match=r"plax.numpy.left_shift is a similar function"):
        lax.shift_left(np.int32(1), np.uint32(1))
    with pytest.raises(TypeError, match=r"plax.numpy.subtract is a similar function"):
        lax.sub(np.int32(1), np.float32(1))


def test_non_array_arguments():
    with pytest.raises(TypeError, match="not a valid JAX type"):
        lax.add("a", 1)
    with pytest.raises(TypeError, match="not a valid JAX type"):
        lax.sin([1.0])


# --- lax-level broadcasting ---------------------------------------------------------------------
@pytest.mark.parametrize("xs,ys,out", [
    ((2, 1), (1, 3), (2, 3)),
    ((), (2, 3), (2, 3)),
    ((2, 3), (), (2, 3)),
    ((0, 4), (1, 4), (0, 4)),
    ((0, 4), (), (0, 4)),
    ((1, 1), (2, 3), (2, 3)),
])
def test_rank0_and_size1_broadcasting(xs, ys, out):
    x, y = sample(xs, F32, seed=1), sample(ys, F32, seed=2)
    check(lax.add(x, y), x + y, F32)
    assert lax.add(x, y).shape == out
    if xs == (2, 1):  # the other lowerings (compare, complex max) once
        check(lax.lt(x, y), x < y, BOOL)
        check(lax.max(x.astype(C64), y.astype(C64)), np.maximum(x, y), C64)


def test_broadcasting_errors():
    with pytest.raises(TypeError, match="add: arrays must have the same number of dimensions"):
        lax.add(np.ones(3, np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: \(2,\), \(3,\)"):
        lax.add(np.ones(2, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="eq: arrays must have the same number of dimensions"):
        lax.eq(np.ones(3, np.float32), np.ones((1, 3), np.float32))


def test_staging_with_literals_and_broadcasting():
    text = str(plax.make_jaxpr(lambda a: lax.add(lax.sin(a), 1.0))(np.float32([1, 2])))
    assert "b:f32[2] = sin a" in text and "add b 1.0:f32[]" in text
    text = str(plax.make_jaxpr(lax.mul)(np.ones((2, 1), np.float32), np.ones((1, 3), np.float32)))
    assert ":f32[2,3] = mul a b" in text


# --- vmap ------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", UNARY + BINARY, ids=repr)
def test_vmap_matches_per_example(op):
    """Batch at 0, 1 and -1, and each argument unbatched (a batch of 3 examples of (2, 4))."""
    from helpers import check_vmap_axes
    dtype = op.dtypes[0]
    args = [sample((3, 2, 4), dtype, d, seed=i) for i, d in enumerate(op.domains)]
    check_vmap_axes(op.fn, *args)


def test_vmap_broadcasting_scalars_and_size_one_dims():
    from helpers import check_vmap
    x, s = sample((3, 2, 4), F32), sample((3,), F32, seed=1)
    check_vmap(lax.mul, x, s, in_axes=(0, 0))         # a batched scalar against arrays
    check_vmap(lax.add, x, np.float32(2), in_axes=(1, None))
    check_vmap(lax.add, x, sample((2, 1), F32), in_axes=(0, None))  # size-1 broadcasting
    check_vmap(lax.add, x, sample((1, 4, 3), F32), in_axes=(0, 2))
    j = str(plax.make_jaxpr(plax.vmap(lax.sin, in_axes=1, out_axes=1))(x))
    assert "transpose" not in j


@pytest.mark.parametrize("case", ["select_bool", "select_n_int", "select_scalar_pred", "clamp",
                                  "clamp_batched_bounds", "convert", "bitcast_narrow",
                                  "bitcast_wide", "integer_pow", "round", "stop_gradient",
                                  "chain"])
def test_vmap_special_primitives(case):
    from helpers import check_vmap, check_vmap_axes
    x, y = sample((3, 2, 4), F32), sample((3, 2, 4), F32, seed=1)
    if case == "select_bool":
        check_vmap_axes(lambda p, a, b: lax.select(p, a, b), x > 0, x, y)
    elif case == "select_n_int":
        which = sample((3, 2, 4), I32, "small") % 3
        check_vmap_axes(lambda w, a, b, c: lax.select_n(w, a, b, c), which, x, y, x * 2)
    elif case == "select_scalar_pred":
        check_vmap(lambda p, a, b: lax.select(p, a, b), np.array([True, False, True]), x, y[0],
                   in_axes=(0, 0, None))
        check_vmap(lambda p, a, b: lax.select(p, a, b), np.bool_(True), np.moveaxis(x, 0, 2), y,
                   in_axes=(None, 2, 0))
    elif case == "clamp":
        check_vmap_axes(lambda a: lax.clamp(np.float32(-0.5), a, np.float32(0.5)), x)
    elif case == "clamp_batched_bounds":
        lo, hi = sample((3,), F32, seed=2) - 1, sample((3,), F32, seed=3) + 1
        check_vmap(lambda l, a, h: lax.clamp(l, a, h), lo, x, hi, in_axes=(0, 0, 0))
        check_vmap(lax.clamp, x - 1, np.moveaxis(x, 0, 2), np.moveaxis(x + 1, 0, 1),
                   in_axes=(0, 2, 1))
        check_vmap(lambda l, a, h: lax.clamp(l, a, h), lo, x[0], np.float32(2),
                   in_axes=(0, None, None))
    elif case == "convert":
        check_vmap_axes(lambda a: lax.convert_element_type(a, np.int32), x * 4)
    elif case == "bitcast_narrow":
        check_vmap_axes(lambda a: lax.bitcast_convert_type(a, np.uint8), x)
    elif case == "bitcast_wide":
        check_vmap_axes(lambda a: lax.bitcast_convert_type(a, np.float32),
                        sample((3, 2, 4), U8, "small"))
        check_vmap(lambda a: lax.bitcast_convert_type(a, np.float32),
                   sample((4, 3), U8, "small"), in_axes=1)   # batch on the consumed axis
    elif case == "integer_pow":
        check_vmap_axes(lambda a: lax.integer_pow(a, 3), x)
    elif case == "round":
        check_vmap_axes(lambda a: lax.round(a * 3, lax.RoundingMethod.TO_NEAREST_EVEN), x)
    elif case == "stop_gradient":
        check_vmap_axes(lambda a, b: lax.stop_gradient(a) * b, x, y)
    else:
        check_vmap_axes(lambda a, b: lax.tanh(lax.add(lax.mul(a, b), lax.exp(b))), x, y)
