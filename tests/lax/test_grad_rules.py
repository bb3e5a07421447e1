"""Derivative rules of every differentiable lax primitive, checked against finite differences.

Each family is one table; every case runs ``check_grads`` to second order in forward and
reverse mode over float32 and float64 (x64 on), and complex64 where the rule is defined
for complex numbers (for shape ops, reductions and dot_general, the simplest variants run
in float32 only, to keep the number of compiled executables down). Inputs stay away from
kinks (ties, zeros of abs, integer jumps); separate tests pin JAX's values at the kinks.
Non-differentiable primitives must give zero (float0 for integer/bool outputs) tangents.
"""
import contextlib

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads

F32, F64, C64 = np.float32, np.float64, np.complex64
REAL = (F32, F64)
ALL = (F32, F64, C64)
_rng = np.random.default_rng(1)


def _x64(dtype):
    return plax.enable_x64() if np.dtype(dtype).itemsize == 8 and \
        np.dtype(dtype).kind == "f" else contextlib.nullcontext()


def _values(domain, shape, dtype):
    """Random values in ``domain``: any (|x| in [0.3, 2]), pos, unit (|x| < 0.8) or gt1."""
    r = _rng.uniform(0, 1, shape)
    if domain == "any":
        v = (0.3 + 1.7 * r) * _rng.choice([-1, 1], shape)
    elif domain == "pos":
        v = 0.5 + 1.5 * r
    elif domain == "unit":
        v = -0.8 + 1.6 * r
    else:  # gt1
        v = 1.3 + 1.7 * r
    if np.dtype(dtype).kind == "c":
        v = v + 1j * _rng.uniform(-0.3, 0.3, shape)
    return np.asarray(v, dtype)


def _check(f, args, dtype, **kw):
    with _x64(dtype):
        check_grads(f, args, 2, modes=("fwd", "rev"), **kw)


# --- elementwise unary ---------------------------------------------------------------------
# (name, function, input domain, dtypes)
UNARY = [
    ("neg", lax.neg, "any", ALL),
    ("exp", lax.exp, "any", ALL),
    ("exp2", lax.exp2, "any", REAL),
    ("log", lax.log, "pos", ALL),
    ("expm1", lax.expm1, "any", ALL),
    ("log1p", lax.log1p, "pos", ALL),
    ("tanh", lax.tanh, "any", ALL),
    ("logistic", lax.logistic, "any", ALL),
    ("sin", lax.sin, "any", ALL),
    ("cos", lax.cos, "any", ALL),
    ("tan", lax.tan, "unit", ALL),
    ("asin", lax.asin, "unit", ALL),
    ("acos", lax.acos, "unit", ALL),
    ("atan", lax.atan, "any", ALL),
    ("sinh", lax.sinh, "any", ALL),
    ("cosh", lax.cosh, "any", ALL),
    ("asinh", lax.asinh, "any", ALL),
    ("acosh", lax.acosh, "gt1", ALL),
    ("atanh", lax.atanh, "unit", ALL),
    ("sqrt", lax.sqrt, "pos", ALL),
    ("rsqrt", lax.rsqrt, "pos", ALL),
    ("cbrt", lax.cbrt, "pos", REAL),
    ("erf", lax.erf, "any", REAL),
    ("erfc", lax.erfc, "any", REAL),
    ("erf_inv", lax.erf_inv, "unit", REAL),
    ("lgamma", lax.lgamma, "pos", REAL),
    ("digamma", lax.digamma, "pos", REAL),
    ("square", lax.square, "any", ALL),
    ("abs", lax.abs, "any", ALL),
    ("integer_pow_3", lambda x: lax.integer_pow(x, 3), "any", ALL),
    ("integer_pow_-2", lambda x: lax.integer_pow(x, -2), "any", ALL),
    ("integer_pow_0", lambda x: lax.integer_pow(x, 0), "any", REAL),
    ("integer_pow_1", lambda x: lax.integer_pow(x, 1), "any", REAL),
]


