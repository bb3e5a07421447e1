"""plax.numpy elementwise functions and Array operators against NumPy (and JAX's promotion).

Table-driven: one row per function with its NumPy reference, dtypes and input domain. Most
inputs have shape (2, 3) so the one-primitive executables are shared between tests.
"""
import math
from dataclasses import dataclass

import numpy as np
import pytest

from helpers import BF16, BOOL, C64, F16, F32, I8, I16, I32, U8, check, sample, wide
import plax
import plax.numpy as jnp


def put(x):
    return plax.device_put(np.asarray(x))


# --- output dtype rules (JAX's) ----------------------------------------------------------------
def same(d):
    return d


def inexact(d):
    return d if d.kind in "fc" or d == BF16 else F32


def real_of(d):
    return F32 if d == C64 else d


def boolean(d):
    return BOOL


def numeric(d):
    return I32 if d == BOOL else d


@dataclass
class Fn:
    name: str
    ref: object          # NumPy reference, applied to wide() inputs
    dtypes: list
    domains: tuple = ("real",)
    out: object = same
    rtol: float = None

    def __repr__(self):
        return self.name


UNARY = [
    Fn("sin", np.sin, [F32, I32, BF16, C64], out=inexact),
    Fn("cos", np.cos, [F32, U8, F16], out=inexact),
    Fn("tan", np.tan, [F32, C64], ("unit",), out=inexact),
    Fn("arcsin", np.arcsin, [F32, F16], ("unit",), out=inexact),
    Fn("arccos", np.arccos, [F32, I8], ("unit",), out=inexact),
    Fn("arctan", np.arctan, [F32, I32], out=inexact),
    Fn("sinh", np.sinh, [F32, BF16], out=inexact),
    Fn("cosh", np.cosh, [F32, C64], out=inexact),
    Fn("tanh", np.tanh, [F32, BOOL], out=inexact),
    Fn("arcsinh", np.arcsinh, [F32, I32], out=inexact),
    Fn("arccosh", np.arccosh, [F32, U8], ("ge1",), out=inexact),
    Fn("arctanh", np.arctanh, [F32, F16], ("unit",), out=inexact),
    Fn("exp", np.exp, [F32, I32, C64, BF16], out=inexact),
    Fn("exp2", np.exp2, [F32, I8], out=inexact),
    Fn("expm1", np.expm1, [F32, F16], out=inexact),
    Fn("log", np.log, [F32, I32, C64], ("pos",), out=inexact),
    Fn("log1p", np.log1p, [F32, BF16], ("pos",), out=inexact),
    Fn("log2", np.log2, [F32, I32], ("pos",), out=inexact),
    Fn("log10", np.log10, [F32, U8], ("pos",), out=inexact),
    Fn("sqrt", np.sqrt, [F32, I32, C64, F16], ("pos",), out=inexact),
    Fn("cbrt", np.cbrt, [F32, I32], out=inexact),
    Fn("reciprocal", np.reciprocal, [F32, C64, I32], ("nonzero",), out=inexact),
    Fn("deg2rad", np.deg2rad, [F32, I32], out=inexact),
    Fn("rad2deg", np.rad2deg, [F32, BF16], out=inexact),
    Fn("negative", np.negative, [F32, I32, U8, I8, C64, BF16]),
    Fn("positive", lambda x: x, [F32, I32, BOOL]),  # np.positive rejects bool; JAX does not
    Fn("absolute", np.absolute, [F32, I8, U8, BOOL, C64], out=real_of),
    Fn("fabs", np.fabs, [F32, I32], out=inexact),
    Fn("sign", np.sign, [F32, I32, U8, C64]),
    Fn("floor", np.floor, [F32, I32, BF16, BOOL]),
    Fn("ceil", np.ceil, [F32, I8, F16]),
    Fn("trunc", np.trunc, [F32, I32]),
    Fn("rint", np.rint, [F32, I32, C64], out=inexact),
    Fn("square", np.square, [F32, I32, U8, BOOL, C64], out=numeric),
    Fn("isnan", np.isnan, [F32, I32, C64, BF16], out=boolean),
    Fn("isinf", np.isinf, [F32, I32, C64], out=boolean),
    Fn("isfinite", np.isfinite, [F32, U8, C64, F16], out=boolean),
    Fn("signbit", np.signbit, [F32, I32, U8, BF16], out=boolean),
    Fn("isposinf", np.isposinf, [F32, I32], out=boolean),
    Fn("isneginf", np.isneginf, [F32, I32], out=boolean),
    Fn("real", np.real, [C64, F32, I32], out=real_of),
    Fn("imag", np.imag, [C64, F32, BOOL], out=real_of),
    Fn("conjugate", np.conjugate, [C64, F32, I32]),
    Fn("angle", np.angle, [C64, F32, I32], out=lambda d: F32),
    Fn("bitwise_not", np.invert, [I32, U8, BOOL]),
    Fn("logical_not", np.logical_not, [F32, I32, BOOL, C64], out=boolean),
]


def _logaddexp(x, y):
    return np.log(np.exp(x) + np.exp(y)) if x.dtype.kind == "c" else np.logaddexp(x, y)


