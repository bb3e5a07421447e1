"""Elementwise lax primitives: one table row per primitive (or per use of its static
parameters), checked by lax_rows for values against NumPy/SciPy, jit, vmap, derivatives
and jaxprs; then special values, dtype rules, weak types and errors.

Value cases: each UNARY / BINARY row runs over its dtypes at shape (2, 3), except the last
dtype at 0-d, plus its first dtype at (0, 4) (every case compiles an executable, so shapes
ride along with the dtypes instead of multiplying them). The OTHER rows run every dtype at
their shapes ((2, 3) unless the row says otherwise).
"""

import numpy as np
import pytest
import scipy.special as sp

import helpers
from helpers import BF16, BOOL, C64, F16, F32, I8, I32, U8, check, check_vmap, check_vmap_axes, \
    sample, wide
from lax_rows import ALL_GRAD, F64, REAL_GRAD, Row, _x64, dtype_cases, table_tests
import plax
from plax import lax
from plax.test_util import check_grads

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


# --- references ------------------------------------------------------------------------------
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


def _round_away(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _rem_grad_args(dtype):
    # x / y well away from integers, so trunc(x / y) is locally constant.
    return [np.asarray([[2.3, -1.7, 0.55], [-3.1, 0.35, 1.3]], dtype),
            np.asarray([[0.7, 0.9, -0.4], [1.1, -0.8, 0.5]], dtype)]


def ew(fn, ref, dtypes, inputs=("real",), wide_ref=True, **kw):
    """An elementwise row: ``ref`` computes on wide() copies (float64/complex128)."""
    reference = (lambda *a: ref(*[wide(x) for x in a])) if wide_ref else ref
    return Row(fn, reference, tuple(inputs), tuple(dtypes), **kw)


R2 = ("real", "real")
UNARY = [
    ew(lax.neg, np.negative, NUMERIC, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.floor, np.floor, FLOATS, grad="zero"),
    ew(lax.ceil, np.ceil, FLOATS, grad="zero"),
    ew(lax.exp, np.exp, INEXACT_A, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.exp2, np.exp2, INEXACT_B, accepts=INEXACT, grad="numeric", grad_dtypes=REAL_GRAD),
    ew(lax.log, np.log, INEXACT_A, ("positive",), accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.expm1, np.expm1, INEXACT_B, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.log1p, np.log1p, INEXACT_A, ("positive",), accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.tanh, np.tanh, INEXACT_B, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.logistic, lambda x: 1 / (1 + np.exp(-x)), INEXACT_A, accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.sin, np.sin, INEXACT_B, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.cos, np.cos, INEXACT_A, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.tan, np.tan, INEXACT_B, ("unit_interval",), accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.asin, np.arcsin, INEXACT_A, ("unit_interval",), accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.acos, np.arccos, INEXACT_B, ("unit_interval",), rtol={C64: 1e-4}, accepts=INEXACT,
       grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.atan, np.arctan, INEXACT_A, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.sinh, np.sinh, INEXACT_B, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.cosh, np.cosh, INEXACT_A, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.asinh, np.arcsinh, INEXACT_B, accepts=INEXACT, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.acosh, np.arccosh, INEXACT_A, ("ge1",), accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.atanh, np.arctanh, INEXACT_B, ("unit_interval",), accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.sqrt, np.sqrt, INEXACT_A, ("positive",), accepts=INEXACT, grad="numeric",
       grad_dtypes=ALL_GRAD),
    ew(lax.rsqrt, lambda x: 1 / np.sqrt(x), INEXACT_B, ("positive",), accepts=INEXACT,
       grad="numeric", grad_dtypes=ALL_GRAD),
    # cbrt's derivative is infinite at 0: the derivative check stays on the positive side
    ew(lax.cbrt, np.cbrt, FLOATS, grad="numeric", grad_dtypes=REAL_GRAD,
       grad_inputs=("positive",)),
    ew(lax.erf, sp.erf, FLOATS, grad="numeric", grad_dtypes=REAL_GRAD),
    ew(lax.erfc, sp.erfc, FLOATS, grad="numeric", grad_dtypes=REAL_GRAD),
    ew(lax.erf_inv, sp.erfinv, FLOATS, ("unit_interval",), rtol={F32: 1e-4}, grad="numeric",
       grad_dtypes=REAL_GRAD),
    ew(lax.lgamma, sp.gammaln, FLOATS, ("positive",), rtol={F32: 1e-4}, grad="numeric",
       grad_dtypes=REAL_GRAD),
    ew(lax.digamma, sp.digamma, FLOATS, ("positive",), rtol={F32: 1e-4}, grad="numeric",
       grad_dtypes=REAL_GRAD),
    ew(lax.bitwise_not, np.invert, INTBOOL, prim="not", grad="float0"),
    ew(lax.population_count, lambda x: np.bitwise_count(_unsigned(x)).astype(x.dtype), INTS,
       grad="float0"),
    ew(lax.clz, _clz, INTS, grad="float0"),
    ew(lax.sign, np.sign, NUMERIC_C, accepts=NUMERIC, grad="zero"),
    ew(lax.is_finite, np.isfinite, FLOATS, out=BOOL, grad="float0"),
    # |x| >= 0.3 in the derivative check: away from the kink (pinned in test_kinks_match_jax)
    ew(lax.abs, np.abs, [F32, F16, BF16, I32, C64, I8], out=_real_of, accepts=SIGNED,
       grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.real, np.real, [C64], out=_real_of, grad="numeric", grad_dtypes=(C64,)),
    ew(lax.imag, np.imag, [C64], out=_real_of, grad="numeric", grad_dtypes=(C64,)),
    ew(lax.conj, np.conj, [C64, F32], out=C64, grad="numeric", grad_dtypes=(C64,)),
    ew(lax.square, np.square, [F32, BF16, I8, U8, C64], accepts=NUMERIC, grad="numeric",
       grad_dtypes=ALL_GRAD),
]

BINARY = [
    ew(lax.add, np.add, NUMERIC, R2, equal_pair=True, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.sub, np.subtract, [F32, BF16, I32, U8, C64], R2, accepts=NUMERIC, equal_pair=True,
       grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.mul, np.multiply, [F32, F16, I8, U8, C64], R2, accepts=NUMERIC, equal_pair=True,
       grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.div, lambda x, y: _int_div(x, y) if x.dtype.kind in "iu" else x / y,
       [F32, F16, I32, I8, U8, C64], ("real", "nonzero"), accepts=NUMERIC, equal_pair=True,
       grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.rem, np.fmod, FLOATS + INTS, ("real", "nonzero"), equal_pair=True, grad="numeric",
       grad_dtypes=REAL_GRAD, grad_args=_rem_grad_args),
    ew(lax.pow, np.power, INEXACT_B, ("positive", "real"), accepts=INEXACT, equal_pair=True,
       grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.max, np.maximum, [F32, F16, BF16, I32, U8, C64, BOOL, I8], R2, accepts=ALL,
       equal_pair=True, grad="numeric", grad_dtypes=REAL_GRAD,
       grad_inputs=("distinct", "distinct")),
    ew(lax.min, np.minimum, [F32, I8, C64, BOOL, U8], R2, accepts=ALL, equal_pair=True,
       grad="numeric", grad_dtypes=REAL_GRAD, grad_inputs=("distinct", "distinct")),
    ew(lax.atan2, np.arctan2, FLOATS, R2, equal_pair=True, grad="numeric",
       grad_dtypes=REAL_GRAD),
    # exact, in the dtype itself
    ew(lax.nextafter, np.nextafter, FLOATS, R2, wide_ref=False, equal_pair=True, grad="zero"),
    ew(lax.bitwise_and, np.bitwise_and, INTBOOL, R2, prim="and", equal_pair=True,
       grad="float0"),
    ew(lax.bitwise_or, np.bitwise_or, INTBOOL, R2, prim="or", equal_pair=True, grad="float0"),
    ew(lax.bitwise_xor, np.bitwise_xor, INTBOOL, R2, prim="xor", equal_pair=True,
       grad="float0"),
    ew(lax.shift_left, np.left_shift, INTS, ("real", "shift"), equal_pair=True, grad="float0"),
    ew(lax.shift_right_arithmetic, np.right_shift, INTS, ("real", "shift"), equal_pair=True,
       grad="float0"),
    ew(lax.shift_right_logical, _shift_right_logical, INTS, ("real", "shift"), equal_pair=True,
       grad="float0"),
    ew(lax.complex, lambda x, y: x + 1j * y, [F32], R2, out=C64, equal_pair=True,
       grad="numeric", grad_dtypes=REAL_GRAD),
    ew(lax.eq, np.equal, [F32, BF16, I32, U8, BOOL, C64], R2, out=BOOL, accepts=ALL,
       equal_pair=True, grad="float0"),
    ew(lax.ne, np.not_equal, [F32, F16, I8, U8, BOOL, C64], R2, out=BOOL, accepts=ALL,
       equal_pair=True, grad="float0"),
    ew(lax.lt, np.less, [F32, I32, U8, BOOL], R2, out=BOOL, accepts=REAL, equal_pair=True,
       grad="float0"),
    ew(lax.le, np.less_equal, [F32, I32, U8, BOOL], R2, out=BOOL, accepts=REAL, equal_pair=True,
       grad="float0"),
    ew(lax.gt, np.greater, [F32, I8, U8, BOOL], R2, out=BOOL, accepts=REAL, equal_pair=True,
       grad="float0"),
    ew(lax.ge, np.greater_equal, [F32, I8, U8, BOOL], R2, out=BOOL, accepts=REAL,
       equal_pair=True, grad="float0"),
]

SELECT_DTYPES = [F32, I32, BOOL, BF16, C64]
# select_n, clamp, integer_pow, round and the conversions (static parameters in the rows;
# the variants skip test_jit and test_vmap, see lax_rows)
OTHER = [
    # (an integer operand comes back as it is, as in JAX: no primitive, no Array)
    ew(lax.stop_gradient, lambda x: x, [F32, C64], grad="zero"),
    ew(lax.select_n, lambda p, a, b: np.where(p, b, a), SELECT_DTYPES, ("bool", "real", "real"),
       wide_ref=False, rtol=0, grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.select_n, lambda w, a, b, c: np.choose(w, [a, b, c]), SELECT_DTYPES,
       ("which3", "real", "real", "real"), wide_ref=False, rtol=0, name="select_n-3",
       grad="numeric", grad_dtypes=ALL_GRAD),
    ew(lax.select, lambda p, a, b: np.where(p, a, b), SELECT_DTYPES, ("bool", "real", "real"),
       wide_ref=False, rtol=0, prim="select_n", grad="numeric"),
    # bounds on either side of zero, so some elements are clipped and some not
    ew(lax.clamp, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi), [F32, I32, BF16],
       ("negative", "real", "positive"), grad="numeric", grad_dtypes=REAL_GRAD),
    ew(lax.clamp, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi), [F32, I8],
       ("negative", "real", "positive"), shapes=((), (2, 3), ()), name="clamp-scalar-bounds",
       grad="numeric", grad_dtypes=REAL_GRAD),
] + [
    ew(lax.integer_pow, lambda x, y=y: np.power(x, y), dts, ("nonzero",), static=(y,),
       name=f"integer_pow-{y}", params={"y": y}, rtol={BF16: 3e-2, F32: 1e-5, C64: 1e-5},
       grad="numeric" if grads else None, grad_dtypes=grads, grad_inputs=("real",),
       variant=y != 3)
    for y, dts, grads in [(3, [F32, BF16, C64, I32], ALL_GRAD), (-2, [F32, C64], ALL_GRAD),
                          (-1, [F32, BF16], ()), (0, [F32, I32], REAL_GRAD),
                          (1, [F32], REAL_GRAD), (2, [F32], ()), (5, [F32], ()), (-3, [F32], ())]
] + [
    ew(lax.round, np.round, FLOATS, static=(lax.RoundingMethod.TO_NEAREST_EVEN,),
       name="round-to-nearest-even", params={"rounding_method": 1}, rtol=0, grad="zero"),
    ew(lax.round, _round_away, FLOATS, static=(lax.RoundingMethod.AWAY_FROM_ZERO,),
       name="round-away-from-zero", params={"rounding_method": 0}, rtol=0, grad="zero",
       variant=True),
    # float -> int truncates toward zero, as NumPy's astype
    ew(lax.convert_element_type, lambda x: x.astype(np.int32), [F32, BF16, F16], ("nonzero",),
       static=(np.int32,), wide_ref=False, out=I32, name="convert_element_type-int32",
       params={"new_dtype": I32}, grad="float0"),
    ew(lax.convert_element_type, lambda x: x.astype(np.float32), [I32, U8, BOOL, F16],
       static=(np.float32,), wide_ref=False, out=F32, name="convert_element_type-float32",
       params={"new_dtype": F32}, variant=True),
    ew(lax.bitcast_convert_type,
       lambda x: np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(x.shape + (4,)),
       [F32, I32], static=(np.uint8,), wide_ref=False, out=U8,
       name="bitcast_convert_type-uint8", params={"new_dtype": U8}, grad="float0"),
]