@pytest.mark.parametrize("name,fn,domain,dtype",
                         [(n, f, d, t) for n, f, d, ts in UNARY for t in ts],
                         ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_unary(name, fn, domain, dtype):
    _check(fn, (_values(domain, (3,), dtype),), dtype)


# --- elementwise binary and n-ary --------------------------------------------------------
def _rem_args(dtype):
    # x / y well away from integers, so trunc(x / y) is locally constant.
    return (np.asarray([2.3, -1.7, 0.55], dtype), np.asarray([0.7, 0.9, -0.4], dtype))


def _pair(dx, dy, sx=(3,), sy=(3,)):
    return lambda dtype: (_values(dx, sx, dtype), _values(dy, sy, dtype))


def _distinct(dtype):
    return (np.asarray([0.5, -1.5, 2.0], dtype), np.asarray([1.0, -2.5, 0.7], dtype))


# (name, function, args builder, dtypes)
NARY = [
    ("add", lax.add, _pair("any", "any"), ALL),
    ("add_scalar", lax.add, _pair("any", "any", (), (2, 3)), ALL),
    ("sub", lax.sub, _pair("any", "any"), ALL),
    ("sub_scalar", lax.sub, _pair("any", "any", (2, 3), ()), ALL),
    ("mul", lax.mul, _pair("any", "any"), ALL),
    ("mul_scalar", lax.mul, _pair("any", "any", (), (3,)), ALL),
    ("mul_size1", lax.mul, _pair("any", "any", (1, 3), (2, 3)), REAL),
    ("div", lax.div, _pair("any", "any"), ALL),
    ("div_scalar", lax.div, _pair("any", "any", (2, 3), ()), ALL),
    ("rem", lax.rem, _rem_args, REAL),
    ("pow", lax.pow, _pair("pos", "any"), ALL),
    ("pow_scalar_exp", lax.pow, _pair("pos", "any", (3,), ()), REAL),
    ("max", lax.max, _distinct, REAL),
    ("min", lax.min, _distinct, REAL),
    ("atan2", lax.atan2, _pair("any", "any"), REAL),
    ("complex", lax.complex, _pair("any", "any"), REAL),
    ("clamp", lax.clamp, lambda dt: (np.asarray([-1.0, 0.2, -0.5], dt),
                                     np.asarray([-1.5, 0.7, 1.5], dt),
                                     np.asarray([1.0, 1.2, 0.5], dt)), REAL),
    ("clamp_scalar_bounds", lax.clamp, lambda dt: (np.asarray(-1.0, dt),
                                                   np.asarray([-1.5, 0.7, 1.5], dt),
                                                   np.asarray(1.0, dt)), REAL),
]


@pytest.mark.parametrize("name,fn,make,dtype",
                         [(n, f, m, t) for n, f, m, ts in NARY for t in ts],
                         ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_nary(name, fn, make, dtype):
    _check(fn, make(dtype), dtype)


@pytest.mark.parametrize("dtype", REAL)
def test_pow_integer_exponent(dtype):
    y = np.asarray([2, -1, 3], np.int32)
    _check(lambda x: lax.pow(x, y), (_values("pos", (3,), dtype),), dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_select_n(dtype):
    which2 = np.asarray([True, False, True])
    which3 = np.asarray([2, 0, 1], np.int32)
    args = tuple(_values("any", (3,), dtype) for _ in range(3))
    _check(lambda a, b: lax.select_n(which2, a, b), args[:2], dtype)
    _check(lambda a, b, c: lax.select_n(which3, a, b, c), args, dtype)
    _check(lambda a: lax.select_n(np.asarray(True), a, lax.neg(a)), args[:1], dtype)


@pytest.mark.parametrize("src,dst", [(F32, F64), (F64, F32), (F32, C64), (C64, C64)],
                         ids=str)
def test_convert_element_type(src, dst):
    def f(x):
        return lax.mul(lax.convert_element_type(x, dst), lax.convert_element_type(x, dst))
    with plax.enable_x64():
        check_grads(f, (_values("any", (3,), src),), 2, modes=("fwd", "rev"), atol=1e-2,
                    rtol=1e-2, eps=1e-3)


@pytest.mark.parametrize("dtype", [C64])
def test_complex_parts(dtype):
    z = _values("any", (3,), dtype)
    for f in (lax.real, lax.imag, lax.conj, lambda z: lax.mul(lax.conj(z), z),
              lambda z: lax.complex(lax.imag(z), lax.real(z))):
        _check(f, (z,), dtype)


@pytest.mark.parametrize("dtype", REAL)
def test_conj_of_real(dtype):
    # conj of a real array is complex (as in JAX); its transpose takes the real part back
    _check(lambda x: lax.real(lax.mul(lax.conj(x), lax.conj(x))), (_values("any", (3,), dtype),),
           dtype)


# --- shapes --------------------------------------------------------------------------------
# (name, function, input shape)
SHAPES = [
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3), (1,)), (3,)),
    ("broadcast_in_dim_size1", lambda x: lax.broadcast_in_dim(x, (2, 4, 3), (0, 2)), (1, 3)),
    ("broadcast_scalar", lambda x: lax.broadcast_in_dim(x, (2, 3), ()), ()),
    ("reshape", lambda x: lax.reshape(x, (3, 2)), (2, 3)),
    ("reshape_dims", lambda x: lax.reshape(x, (6,), dimensions=(1, 0)), (2, 3)),
    ("transpose", lambda x: lax.transpose(x, (1, 0)), (2, 3)),
    ("squeeze", lambda x: lax.squeeze(x, (0,)), (1, 3)),
    ("expand_dims", lambda x: lax.expand_dims(x, (0, 2)), (3,)),
    ("rev", lambda x: lax.rev(x, (0, 1)), (2, 3)),
    ("concatenate", lambda x: lax.concatenate([x, lax.sin(x), x], 1), (2, 3)),
    ("pad", lambda x: lax.pad(x, np.zeros((), x.dtype), ((1, 2, 0), (0, 1, 0))), (2, 3)),
    ("pad_interior", lambda x: lax.pad(x, np.zeros((), x.dtype), ((0, 0, 1), (1, 0, 2))), (2, 3)),
    ("pad_negative", lambda x: lax.pad(x, np.zeros((), x.dtype), ((-1, 1, 0), (1, -2, 1))),
     (2, 3)),
    ("slice", lambda x: lax.slice(x, (0, 1), (2, 3)), (2, 3)),
    ("slice_strided", lambda x: lax.slice(x, (0, 0), (2, 5), (1, 2)), (2, 5)),
    ("dynamic_slice", lambda x: lax.dynamic_slice(x, (1, 1), (1, 2)), (2, 3)),
    ("dynamic_update_slice",
     lambda x: lax.dynamic_update_slice(x, lax.sin(lax.slice(x, (0, 0), (1, 2))), (1, 1)), (2, 3)),
]