BINARY = [
    Fn("add", np.add, [F32, I32, U8, BOOL, C64, BF16], ("real", "real")),
    Fn("subtract", np.subtract, [F32, I32, U8, C64, F16], ("real", "real")),
    Fn("multiply", np.multiply, [F32, I32, I8, BOOL, C64], ("real", "real")),
    Fn("true_divide", np.true_divide, [F32, I32, C64, U8], ("real", "nonzero"), out=inexact),
    Fn("floor_divide", np.floor_divide, [F32, I32, U8, I8, BF16], ("real", "nonzero")),
    Fn("remainder", np.remainder, [F32, I32, U8, F16], ("real", "nonzero")),
    Fn("fmod", np.fmod, [F32, I32, I8], ("real", "nonzero")),
    Fn("power", np.power, [F32, I32, U8, C64], ("pos", "small")),
    Fn("float_power", np.float_power, [F32, I32], ("pos", "small"), out=inexact),
    Fn("maximum", np.maximum, [F32, I32, BOOL, C64], ("real", "real")),
    Fn("minimum", np.minimum, [F32, U8, C64], ("real", "real")),
    Fn("fmax", np.fmax, [F32, I32], ("real", "real")),
    Fn("fmin", np.fmin, [F32, I8], ("real", "real")),
    Fn("arctan2", np.arctan2, [F32, I32], ("real", "real"), out=inexact),
    Fn("hypot", np.hypot, [F32, I32], ("real", "real"), out=inexact),
    Fn("logaddexp", _logaddexp, [F32, F16, C64], ("real", "real"), out=inexact),
    Fn("logaddexp2", np.logaddexp2, [F32, I32], ("real", "real"), out=inexact),
    Fn("copysign", np.copysign, [F32, I32], ("real", "nonzero"), out=inexact),
    Fn("nextafter", None, [F32, F16], ("real", "real")),  # exact: np.nextafter in the dtype
    Fn("heaviside", np.heaviside, [F32, I32], ("unit", "real"), out=inexact),
    Fn("equal", np.equal, [F32, I32, BOOL, C64], ("unit", "unit"), out=boolean),
    Fn("not_equal", np.not_equal, [F32, U8, C64], ("unit", "unit"), out=boolean),
    Fn("less", np.less, [F32, I32, U8, C64], ("unit", "unit"), out=boolean),
    Fn("less_equal", np.less_equal, [F32, I8, C64], ("unit", "unit"), out=boolean),
    Fn("greater", np.greater, [F32, I32, BOOL, C64], ("unit", "unit"), out=boolean),
    Fn("greater_equal", np.greater_equal, [F32, U8, C64], ("unit", "unit"), out=boolean),
    Fn("bitwise_and", np.bitwise_and, [I32, U8, BOOL], ("real", "real")),
    Fn("bitwise_or", np.bitwise_or, [I32, I8, BOOL], ("real", "real")),
    Fn("bitwise_xor", np.bitwise_xor, [I32, U8, BOOL], ("real", "real")),
    Fn("left_shift", np.left_shift, [I32, U8, I8], ("real", "shift")),
    Fn("right_shift", np.right_shift, [I32, U8, I8], ("real", "shift")),
    Fn("logical_and", np.logical_and, [BOOL, I32, F32, C64], ("unit", "unit"), out=boolean),
    Fn("logical_or", np.logical_or, [BOOL, I32, C64], ("unit", "unit"), out=boolean),
    Fn("logical_xor", np.logical_xor, [BOOL, F32, C64], ("unit", "unit"), out=boolean),
]


def _inputs(fn, dtype, shape=(2, 3)):
    args = [sample(shape, dtype, d, seed=i) for i, d in enumerate(fn.domains)]
    if len(args) == 2 and shape == (2, 3) and fn.domains[0] == fn.domains[1]:
        args[1][0, :2] = args[0][0, :2]  # some equal pairs for comparisons and max/min
    return args


def check_fn(fn, dtype, shape=(2, 3)):
    args = _inputs(fn, dtype, shape)
    out = getattr(jnp, fn.name)(*[put(a) for a in args])
    out_dtype = fn.out(np.dtype(dtype))
    if fn.ref is None:
        want = np.nextafter(*args)
    else:
        # Integer inputs of inexact functions: NumPy would compute in float16 for 8-bit ones.
        widen = out_dtype.kind in "fc" or out_dtype == BF16
        ref_args = [a.astype(np.float64) if widen and a.dtype.kind in "iub" else wide(a) for a in args]
        with np.errstate(all="ignore"):
            want = np.asarray(fn.ref(*ref_args))
    if out_dtype.kind in "iub":
        want = want.astype(out_dtype)
    check(out, want, out_dtype, weak=False, rtol=fn.rtol)
    return out


def _cases(table):
    return [pytest.param(fn, d, id=f"{fn.name}-{np.dtype(d).name}") for fn in table for d in fn.dtypes]


@pytest.mark.parametrize("fn,dtype", _cases(UNARY))
def test_unary(fn, dtype):
    check_fn(fn, dtype)


@pytest.mark.parametrize("fn,dtype", _cases(BINARY))
def test_binary(fn, dtype):
    check_fn(fn, dtype)