ROWS = UNARY + BINARY + OTHER


def _value_cases(rows):
    cases = []
    for row in rows:
        if row.shapes is not None or any(row is r for r in OTHER):
            cases += dtype_cases([row])  # at the row's shapes, or (2, 3)
            continue
        dts = list(row.dtypes)
        shapes = [(2, 3)] * (len(dts) - 1) + [()] if len(dts) > 1 else [(2, 3), ()]
        dts = dts if len(dts) > 1 else dts * 2
        for d, shape in list(zip(dts, shapes)) + [(row.dtypes[0], (0, 4))]:
            cases.append(pytest.param(row, d, row.arg_shapes(shape),
                                      id=f"{row.name}-{np.dtype(d).name}-{shape}"))
    return cases


test_value, test_jit, test_vmap, test_grad, test_jaxpr = table_tests(ROWS, _value_cases)


def _rejected_dtype(row):
    return next((d for d in [BOOL, U8, I32, F32, C64] if d not in row.accepts), None)


@pytest.mark.parametrize("row", [r for r in UNARY + BINARY if _rejected_dtype(r)], ids=repr)
def test_rejects_dtype(row):
    dtype = _rejected_dtype(row)
    args = [np.zeros((2,), dtype)] * len(row.inputs)
    with pytest.raises(TypeError, match=f"{row.prim} does not accept dtype {dtype.name}"):
        row.call(*args)