# Every op runs in float32; float64 and complex64 run for the variants that exercise the
# most of each rule (fewer executables to compile keeps the file fast).
_SHAPE_F32_ONLY = {"broadcast_in_dim", "broadcast_scalar", "reshape", "pad", "slice"}
_SHAPE_COMPLEX = {"reshape_dims", "transpose", "concatenate", "pad_negative", "slice_strided",
                  "dynamic_update_slice"}


def _shape_dtypes(name):
    return (F32,) if name in _SHAPE_F32_ONLY else ALL if name in _SHAPE_COMPLEX else REAL


@pytest.mark.parametrize("name,fn,shape,dtype",
                         [(n, f, s, t) for n, f, s in SHAPES for t in _shape_dtypes(n)],
                         ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_shape_ops(name, fn, shape, dtype):
    # The square makes the second derivative non-zero, so order 2 checks something.
    _check(lambda x: lax.square(fn(x)), (_values("any", shape, dtype),), dtype)


@pytest.mark.parametrize("dtype", REAL)
def test_pad_value_and_dynamic_update_operands(dtype):
    x, v = _values("any", (2, 3), dtype), _values("any", (), dtype)
    u = _values("any", (1, 2), dtype)
    _check(lambda x, v: lax.pad(x, v, ((1, -1, 1), (0, 2, 0))), (x, v), dtype)
    _check(lambda x, u: lax.dynamic_update_slice(lax.square(x), lax.exp(u), (0, 1)), (x, u),
           dtype)
    # a start index past the end is clamped, as in XLA
    _check(lambda x: lax.dynamic_slice(lax.square(x), (1, 2), (2, 2)), (x,), dtype)


# --- reductions ----------------------------------------------------------------------------
def _distinct_values(dtype, shape=(2, 3)):
    n = int(np.prod(shape))
    v = (np.arange(n) - n / 2 + 0.25) * 0.4
    return np.asarray(_rng.permutation(v).reshape(shape), dtype)


REDUCTIONS = [
    ("reduce_sum", lambda x: lax.reduce_sum(x, (1,)), ALL),
    ("reduce_sum_all", lambda x: lax.reduce_sum(x, (0, 1)), (F32,)),
    ("reduce_prod", lambda x: lax.reduce_prod(x, (1,)), ALL),
    ("reduce_prod_all", lambda x: lax.reduce_prod(x, (0, 1)), (F32,)),
    ("reduce_max", lambda x: lax.reduce_max(x, (0,)), REAL),
    ("reduce_max_all", lambda x: lax.reduce_max(x, (0, 1)), (F32,)),
    ("reduce_min", lambda x: lax.reduce_min(x, (1,)), REAL),
    ("cumsum", lambda x: lax.cumsum(x, 1), ALL),
    ("cumsum_rev", lambda x: lax.cumsum(x, 0, reverse=True), (F32,)),
    ("cumprod", lambda x: lax.cumprod(x, 1), ALL),
    ("cumprod_rev", lambda x: lax.cumprod(x, 0, reverse=True), (F32,)),
    ("cummax", lambda x: lax.cummax(x, 1), REAL),
    ("cummax_rev", lambda x: lax.cummax(x, 1, reverse=True), (F32,)),
    ("cummin", lambda x: lax.cummin(x, 0), REAL),
    ("cumlogsumexp", lambda x: lax.cumlogsumexp(x, 1), REAL),
    ("cumlogsumexp_rev", lambda x: lax.cumlogsumexp(x, 0, reverse=True), (F32,)),
]


@pytest.mark.parametrize("name,fn,dtype", [(n, f, t) for n, f, ts in REDUCTIONS for t in ts],
                         ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_reductions(name, fn, dtype):
    x = _distinct_values(dtype) if np.dtype(dtype).kind == "f" else _values("any", (2, 3), dtype)
    _check(lambda x: lax.square(fn(x)), (x,), dtype)


def test_cumprod_through_a_zero():
    # The scan-based rule needs no division, so a zero entry is fine.
    x = np.asarray([1.5, 0.0, -2.0, 0.7], F32)
    _, t = plax.jvp(lax.cumprod, (x,), (np.ones(4, F32),))
    np.testing.assert_allclose(np.asarray(t), [1.0, 1.5, -3.0, -2.1], rtol=1e-6)
    _check(lax.cumprod, (x,), F32)


# --- dot_general ---------------------------------------------------------------------------
DOTS = [
    ("matmul", (2, 3), (3, 4), (((1,), (0,)), ((), ())), ALL),
    ("vector", (3,), (3,), (((0,), (0,)), ((), ())), (F32,)),
    ("outer", (2,), (3,), (((), ()), ((), ())), (F32,)),
    ("lhs_contract_0", (3, 2), (4, 3), (((0,), (1,)), ((), ())), (F32,)),
    ("batch", (2, 3, 4), (2, 4, 2), (((2,), (1,)), ((0,), (0,))), ALL),
    ("batch_mid", (3, 2, 4), (4, 2, 1, 3), (((0, 2), (3, 0)), ((1,), (1,))), REAL),
]


@pytest.mark.parametrize("name,ls,rs,dims,dtype",
                         [(n, ls, rs, d, t) for n, ls, rs, d, ts in DOTS for t in ts],
                         ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_dot_general(name, ls, rs, dims, dtype):
    x, y = _values("any", ls, dtype), _values("any", rs, dtype)
    _check(lambda x, y: lax.dot_general(x, y, dims), (x, y), dtype)


# --- sort and top_k ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", REAL)
def test_sort_values(dtype):
    x, y = _distinct_values(dtype, (2, 4)), _values("any", (2, 4), dtype)
    _check(lambda x: lax.sort(x, 1), (x,), dtype)
    _check(lambda x: lax.sort(x, 0), (x,), dtype)
    _check(lambda x, y: lax.sort_key_val(x, y, 1), (x, y), dtype)
    # two keys (the first with ties), a float payload; the integer payload moves too
    keys = np.asarray([[1, 0, 1, 0], [2, 2, 1, 1]], np.int32)
    _check(lambda x, y: lax.sort((keys, x, y), num_keys=2, dimension=1)[1:], (x, y), dtype)


def test_sort_complex_values():
    # complex numbers sort by (real, imag); their tangents follow them
    _check(lambda z: lax.sort(z, 1), (_values("any", (2, 3), C64),), C64)


@pytest.mark.parametrize("dtype", REAL)
def test_top_k_values(dtype):
    x = _distinct_values(dtype, (2, 5))
    _check(lambda x: lax.top_k(x, 3)[0], (x,), dtype)
    _check(lambda x: lax.top_k(x, 1, axis=0)[0], (x,), dtype)


# --- pjit ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", REAL)
def test_nested_jit(dtype):
    inner = plax.jit(lambda x, y: lax.mul(lax.sin(x), y))
    outer = plax.jit(lambda x, y: lax.exp(inner(lax.cos(x), y)))
    x, y = _values("any", (3,), dtype), _values("any", (3,), dtype)
    _check(lambda x, y: lax.add(inner(x, y), outer(y, x)), (x, y), dtype, atol=5e-2, rtol=5e-2)


# --- non-differentiable primitives --------------------------------------------------------
def _float0_zero(t, shape):
    assert t.dtype == plax.float0 or np.asarray(t).dtype == plax.float0, t.dtype
    assert np.shape(t) == shape


ZERO_TANGENT = [
    ("sign", lax.sign),
    ("floor", lax.floor),
    ("ceil", lax.ceil),
    ("round", lax.round),
    ("nextafter", lambda x: lax.nextafter(x, lax.neg(x))),
    ("stop_gradient", lax.stop_gradient),
]

FLOAT0_TANGENT = [
    ("eq", lambda x: lax.eq(x, lax.neg(x))),
    ("ne", lambda x: lax.ne(x, lax.sin(x))),
    ("lt", lambda x: lax.lt(x, lax.sin(x))),
    ("le", lambda x: lax.le(x, lax.sin(x))),
    ("gt", lambda x: lax.gt(x, lax.sin(x))),
    ("ge", lambda x: lax.ge(x, lax.sin(x))),
    ("is_finite", lax.is_finite),
    ("argmax", lambda x: lax.argmax(x, 0, np.int32)),
    ("argmin", lambda x: lax.argmin(x, 0, np.int32)),
    ("sort_indices", lambda x: lax.sort_key_val(x, lax.iota(np.int32, 3))[1]),
    ("top_k_indices", lambda x: lax.top_k(x, 2)[1]),
    ("to_int", lambda x: lax.convert_element_type(x, np.int32)),
    ("bitcast", lambda x: lax.bitcast_convert_type(x, np.int32)),
    ("int_ops", lambda x: lax.shift_left(lax.bitwise_and(
        lax.convert_element_type(x, np.int32), np.int32(6)), np.int32(1))),
    ("not", lambda x: lax.bitwise_not(lax.gt(x, np.float32(0)))),
    ("population_count", lambda x: lax.population_count(lax.convert_element_type(x, np.int32))),
]


@pytest.mark.parametrize("name,fn", ZERO_TANGENT, ids=[n for n, _ in ZERO_TANGENT])
def test_zero_tangent(name, fn):
    x = np.asarray([0.3, -1.7, 2.6], F32)
    out, t = plax.jvp(fn, (x,), (np.ones(3, F32),))
    assert np.asarray(t).dtype == np.asarray(out).dtype == F32
    np.testing.assert_array_equal(np.asarray(t), np.zeros(np.shape(out), F32))
    g = plax.grad(lambda x: lax.reduce_sum(lax.mul(fn(x), x), (0,)))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(fn(x)))


@pytest.mark.parametrize("name,fn", FLOAT0_TANGENT, ids=[n for n, _ in FLOAT0_TANGENT])
def test_float0_tangent(name, fn):
    x = np.asarray([0.3, -1.7, 2.6], F32)
    out, t = plax.jvp(fn, (x,), (np.ones(3, F32),))
    _float0_zero(t, np.shape(out))
    # reverse mode through them: they contribute nothing, and raise nothing
    def f(x):
        out = lax.convert_element_type(fn(x), F32)
        return lax.add(lax.reduce_sum(out, tuple(range(np.ndim(out)))), lax.reduce_sum(x, (0,)))
    np.testing.assert_array_equal(np.asarray(plax.grad(f)(x)), np.ones(3, F32))


def test_iota_and_integer_inputs_have_float0_tangents():
    _, t = plax.jvp(lambda x: lax.add(lax.iota(np.int32, 3), x), (np.arange(3, dtype=np.int32),),
                    (np.zeros(3, plax.float0),))
    _float0_zero(t, (3,))


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
    assert [float(v) for v in grad2(F32(1.0), F32(1.0))] == [0.5, 0.5]
    g = plax.grad(lambda x: lax.reduce_max(x, (0,)))(np.asarray([1.0, 3.0, 3.0], F32))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.5, 0.5])
    g = plax.grad(lambda x: lax.reduce_sum(lax.cummax(x, 0), (0,)))(
        np.asarray([1.0, 3.0, 3.0, 2.0], F32))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 2.0, 1.0, 0.0])
    _, t = plax.jvp(lax.abs, (np.asarray([0.0, -0.0, 2.0, -2.0], F32),), (np.ones(4, F32),))
    np.testing.assert_array_equal(np.asarray(t), [1.0, 1.0, 1.0, -1.0])
    _, t = plax.jvp(lax.abs, (np.zeros(2, C64),), (np.ones(2, C64),))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 0.0])