@pytest.mark.parametrize("fn", UNARY + BINARY, ids=repr)
def test_staging_matches_eager_types(fn):
    """Traced, each function gives the avals eager execution gives (no concrete values used)."""
    dtype = fn.dtypes[0]
    args = _inputs(fn, dtype)
    jaxpr = plax.make_jaxpr(getattr(jnp, fn.name))(*args)
    (aval,) = jaxpr.out_avals
    assert aval.shape == (2, 3) and aval.dtype == fn.out(np.dtype(dtype)) and not aval.weak_type


@pytest.mark.parametrize("name,shapes", [
    ("add", [(2, 3), (3,)]), ("multiply", [(2, 1), (1, 3)]), ("maximum", [(0, 3), (3,)]),
    ("copysign", [(), (2, 3)]), ("fmax", [(2, 3), ()]), ("hypot", [(2, 1), ()]),
    ("heaviside", [(2, 3), (2, 1)]), ("power", [(), (3,)]), ("floor_divide", [(2, 3), ()]),
    ("logaddexp", [(3,), (2, 3)]), ("less", [(0, 4), ()]), ("remainder", [(3,), (2, 3)]),
])
def test_broadcasting(name, shapes):
    fn = next(f for f in BINARY if f.name == name)
    args = [sample(s, F32, d, seed=i) for i, (s, d) in enumerate(zip(shapes, fn.domains))]
    out = getattr(jnp, name)(*args)
    with np.errstate(all="ignore"):
        want = fn.ref(*[wide(a) for a in args])
    check(out, np.asarray(want).astype(fn.out(F32)), fn.out(F32))


@pytest.mark.parametrize("shape", [(), (3,), (0, 4)])
def test_other_shapes(shape):
    x = sample(shape, F32, "pos")
    check(jnp.sqrt(x), np.sqrt(x), F32)
    check(jnp.isnan(x), np.isnan(x), BOOL)
    check(jnp.maximum(x, 1.0), np.maximum(x, 1.0), F32)


# --- promotion and weak types (expected values are JAX 0.10's) ----------------------------------
def arr(dtype):
    """[1, 2, 3] in both rows of a (2, 3) array (the shape the tables above compile for)."""
    return put(np.array([[1, 2, 3], [1, 2, 3]]).astype(dtype))