# --- special values -----------------------------------------------------------------------
# These use shape (2, 3) and dtypes of the tables above, so they reuse those executables.
def m23(*values, dtype=F32):
    """A (2, 3) array of ``dtype`` from six values."""
    return np.array(values).astype(dtype).reshape(2, 3)


def test_comparisons_with_nan():
    x = m23(np.nan, 1, np.nan, 1, 2, -np.inf)
    y = m23(np.nan, np.nan, 1, 1, 1, np.nan)
    for fn, ref in [(lax.eq, np.equal), (lax.ne, np.not_equal), (lax.lt, np.less),
                    (lax.le, np.less_equal), (lax.gt, np.greater), (lax.ge, np.greater_equal)]:
        check(fn(x, y), ref(x, y), BOOL)


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
def test_select_n_scalar_and_single_case_forms():
    a, b, c = (sample((2, 3), F32, seed=s) for s in range(3))
    pred = sample((2, 3), BOOL, seed=7)
    check(lax.select_n(np.int32(2), a, b, c), c, F32, rtol=0)
    check(lax.select_n(True, a, b), b, F32, rtol=0)
    check(lax.select_n(pred, a), a, F32, rtol=0)


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


# --- vmap beyond the table ---------------------------------------------------------------------
def test_vmap_broadcasting_scalars_and_size_one_dims():
    x, s = sample((3, 2, 4), F32), sample((3,), F32, seed=1)
    check_vmap(lax.mul, x, s, in_axes=(0, 0))         # a batched scalar against arrays
    check_vmap(lax.add, x, np.float32(2), in_axes=(1, None))
    check_vmap(lax.add, x, sample((2, 1), F32), in_axes=(0, None))  # size-1 broadcasting
    check_vmap(lax.add, x, sample((1, 4, 3), F32), in_axes=(0, 2))
    j = str(plax.make_jaxpr(plax.vmap(lax.sin, in_axes=1, out_axes=1))(x))
    assert "transpose" not in j