@pytest.mark.parametrize("args,expected", [
    ((1.0, 1.0, 2.0), (0, 0, 0)), ((1.0, 2.0, 2.0), (0, 0, 0)), ((3.0, 0.0, 2.0), (0, 0, 0)),
    ((3.0, 2.5, 2.0), (0, 0, 1)), ((0.0, -1.0, 2.0), (1, 0, 0)), ((0.0, 1.0, 2.0), (0, 1, 0)),
])
def test_clamp_edges_match_jax(args, expected):
    g = plax.grad(lax.clamp, argnums=(0, 1, 2))(*[F32(a) for a in args])
    assert tuple(float(v) for v in g) == expected


def test_new_rules_under_jit():
    w = np.asarray([[0.3, -1.0, 2.0], [1.5, 0.2, -0.7]], F32)

    def f(x):
        parts = [lax.sort(x, 1), lax.cummax(x, 1), lax.cumlogsumexp(x, 0), lax.cumprod(x, 1)]
        total = lax.reduce_sum(lax.top_k(x, 2)[0], (0, 1))
        for p in parts:
            total = lax.add(total, lax.reduce_sum(lax.mul(p, w), (0, 1)))
        return total
    x = _distinct_values(F32)
    np.testing.assert_allclose(np.asarray(plax.jit(plax.grad(f))(x)), np.asarray(plax.grad(f)(x)),
                               rtol=1e-5, atol=1e-5)
    jaxpr = str(plax.make_jaxpr(plax.grad(f))(x))
    assert "sort" in jaxpr and "top_k" in jaxpr