PROMOTION = {
    "i32 + 1.5": (lambda: arr(I32) + 1.5, F32, True, [2.5, 3.5, 4.5]),
    "f16 + 2.0": (lambda: arr(F16) + 2.0, F16, False, [3, 4, 5]),
    "f16 + 2": (lambda: arr(F16) + 2, F16, False, [3, 4, 5]),
    "u8 + i8": (lambda: arr(U8) + arr(I8), I16, False, [2, 4, 6]),
    "u8 + i32": (lambda: arr(U8) + arr(I32), I32, False, [2, 4, 6]),
    "bf16 + f16": (lambda: arr(BF16) + arr(F16), F32, False, [2, 4, 6]),
    "i32 + f16": (lambda: arr(I32) + arr(F16), F16, False, [2, 4, 6]),
    "i8 + bf16": (lambda: arr(I8) + arr(BF16), BF16, False, [2, 4, 6]),
    "bool + 2": (lambda: arr(BOOL) + 2, I32, True, [3, 3, 3]),
    "bool + 2.0": (lambda: arr(BOOL) + 2.0, F32, True, [3, 3, 3]),
    "bool + bool": (lambda: arr(BOOL) + arr(BOOL), BOOL, False, [True] * 3),
    "bool * bool": (lambda: arr(BOOL) * arr(BOOL), BOOL, False, [True] * 3),
    "f32 + np.float64": (lambda: arr(F32) + np.float64(2), F32, False, [3, 4, 5]),
    "i8 + np.int64": (lambda: arr(I8) + np.int64(2), I32, False, [3, 4, 5]),
    "i8 + np.int8": (lambda: arr(I8) + np.int8(2), I8, False, [3, 4, 5]),
    "u8 + 300 wraps": (lambda: arr(U8) + 300, U8, False, [45, 46, 47]),
    "f32 + 2j": (lambda: arr(F32) + 2j, C64, False, [1 + 2j, 2 + 2j, 3 + 2j]),
    "f16 + 2j": (lambda: arr(F16) + 2j, C64, False, [1 + 2j, 2 + 2j, 3 + 2j]),
    "i32 + 2j": (lambda: arr(I32) + 2j, C64, True, [1 + 2j, 2 + 2j, 3 + 2j]),
    "c64 + f32": (lambda: arr(C64) + arr(F32), C64, False, [2, 4, 6]),
    "add(1.5, 2)": (lambda: jnp.add(1.5, 2), F32, True, 3.5),
    "add(2, 3)": (lambda: jnp.add(2, 3), I32, True, 5),
    "add(True, True)": (lambda: jnp.add(True, True), BOOL, False, True),
    "np f32 array + i32": (lambda: np.float32([[1, 2, 3]] * 2) + arr(I32), F32, False, [2, 4, 6]),
    "np i8 array + i32": (lambda: np.int8([[1, 2, 3]] * 2) + arr(I32), I32, False, [2, 4, 6]),
    "np i8 array * f16": (lambda: np.int8([[1, 2, 3]] * 2) * arr(F16), F16, False, [1, 4, 9]),
    "i32 / i32": (lambda: arr(I32) / arr(I32), F32, False, [1, 1, 1]),
    "u8 / 2": (lambda: arr(U8) / 2, F32, False, [0.5, 1, 1.5]),
    "f16 / 2": (lambda: arr(F16) / 2, F16, False, [0.5, 1, 1.5]),
    "i32 // 2": (lambda: arr(I32) // 2, I32, False, [0, 1, 1]),
    "i32 // 2.0": (lambda: arr(I32) // 2.0, F32, True, [0, 1, 1]),
    "i32 ** 2": (lambda: arr(I32) ** 2, I32, False, [1, 4, 9]),
    "i32 ** 2.0": (lambda: arr(I32) ** 2.0, F32, True, [1, 4, 9]),
    "2 ** i32": (lambda: 2 ** arr(I32), I32, False, [2, 4, 8]),
    "u8 << 1": (lambda: arr(U8) << 1, U8, False, [2, 4, 6]),
    "1 << u8": (lambda: 1 << arr(U8), U8, False, [2, 4, 8]),
    "bool & True": (lambda: arr(BOOL) & True, BOOL, False, [True] * 3),
    "i8 & 3": (lambda: arr(I8) & 3, I8, False, [1, 2, 3]),
    "~u8": (lambda: ~arr(U8), U8, False, [254, 253, 252]),
    "~bool": (lambda: ~arr(BOOL), BOOL, False, [False] * 3),
    "-u8": (lambda: -arr(U8), U8, False, [255, 254, 253]),
    "abs(i8)": (lambda: abs(arr(I8)), I8, False, [1, 2, 3]),
    "i32 < 1.5": (lambda: arr(I32) < 1.5, BOOL, True, [True, False, False]),
    "f32 == 2": (lambda: arr(F32) == 2, BOOL, False, [False, True, False]),
    "i32 % -2": (lambda: arr(I32) % -2, I32, False, [-1, 0, -1]),
    "-7 % i32": (lambda: -7 % arr(I32), I32, False, [0, 1, 2]),
    "where(b, i8, f16)": (lambda: jnp.where(arr(BOOL), arr(I8), arr(F16)), F16, False, [1, 2, 3]),
    "where(b, 1, 2.5)": (lambda: jnp.where(arr(BOOL), 1, 2.5), F32, True, [1, 1, 1]),
    "where(b, i32, 2.5)": (lambda: jnp.where(arr(BOOL), arr(I32), 2.5), F32, True, [1, 2, 3]),
    "clip(i32, 0.5, 2)": (lambda: jnp.clip(arr(I32), 0.5, 2), F32, True, [1, 2, 2]),
    "clip(u8, 1, 2)": (lambda: jnp.clip(arr(U8), 1, 2), U8, False, [1, 2, 2]),
    "clip(f16, 1.5, 2)": (lambda: jnp.clip(arr(F16), 1.5, 2), F16, False, [1.5, 2, 2]),
    "sin(1.0)": (lambda: jnp.sin(1.0), F32, True, math.sin(1)),
    "sin(1)": (lambda: jnp.sin(1), F32, True, math.sin(1)),
    "floor(1.5)": (lambda: jnp.floor(1.5), F32, True, 1.0),
    "floor(3)": (lambda: jnp.floor(3), I32, True, 3),
    "positive(2.5)": (lambda: jnp.positive(2.5), F32, True, 2.5),
    "real(2)": (lambda: jnp.real(2), I32, True, 2),
    "isnan(3)": (lambda: jnp.isnan(3), BOOL, True, False),
    "deg2rad(180)": (lambda: jnp.deg2rad(180), F32, True, math.pi),
    "power(bool, 2)": (lambda: jnp.power(arr(BOOL), 2), I32, False, [1, 1, 1]),
    "float_power(f16, 2)": (lambda: jnp.float_power(arr(F16), 2), F16, False, [1, 4, 9]),
    "fmod(i32, 2.0)": (lambda: jnp.fmod(arr(I32), 2.0), F32, True, [1, 0, 1]),
    "fmax(i32, 1.5)": (lambda: jnp.fmax(arr(I32), 1.5), F32, True, [1.5, 2, 3]),
    "left_shift(bool, 1)": (lambda: jnp.left_shift(arr(BOOL), 1), I32, True, [2, 2, 2]),
    "logaddexp(f16, 1.0)": (lambda: jnp.logaddexp(arr(F16), 1.0), F16, False,
                            [1.693359375, 2.3125, 3.126953125]),
    "nextafter(f16, 2)": (lambda: jnp.nextafter(arr(F16), 2), F16, False,
                          [1.0009765625, 2.0, 2.998046875]),
    "maximum(c64, 1)": (lambda: jnp.maximum(arr(C64), 1), C64, False, [1, 2, 3]),
    "imag(f32)": (lambda: jnp.imag(arr(F32)), F32, False, [0, 0, 0]),
    "angle(i32)": (lambda: jnp.angle(arr(I32)), F32, False, [0, 0, 0]),
}


@pytest.mark.parametrize("case", list(PROMOTION))
def test_promotion_and_weak_types(case):
    fn, dtype, weak, want = PROMOTION[case]
    out = fn()
    want = np.asarray(want)
    if want.ndim:
        want = np.broadcast_to(want, (2, 3))
    check(out, want.astype(dtype), dtype, weak=weak, rtol=1e-6 if dtype.kind in "fc" else None)


# --- special values ----------------------------------------------------------------------------
def m23(values, dtype=F32):
    """``values`` as (2, 3) arrays of ``dtype`` (the last value repeats to fill the last one).

    The tables above compile for shape (2, 3): these special-value checks reuse those executables.
    """
    values = list(values)
    values += values[-1:] * (-len(values) % 6)
    return list(np.array(values).astype(dtype).reshape(-1, 2, 3))


def test_integer_floor_divide_and_remainder_signs():
    for x, y in zip(m23([7, -7, 7, -7, 0, 6, -6, 1, 9, -9], I32),
                    m23([2, 2, -2, -2, 3, -3, 3, -5, 4, 4], I32)):
        check(jnp.floor_divide(x, y), np.floor_divide(x, y), I32)
        check(jnp.remainder(x, y), np.remainder(x, y), I32)
        check(jnp.fmod(x, y), np.fmod(x, y), I32)
        q, r = jnp.divmod(x, y)
        check(q, np.floor_divide(x, y), I32)
        check(r, np.remainder(x, y), I32)
    (x,), (y,) = m23([-128, -7, 127, -1], I8), m23([1, 2, -1, 3], I8)
    check(jnp.floor_divide(x, y), np.floor_divide(x, y), I8)
    (x,), (y,) = m23([200, 7, 0, 255], U8), m23([3, 2, 4, 16], U8)
    check(jnp.floor_divide(x, y), np.floor_divide(x, y), U8)


def test_float_floor_divide_and_remainder_signs_and_zero():
    xs = m23([7, -7, 7, -7, 5.5, -5.5, 0, 1, np.inf, -np.inf, 1, 5, -0.5, 0.3, 1e8, 7, -1, 0])
    ys = m23([2, 2, -2, -2, 0, 0, 0, -0.0, 2, 3, np.inf, -np.inf, 2, 0.1, 3, 0.1, np.inf, -3])
    for x, y in zip(xs, ys):
        with np.errstate(all="ignore"):
            want_q, want_r = np.floor_divide(x, y), np.remainder(x, y)
        check(jnp.floor_divide(x, y), want_q, F32)
        check(jnp.remainder(x, y), want_r, F32)
        q, r = jnp.divmod(x, y)
        check(q, want_q, F32)
        check(r, want_r, F32)
        check(x // put(y), want_q, F32)
        check(put(x) % y, want_r, F32)


def test_true_divide_of_integers():
    (x,), (y,) = m23([1, -1, 0, 7, -7, 3], I32), m23([0, 0, 0, 2, 2, -4], I32)
    with np.errstate(all="ignore"):
        check(jnp.true_divide(x, y), np.true_divide(x, y).astype(np.float32), F32)
        check(jnp.divide(x, 2), np.divide(x, 2).astype(np.float32), F32)
    check(put(x) / put(x + 10), (x / (x + 10)).astype(np.float32), F32)


def test_integer_power_is_exact():
    (x,), (y,) = m23([3, -3, 7, 2, -2, 10], I32), m23([19, 19, 11, 30, 31, 9], I32)
    check(jnp.power(x, y), np.power(x.astype(np.int64), y).astype(np.int32), I32)  # wraps like int32
    check(jnp.power(put(x), 13), x ** 13, I32)
    (e,) = m23([0, 10, 30, 1, 2, 3], I32)
    check(jnp.power(2, e), np.int32(2) ** e, I32)
    (b,), (e,) = m23([2, 3, 4, 0, 1, 5], U8), m23([7, 5, 4, 0, 9, 3], U8)
    check(put(b) ** put(e), (b.astype(np.int64) ** e).astype(np.uint8), U8)


def test_integer_power_negative_exponents():
    (x,), (y,) = m23([2, 1, -1, -1, 0, 5], I32), m23([-1, -3, -3, -2, 2, -2], I32)
    # An array of exponents: negative ones give 0 except for bases 1 and -1.
    check(jnp.power(x, y), m23([0, 1, -1, 1, 0, 0], I32)[0], I32)
    with pytest.raises(TypeError, match="negative exponent"):
        jnp.power(put(np.int32([2, 3])), -2)  # a static negative exponent, as in JAX
    (f,) = m23([2, 0.5, -2, 4, 1, 10])
    check(jnp.power(f, -2), f.astype(np.float64) ** -2, F32)
    check(put(np.abs(f)) ** -0.5, np.abs(f).astype(np.float64) ** -0.5, F32)


def test_logaddexp():
    xs = m23([0, 1, -np.inf, np.inf, -np.inf, 1e30, -1e30, np.nan, 100])
    ys = m23([0, 2, -np.inf, np.inf, 3, 1e30, -1e30, 1, -100])
    for x, y in zip(xs, ys):
        with np.errstate(all="ignore"):
            check(jnp.logaddexp(x, y), np.logaddexp(x, y), F32)
            check(jnp.logaddexp2(x, y), np.logaddexp2(x, y), F32)
    (z,) = m23([1 + 1j, -2 + 0.5j, 0, 3j, -1, 2 - 2j], C64)
    check(jnp.logaddexp(z, np.complex64(2)), np.log(np.exp(wide(z)) + np.exp(2)), C64, rtol=1e-5)


def test_hypot():
    for x, y in zip(m23([3e30, 0, np.inf, np.nan, 3, -5, 1e-30, np.inf, np.nan]),
                    m23([4e30, 0, np.nan, np.inf, -4, 12, 1e-30, -np.inf, 1])):
        check(jnp.hypot(x, y), np.hypot(x, y), F32)
    check(jnp.hypot(3, 4), np.float32(5), F32)
    with pytest.raises(ValueError, match="hypot is not defined for complex"):
        jnp.hypot(np.complex64([1j]), 1.0)


def test_classification_of_special_values():
    (x,), (i,) = m23([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.5]), m23([0, -1, 5], I32)
    for name in ["isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf"]:
        check(getattr(jnp, name)(x), getattr(np, name)(x), BOOL)
        check(getattr(jnp, name)(i), getattr(np, name)(i), BOOL)
    (z,) = m23([np.nan + 1j, np.inf, 1 + 1j, 1 - np.inf * 1j, -0.0, complex(1, np.nan)], C64)
    for name in ["isnan", "isinf", "isfinite"]:
        check(getattr(jnp, name)(z), getattr(np, name)(z), BOOL)
    for name in ["signbit", "isposinf", "isneginf"]:
        with pytest.raises(ValueError, match="not defined for complex"):
            getattr(jnp, name)(z)


def test_copysign():
    (x,), (y,) = m23([1, -2, 3, np.inf, np.nan, 0]), m23([-0.0, 0.0, -1, -1, -1, -2])
    check(jnp.copysign(x, y), np.copysign(x, y), F32)
    (a,), (b,) = m23([3, -3, 4, 0, 1, -1], I32), m23([-1, 1, 0, -2, 5, -5], I32)
    check(jnp.copysign(a, b), np.copysign(a, b).astype(np.float32), F32)
    check(jnp.copysign(3, y), np.copysign(3, y), F32)


def test_fmax_fmin_ignore_nan():
    (x,), (y,) = m23([np.nan, 1, np.nan, 2, -0.0, np.inf]), m23([1, np.nan, np.nan, 3, 0.0, np.nan])
    check(jnp.fmax(x, y), np.fmax(x, y), F32)
    check(jnp.fmin(x, y), np.fmin(x, y), F32)
    check(jnp.maximum(x, y), np.maximum(x, y), F32)  # the NaN-propagating ones, for contrast
    check(jnp.minimum(x, y), np.minimum(x, y), F32)
    check(jnp.fmax(x, 0.5), np.fmax(x, np.float32(0.5)), F32)


def test_where():
    c = np.array([[True, False, True], [False, False, True]])
    a, b = sample((2, 3), F32), sample((2, 3), F32, seed=1)
    check(jnp.where(c, a, b), np.where(c, a, b), F32)
    check(jnp.where(c, a, 0), np.where(c, a, 0), F32)
    check(jnp.where(c[0], a, b[0]), np.where(c[0], a, b[0]), F32)  # broadcasting
    (i,) = m23([1, 0, 2, 0, -1, 0], I32)
    check(jnp.where(i, 1, 2.5), np.where(i, 1, 2.5).astype(np.float32), F32, weak=True)
    (f,) = m23([np.nan, 0, 1, -0.0, 2, 0])
    check(jnp.where(f, 1.0, 2.0), np.where(f, 1, 2).astype(np.float32), F32)
    check(jnp.where(True, 1, 2), np.int32(1), I32)
    (u,), (s,) = m23([1, 2, 3], U8), m23([-1, -2, -3], I8)
    check(jnp.where(c, u, s), np.where(c, u, s), I16)
    with pytest.raises(TypeError, match="where requires ndarray or scalar arguments"):
        jnp.where(c, 1.0)


def test_clip():
    (x,) = m23([-2, 0.5, 3, np.nan, 1, 0])
    check(jnp.clip(x, 0, 1), np.clip(x, 0, 1), F32)
    check(jnp.clip(x, max=1), np.clip(x, None, 1), F32)
    check(jnp.clip(x, min=0), np.clip(x, 0, None), F32)
    lo = np.float32([0, 1, 2])
    check(jnp.clip(x, lo, 2.5), np.clip(x, lo, 2.5), F32)
    check(jnp.clip(x, 2.5, 1.5), np.minimum(np.maximum(x, 2.5), 1.5), F32)  # min > max
    check(put(x).clip(0, 1), np.clip(x, 0, 1), F32)
    check(jnp.clip(x[:, :1], lo, 4), np.clip(x[:, :1], lo, 4), F32)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.clip([1, 2], 0, 1)


@pytest.mark.parametrize("decimals", [-1, 0, 1, 2])
def test_round_with_decimals(decimals):
    (x,) = m23([1.25, 2.5, -3.5, 123.456, 15, -0.04])
    check(jnp.round(x, decimals), np.round(x, decimals), F32, rtol=1e-6)
    check(jnp.around(x.astype(np.float16), decimals), np.round(x.astype(np.float16), decimals), F16)
    (z,) = m23([1.25 + 2.5j, -3.5j, 0.5, 2.5 - 1.5j, 1, 25j], C64)
    check(jnp.round(z, decimals), np.round(z, decimals), C64, rtol=1e-6)
    (i,) = m23([15, 25, -35, 123, 0, -5], I32)
    # Integers: unchanged for decimals >= 0; rounded half to even above that (NumPy's way;
    # JAX raises NotImplementedError there).
    check(jnp.round(i, decimals), np.round(i, decimals), I32)


def test_round_method_and_errors():
    (x,) = m23([0.5, 1.5, 2.5, -2.5, -0.5, 3.5])
    a = put(x)
    check(round(a, 0), np.round(x), F32)
    check(a.round(), np.round(x), F32)
    assert round(put(np.float32(2.5))) == 2
    with pytest.raises(ValueError, match="'out' argument"):
        jnp.round(a, 0, out=a)


# --- operators on plax.Array ---------------------------------------------------------------------
def test_binary_operators():
    a_np, b_np = np.int32([[7, -7, 3], [0, 5, -2]]), np.int32([[2, 3, -2], [4, 1, 3]])
    a, b = put(a_np), put(b_np)
    for op, ref in [(lambda p, q: p + q, None), (lambda p, q: p - q, None), (lambda p, q: p * q, None),
                    (lambda p, q: p // q, None), (lambda p, q: p % q, None), (lambda p, q: p & q, None),
                    (lambda p, q: p | q, None), (lambda p, q: p ^ q, None),
                    (lambda p, q: p << (q & 3), None), (lambda p, q: p >> (q & 3), None)]:
        check(op(a, b), op(a_np, b_np), I32)
    check(a / b, (a_np / b_np).astype(np.float32), F32)
    check(a ** (b & 3), a_np ** (b_np & 3), I32)
    for op in [lambda p, q: p < q, lambda p, q: p <= q, lambda p, q: p > q, lambda p, q: p >= q,
               lambda p, q: p == q, lambda p, q: p != q]:
        check(op(a, b), op(a_np, b_np), BOOL)
    q, r = divmod(a, b)
    check(q, a_np // b_np, I32)
    check(r, a_np % b_np, I32)


def test_unary_operators():
    a_np = np.int32([[7, -7, 3], [0, 5, -2]])
    a = put(a_np)
    check(-a, -a_np, I32)
    check(+a, a_np, I32)
    check(abs(a), abs(a_np), I32)
    check(~a, ~a_np, I32)
    check(~put(np.array([True, False])), np.array([False, True]), BOOL)
    with pytest.raises(TypeError, match="boolean negative"):
        -put(np.array([True]))


def test_reversed_operators_with_python_scalars():
    a_np = np.int32([[7, -7, 3], [1, 5, -2]])
    a = put(a_np)
    check(2 - a, 2 - a_np, I32, weak=False)
    check(2 + a, 2 + a_np, I32)
    check(3 * a, 3 * a_np, I32)
    check(7 // a, 7 // a_np, I32)
    check(7 % a, 7 % a_np, I32)
    check(2.0 / a, (2.0 / a_np).astype(np.float32), F32, weak=True)
    check(2 ** (a & 7), 2 ** (a_np & 7), I32)
    check(1 << (a & 7), 1 << (a_np & 7), I32)
    check(12 & a, 12 & a_np, I32)
    check(12 | a, 12 | a_np, I32)
    check(12 ^ a, 12 ^ a_np, I32)
    check(1 < a, 1 < a_np, BOOL)
    check(1 == a, 1 == a_np, BOOL)
    check(1.5 - a, (1.5 - a_np).astype(np.float32), F32, weak=True)


def test_reversed_operators_with_numpy_values():
    a_np = np.float32([[1, -2, 3], [0.5, 4, -1]])
    a = put(a_np)
    n = np.float32([[2, 2, 2], [3, 3, 3]])
    check(n - a, n - a_np, F32)
    check(n / a, n / a_np, F32)
    check(n ** put(np.float32([[1, 2, 3], [0, 1, 2]])), n ** np.float32([[1, 2, 3], [0, 1, 2]]), F32)
    check(np.float32(2) * a, 2 * a_np, F32)
    check(np.int8([1, 2, 3]) + put(np.int32([1, 2, 3])), np.int32([2, 4, 6]), I32)
    check(n < a, n < a_np, BOOL)


def test_matmul_operator():
    a_np = np.float32([[1, 2], [3, 4]])
    a = put(a_np)
    check(a @ a, a_np @ a_np, F32)
    check(np.float32([[1, 0], [2, 1]]) @ a, np.float32([[1, 0], [2, 1]]) @ a_np, F32)
    check(a @ np.float32([1, -1]), a_np @ np.float32([1, -1]), F32)


def test_operators_reject_non_arrays():
    a = put(np.float32([1, 2]))
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'jaxlib._jax.ArrayImpl' and 'str'"):
        a + "x"
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'jaxlib._jax.ArrayImpl' and 'list'"):
        a + [1, 2]  # lists are not arrays: convert them with jnp.asarray
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \*: 'NoneType' and 'jaxlib._jax.ArrayImpl'"):
        None * a


# --- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,exc,match", [
    (lambda: jnp.add([1.0], 2.0), TypeError,
     r"add requires ndarray or scalar arguments.*list.*position 0"),
    (lambda: jnp.sin([1.0]), TypeError, "sin requires ndarray or scalar arguments"),
    (lambda: jnp.multiply(1.0, (1, 2)), TypeError, "position 1"),
    (lambda: jnp.where([True], 1, 2), TypeError, "where requires ndarray or scalar arguments"),
    (lambda: jnp.add("a", 1), TypeError, "requires ndarray or scalar arguments"),
    (lambda: jnp.bitwise_and(np.float32([1]), 1), TypeError, "bitwise_and requires integer or boolean"),
    (lambda: jnp.bitwise_not(np.float32([1])), TypeError, "not does not accept dtype float32"),
    (lambda: jnp.left_shift(np.float32([1]), 1), TypeError, "shift_left does not accept dtype float32"),
    (lambda: jnp.sign(np.array([True])), TypeError, "sign does not accept dtype bool"),
    (lambda: jnp.negative(np.array([True])), TypeError, "boolean negative"),
    (lambda: jnp.subtract(np.array([True]), np.array([False])), TypeError,
     "sub does not accept dtype bool"),
    (lambda: jnp.floor_divide(np.complex64([1j]), 1), TypeError,
     "floor_divide does not support complex"),
    (lambda: jnp.remainder(np.complex64([1j]), 1), TypeError, "remainder does not support complex"),
    (lambda: jnp.fabs(np.complex64([1j])), TypeError, "fabs does not support complex"),
    # a TypeError, as JAX's lax ops raise for shapes that do not broadcast
    (lambda: jnp.add(np.ones(2), np.ones(3)), TypeError, "incompatible shapes for broadcasting"),
    (lambda: jnp.add(np.ones((2, 3)), np.ones((3, 2))), TypeError,
     "incompatible shapes for broadcasting"),
    (lambda: jnp.arctan2(np.ones(2), np.ones(4)), TypeError, "incompatible shapes"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_broadcasting_leaves_size_one_dims_to_lax():
    """As in JAX: operands gain leading 1s up to the common rank, but size-1 dimensions are
    broadcast by the lax op itself, never materialised at full size first."""
    from plax.test_util import check_grads
    a, b = np.arange(3.0).reshape(3, 1), np.arange(4.0).reshape(1, 4)
    j = plax.make_jaxpr(lambda x, y: x * y)(a, b)
    assert [e.primitive.name for e in j.jaxpr.eqns] == ["mul"]
    j = plax.make_jaxpr(lambda x, y: x + y)(np.ones(4), np.ones((2, 3, 4)))
    assert j.jaxpr.eqns[0].outvars[0].aval.shape == (1, 1, 4)
    np.testing.assert_array_equal(jnp.multiply(a, b), a * b)
    check_grads(lambda x, y: jnp.sum(jnp.sin(x) * y ** 2), (a, b), order=2, modes=("fwd", "rev"))


def test_logaddexp_derivative_where_the_arguments_meet():
    # exp(x - out): 1/2 each at x == y (the max/abs form alone would give 0 there), second
    # derivative 1/4, and one at an infinite partner, as JAX's custom rule gives.
    assert float(plax.grad(lambda x: jnp.logaddexp(x, 0.0))(0.0)) == 0.5
    assert float(plax.grad(lambda x: jnp.logaddexp2(x, 0.0))(0.0)) == 0.5
    assert float(plax.grad(plax.grad(lambda x: jnp.logaddexp(x, 0.0)))(0.0)) == 0.25
    np.testing.assert_allclose(float(plax.grad(lambda x: jnp.logaddexp(x, 1.0))(0.0)),
                               1 / (1 + np.e), rtol=1e-6)
    assert float(plax.grad(lambda x: jnp.logaddexp(x, -np.inf))(0.0)) == 1.0


@pytest.mark.parametrize("x", [np.array([0, 1, -1, 7, 127, -128], np.int8),
                               np.array([3, 2**31 - 1, -5], np.int32),
                               np.array([5, 65535], np.uint16), np.array([True, False])])
def test_bitwise_count_matches_numpy(x):
    got = jnp.bitwise_count(x)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.bitwise_count(x))


def test_bitwise_count_refuses_floats():
    with pytest.raises(TypeError, match="population_count does not accept dtype float32"):
        jnp.bitwise_count(np.ones(2, np.float32))


def test_int_enum_members_are_integers():
    # jax-md's PartitionErrorCode (an IntEnum) in bitwise operations, as JAX takes it
    import enum

    class Code(enum.IntEnum):
        NONE = 0
        OVERFLOW = 4

    x = jnp.int32(5)
    assert int(jnp.bitwise_and(x, Code.OVERFLOW)) == 4 and int(x & Code.OVERFLOW) == 4
    assert int(plax.jit(lambda v: v | Code.OVERFLOW)(jnp.int32(1))) == 5
    assert jnp.asarray(Code.OVERFLOW).dtype == np.int32


def test_public_functions_name_plax_numpy_as_their_module():
    # (as JAX's name jax.numpy, whichever file defines them; lazily loaded ones too)
    for name in ("sin", "add", "divmod", "true_divide", "polyfit", "take", "where"):
        assert getattr(jnp, name).__module__ == "plax.numpy", name
    assert jnp.linalg.norm.__module__ == "plax.numpy.linalg"