def test_vmap_select_and_clamp_with_scalar_operands():
    x, y = sample((3, 2, 4), F32), sample((3, 2, 4), F32, seed=1)
    check_vmap(lambda p, a, b: lax.select(p, a, b), np.array([True, False, True]), x, y[0],
               in_axes=(0, 0, None))
    check_vmap(lambda p, a, b: lax.select(p, a, b), np.bool_(True), np.moveaxis(x, 0, 2), y,
               in_axes=(None, 2, 0))
    lo, hi = sample((3,), F32, seed=2) - 1, sample((3,), F32, seed=3) + 1
    check_vmap(lambda l, a, h: lax.clamp(l, a, h), lo, x, hi, in_axes=(0, 0, 0))
    check_vmap(lax.clamp, x - 1, np.moveaxis(x, 0, 2), np.moveaxis(x + 1, 0, 1),
               in_axes=(0, 2, 1))
    check_vmap(lambda l, a, h: lax.clamp(l, a, h), lo, x[0], np.float32(2),
               in_axes=(0, None, None))


def test_vmap_bitcast_widening_and_a_chain():
    check_vmap_axes(lambda a: lax.bitcast_convert_type(a, np.float32),
                    sample((3, 2, 4), U8, "small"))
    check_vmap(lambda a: lax.bitcast_convert_type(a, np.float32),
               sample((4, 3), U8, "small"), in_axes=1)   # batch on the consumed axis
    x, y = sample((3, 2, 4), F32), sample((3, 2, 4), F32, seed=1)
    check_vmap_axes(lambda a, b: lax.stop_gradient(a) * b, x, y)
    check_vmap_axes(lambda a, b: lax.tanh(lax.add(lax.mul(a, b), lax.exp(b))), x, y)


# --- derivatives beyond the table --------------------------------------------------------------
def _values(shape, dtype, lo=0.3, hi=2, seed=0):
    """|x| in [lo, hi] with random signs (complex: a small imaginary part)."""
    rng = np.random.default_rng(seed)
    v = rng.uniform(lo, hi, shape) * rng.choice([-1, 1], shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.uniform(-0.3, 0.3, shape)
    return np.asarray(v, dtype)


def _check(f, args, dtype, **kw):
    kw = {**helpers.grad_check_defaults(dtype), **kw}
    with _x64(dtype):
        check_grads(f, args, 2, modes=("fwd", "rev"), **kw)


# lax-level broadcasting of rank-0 and size-1 operands: (function, shapes, dtypes)
BROADCAST_GRADS = [
    ("add_scalar", lax.add, ((), (2, 3)), ALL_GRAD),
    ("sub_scalar", lax.sub, ((2, 3), ()), ALL_GRAD),
    ("mul_scalar", lax.mul, ((), (3,)), ALL_GRAD),
    ("mul_size1", lax.mul, ((1, 3), (2, 3)), REAL_GRAD),
    ("div_scalar", lax.div, ((2, 3), ()), ALL_GRAD),
    ("pow_scalar_exp", lax.pow, ((3,), ()), REAL_GRAD),
]


@pytest.mark.parametrize("name,fn,shapes,dtype",
                         [(n, f, s, d) for n, f, s, ds in BROADCAST_GRADS for d in ds],
                         ids=lambda v: v.name if isinstance(v, np.dtype) else None)
def test_grad_broadcasting(name, fn, shapes, dtype):
    with _x64(dtype):
        x = _values(shapes[0], dtype, seed=1)
        if fn is lax.pow:
            x = np.abs(x.real).astype(dtype)
        _check(fn, (x, _values(shapes[1], dtype, seed=2)), dtype)


@pytest.mark.parametrize("dtype", REAL_GRAD, ids=str)
def test_grad_pow_integer_exponent(dtype):
    y = np.asarray([2, -1, 3], np.int32)
    with _x64(dtype):
        _check(lambda x: lax.pow(x, y), (np.abs(_values((3,), dtype)),), dtype)


@pytest.mark.parametrize("dtype", ALL_GRAD, ids=str)
def test_grad_select_n_scalar_predicate(dtype):
    with _x64(dtype):
        _check(lambda a: lax.select_n(np.asarray(True), a, lax.neg(a)), (_values((3,), dtype),),
               dtype)


@pytest.mark.parametrize("src,dst", [(F32, F64), (F64, F32), (F32, C64), (C64, C64)], ids=str)
def test_grad_convert_element_type(src, dst):
    def f(x):
        return lax.mul(lax.convert_element_type(x, dst), lax.convert_element_type(x, dst))
    with plax.enable_x64():
        check_grads(f, (_values((3,), src),), 2, modes=("fwd", "rev"), atol=1e-2,
                    rtol=1e-2, eps=1e-3)


def test_grad_complex_parts_composed():
    z = _values((3,), C64)
    for f in (lambda z: lax.mul(lax.conj(z), z), lambda z: lax.complex(lax.imag(z), lax.real(z))):
        _check(f, (z,), C64)


@pytest.mark.parametrize("dtype", REAL_GRAD, ids=str)
def test_grad_conj_of_real(dtype):
    # conj of a real array is complex (as in JAX); its transpose takes the real part back
    with _x64(dtype):
        _check(lambda x: lax.real(lax.mul(lax.conj(x), lax.conj(x))), (_values((3,), dtype),),
               dtype)


# integer/bool results reached from a float input: float0 tangents, no reverse contribution
def test_stop_gradient_blocks_second_order():
    f = lambda x: lax.mul(lax.stop_gradient(lax.square(x)), lax.sin(x))  # noqa: E731
    x = np.asarray([0.3, -1.2], F32)
    g = plax.grad(lambda x: lax.reduce_sum(f(x), (0,)))(x)
    np.testing.assert_allclose(np.asarray(g), x * x * np.cos(x), rtol=1e-6)
    g2 = plax.grad(lambda x: lax.reduce_sum(plax.grad(
        lambda x: lax.reduce_sum(f(x), (0,)))(x), (0,)))(x)
    np.testing.assert_allclose(np.asarray(g2), -x * x * np.sin(x), rtol=1e-6)


# --- kinks: the values JAX gives at ties and zeros ---------------------------------------
def test_kinks_match_jax():
    grad2 = plax.grad(lax.max, argnums=(0, 1))
    assert [float(v) for v in grad2(F32.type(1.0), F32.type(1.0))] == [0.5, 0.5]
    _, t = plax.jvp(lax.abs, (np.asarray([0.0, -0.0, 2.0, -2.0], F32),), (np.ones(4, F32),))
    np.testing.assert_array_equal(np.asarray(t), [1.0, 1.0, 1.0, -1.0])
    _, t = plax.jvp(lax.abs, (np.zeros(2, C64),), (np.ones(2, C64),))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 0.0])


@pytest.mark.parametrize("args,expected", [
    ((1.0, 1.0, 2.0), (0, 0, 0)), ((1.0, 2.0, 2.0), (0, 0, 0)), ((3.0, 0.0, 2.0), (0, 0, 0)),
    ((3.0, 2.5, 2.0), (0, 0, 1)), ((0.0, -1.0, 2.0), (1, 0, 0)), ((0.0, 1.0, 2.0), (0, 1, 0)),
])
def test_clamp_edges_match_jax(args, expected):
    g = plax.grad(lax.clamp, argnums=(0, 1, 2))(*[F32.type(a) for a in args])
    assert tuple(float(v) for v in g) == expected


def test_dtype_checks_remember_only_what_they_accepted():
    # Accepted (category, dtype) pairs are remembered: float32 accepted by add must still be
    # refused by an integer-only op, every time, and a float0 by add.
    x = np.array([1.0, 2.0], F32)
    np.testing.assert_array_equal(lax.add(x, x), [2.0, 4.0])
    for _ in range(2):
        with pytest.raises(TypeError, match="shift_left does not accept dtype float32"):
            lax.shift_left(x, x)
        np.testing.assert_array_equal(lax.sub(x, x), [0.0, 0.0])
    zeros0 = np.zeros((2,), plax.dtypes.float0)
    with pytest.raises(TypeError, match="Called add with a float0 array"):
        lax.add(zeros0, zeros0)
