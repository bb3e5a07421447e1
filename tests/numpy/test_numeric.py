"""plax.numpy numeric helpers (numeric.py) against NumPy, with JAX's output dtypes."""
import math

import numpy as np
import pytest

from helpers import BF16, F16, F32, I32, check, check_vmap, sample
import plax
import plax.numpy as jnp
from plax.test_util import check_grads

F64 = np.float64


def dn(x):
    return np.asarray(x).dtype.name


# --- closeness and equality -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F16, I32, np.complex64])
def test_isclose_allclose(dtype):
    a = sample((3, 4), dtype)
    b = a + (np.asarray(1e-3, a.dtype) if np.dtype(dtype).kind != "i" else 1)
    b = b.astype(dtype)
    for rtol, atol in [(1e-5, 1e-8), (1e-2, 1e-2), (0, 1)]:
        want = np.isclose(a, b, rtol=rtol, atol=atol)
        check(jnp.isclose(a, b, rtol=rtol, atol=atol), want, np.bool_)
        assert bool(jnp.allclose(a, b, rtol=rtol, atol=atol)) == bool(want.all())


def test_isclose_special_values():
    a = np.array([np.inf, -np.inf, np.nan, 1.0, np.inf, np.nan], F32)
    b = np.array([np.inf, np.inf, np.nan, 1.0, 1e38, 1.0], F32)
    check(jnp.isclose(a, b), np.isclose(a, b), np.bool_)
    check(jnp.isclose(a, b, equal_nan=True), np.isclose(a, b, equal_nan=True), np.bool_)
    check(jnp.isclose(np.array([127], np.int8), np.array([-128], np.int8)), [False], np.bool_)
    check(jnp.isclose(1.0, 1.1, rtol=np.array([0.2, 0.01], F32)), [True, False], np.bool_)
    assert bool(jnp.allclose(np.array([np.nan]), np.array([np.nan]), equal_nan=True))
    assert not bool(jnp.allclose(np.array([np.nan]), np.array([np.nan])))


def test_isclose_jit_vmap():
    a, b = sample((4, 3), F32), sample((4, 3), F32, seed=1)
    b[0] = a[0]
    check(plax.jit(jnp.isclose)(a, b), np.isclose(a, b), np.bool_)
    check_vmap(jnp.isclose, a, b)
    out = plax.vmap(jnp.allclose)(a, b)
    check(out, [True, False, False, False], np.bool_)


def test_array_equal_equiv():
    a = sample((2, 3), I32)
    assert dn(jnp.array_equal(a, a)) == "bool"
    assert bool(jnp.array_equal(a, a.astype(F32)))
    assert not bool(jnp.array_equal(a, a[:1]))
    assert bool(jnp.array_equal([1, 2], [1, 2]))
    assert bool(jnp.array_equal(np.array([True]), np.array([1])))
    n = np.array([np.nan, 1.0])
    assert not bool(jnp.array_equal(n, n))
    assert bool(jnp.array_equal(n, n, equal_nan=True))
    assert bool(jnp.array_equiv(np.ones(3), np.ones((2, 3))))
    assert not bool(jnp.array_equiv(np.ones(3), np.ones((2, 4))))
    assert not bool(jnp.array_equiv(np.ones(3), np.zeros((2, 3))))
    assert bool(plax.jit(jnp.array_equal)(a, a))
    with pytest.raises(TypeError, match="array_equal requires ndarray"):
        jnp.array_equal({1: 2}, a)


# --- elementwise ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F16, BF16, np.complex64])
def test_nan_to_num(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 1.5], F32).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * np.array([np.inf, np.nan, 0, -np.inf], F32)
        x = x.astype(dtype)
    big = float(jnp.finfo(dtype).max)
    ref = x.astype(F32) if dtype == BF16 else x  # NumPy's nan_to_num leaves bfloat16 alone
    want = np.nan_to_num(ref, posinf=big, neginf=-big).astype(dtype)
    check(jnp.nan_to_num(x), want, dtype, rtol=0)
    want = np.nan_to_num(ref, nan=1, posinf=2.5, neginf=-3).astype(dtype)
    check(jnp.nan_to_num(x, nan=1, posinf=2.5, neginf=-3), want, dtype)
    check(plax.jit(jnp.nan_to_num)(x), jnp.nan_to_num(x), dtype, rtol=0)


def test_nan_to_num_other():
    check(jnp.nan_to_num(np.arange(3, dtype=I32)), [0, 1, 2], I32)
    check(jnp.nan_to_num(np.array([True, False])), [True, False], np.bool_)
    check(jnp.nan_to_num(1.0), 1.0, F32)
    check(jnp.nan_to_num(np.array([np.inf], F16)), [65504.0], F16)
    x = sample((3, 2), F32)
    x[1, 0] = np.nan
    check_vmap(jnp.nan_to_num, x)
    g = plax.grad(lambda v: jnp.sum(jnp.nan_to_num(v) * 2))(np.array([1.0, np.nan], F32))
    check(g, [2.0, 0.0], F32)


@pytest.mark.parametrize("dtype", [F32, F16, I32])
def test_sinc(dtype):
    x = np.array([0, 1, -2, 3], dtype) if dtype == I32 else sample((3, 4), dtype)
    want_dt = F32 if dtype == I32 else dtype
    check(jnp.sinc(x), np.sinc(np.asarray(x, F64)), want_dt, rtol=max(2e-5, 2 * float(np.finfo(want_dt).eps)))
    check(jnp.sinc(np.zeros(2, dtype)), [1, 1], want_dt)


def test_sinc_derivatives():
    check(plax.grad(jnp.sinc)(0.0), 0.0, F32)
    check(plax.grad(plax.grad(jnp.sinc))(0.0), -np.pi ** 2 / 3, F32, rtol=1e-6)
    check(plax.grad(jnp.sinc)(0.5), -4 / np.pi, F32, rtol=1e-6)
    check(plax.vmap(plax.grad(jnp.sinc))(np.array([0.0, 1.0], F32)), [0.0, -1.0], F32, rtol=1e-6)
    check_grads(jnp.sinc, (np.array([0.3, -0.7, 1.2], F32),), order=2, rtol=2e-2, atol=2e-2)
    check(plax.jit(jnp.sinc)(np.array([0.0, 0.5], F32)), np.sinc([0.0, 0.5]), F32)
    check(jnp.sinc(np.ones(2, np.complex64)), np.sinc(np.ones(2, np.complex64)), np.complex64)


@pytest.mark.parametrize("dtype", [F32, F16, I32])
def test_i0(dtype):
    x = (np.array([0, 1, -2, 7], dtype) if dtype == I32
         else np.concatenate([sample((6,), dtype), np.array([-9, 19.5, 20.5, 30], dtype)]))
    if dtype == F16:
        x = x[x < 10]
    want_dt = F32 if dtype == I32 else dtype
    check(jnp.i0(x), np.i0(np.asarray(x, F64)), want_dt, rtol=max(1e-5, 4 * float(np.finfo(want_dt).eps)))


def test_i0_grads_and_errors():
    # i0' is i1
    i1 = lambda v: sum((v / 2) ** (2 * k + 1) / (math.factorial(k) * math.factorial(k + 1))
                       for k in range(30))
    check(plax.grad(jnp.i0)(1.0), i1(1.0), F32, rtol=1e-6)
    check(plax.grad(jnp.i0)(0.0), 0.0, F32)
    check(plax.vmap(plax.grad(jnp.i0))(np.array([-1.0, 25.0], F32)), [-i1(1.0), i1(25.0)], F32,
          rtol=1e-5)
    check_grads(jnp.i0, (np.array([0.3, -2.0, 4.0], F32),), order=1, rtol=2e-2, atol=2e-2)
    check(plax.jit(jnp.i0)(np.array([1.0], F32)), np.i0([1.0]), F32)
    assert dn(jnp.i0(np.array([100.0], F32))) == "float32" and np.isinf(jnp.i0(np.array([100.0], F32))[0])
    with pytest.raises(ValueError, match="Unsupported input type to plax.numpy.i0: complex64"):
        jnp.i0(np.ones(2, np.complex64))


@pytest.mark.parametrize("dtype", [I32, np.int8, np.uint8, np.int16])
def test_gcd_lcm(dtype):
    rng = np.random.default_rng(0)
    lo = 0 if np.dtype(dtype).kind == "u" else -10
    a = rng.integers(lo, 11, (4, 5)).astype(dtype)
    b = rng.integers(lo, 11, (5,)).astype(dtype)
    check(jnp.gcd(a, b), np.gcd(a, b), dtype)
    check(jnp.lcm(a, b), np.lcm(a, b), dtype)
    check(plax.jit(jnp.gcd)(a, b), np.gcd(a, b), dtype)
    check_vmap(jnp.lcm, a, a[::-1].copy())
    check_vmap(jnp.gcd, a, a[::-1].copy())


def test_gcd_lcm_promotion_and_errors():
    check(jnp.gcd(np.arange(3, dtype=I32), 4), [4, 1, 2], I32, weak=False)
    check(jnp.gcd(np.array([12], np.int8), np.array([18], np.int16)), [6], np.int16)
    check(jnp.gcd(np.array([0, 0]), np.array([0, 5])), [0, 5], I32)
    with pytest.raises(ValueError, match="gcd must be integers, got float32"):
        jnp.gcd(1.0, 2.0)
    with pytest.raises(ValueError, match="lcm must be integers, got bool"):
        jnp.lcm(np.array([True]), np.array([True]))


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_ldexp(dtype):
    x = sample((3, 4), dtype)
    e = np.random.default_rng(0).integers(-5, 6, (4,)).astype(I32)
    check(jnp.ldexp(x, e), np.ldexp(x.astype(F64), e), dtype)
    check(plax.jit(jnp.ldexp)(x, e), np.ldexp(x.astype(F64), e), dtype)
    check(jnp.ldexp(x, np.array(2, np.uint8)), x.astype(F64) * 4, dtype)


def test_ldexp_range_and_errors():
    e = np.array([127, 128, -126, 200, -300, 253], I32)
    x = np.array([1.0, 1.0, 1.0, 0.0, 1e30, 2.0 ** -125], F32)
    check(jnp.ldexp(x, e), np.ldexp(x.astype(F64), e).astype(F32), F32)
    check(jnp.ldexp(np.arange(3, dtype=I32), np.arange(3, dtype=I32)), [0, 2, 8], F32)
    check(jnp.ldexp(1.5, 3), 12.0, F32)
    check(plax.grad(jnp.ldexp)(1.5, 3), 8.0, F32)
    check_vmap(jnp.ldexp, sample((3, 2), F32), np.array([[1, 2], [3, -1], [0, 5]], I32))
    with pytest.raises(ValueError, match="ldexp not supported for input types"):
        jnp.ldexp(np.ones(2, F16), np.ones(2, F16))


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64])
def test_frexp(dtype):
    x = np.array([8.0, 0.0, -3.0, np.inf, np.nan, 0.1, -1e4, 1.0], F32).astype(dtype)
    with plax.enable_x64(dtype == F64):
        m, e = jnp.frexp(x)
        wm, we = np.frexp(x.astype(F32) if dtype == BF16 else x)
        check(m, wm, dtype)
        check(e, we, I32)
        m2, e2 = plax.jit(jnp.frexp)(x)
        check(m2, wm, dtype)


def test_frexp_other():
    m, e = jnp.frexp(np.arange(3, dtype=I32))
    check(m, [0.0, 0.5, 0.5], F32)
    check(e, [0, 1, 2], I32)
    x = sample((3, 4), F32)
    check_vmap(jnp.frexp, x)
    with pytest.raises(TypeError, match="frexp does not support complex"):
        jnp.frexp(np.ones(2, np.complex64))


@pytest.mark.parametrize("dtype", [F32, F16, I32])
def test_modf(dtype):
    x = sample((3, 4), dtype) * (3 if dtype != I32 else 1)
    frac, whole = jnp.modf(x)
    wf, ww = np.modf(x.astype(F64))
    want_dt = F32 if dtype == I32 else dtype
    check(frac, wf, want_dt, rtol=4e-3 if dtype == F16 else 1e-6)
    check(whole, ww, want_dt)
    frac, whole = jnp.modf(2.5)
    check(frac, 0.5, F32, weak=True)
    check(whole, 2.0, F32, weak=True)
    check(plax.grad(lambda v: jnp.modf(v)[0])(1.5), 1.0, F32)
    check_vmap(jnp.modf, sample((3, 2), F32) * 3)
    with pytest.raises(TypeError, match="modf does not support complex"):
        jnp.modf(np.ones(2, np.complex64))


@pytest.mark.parametrize("dtype", [F32, F16, F64])
def test_spacing(dtype):
    x = np.array([1.0, -1.0, 0.0, 3.5, -1e3, np.inf, np.nan], dtype)
    with plax.enable_x64(dtype == F64):
        # (NumPy's float16 spacing of negative values is positive, unlike its float32/64 one)
        want = np.nextafter(x, np.copysign(np.inf, x).astype(dtype)) - x
        want[x == 0] = np.nextafter(np.zeros((), dtype), np.ones((), dtype))
        check(jnp.spacing(x), want, dtype, rtol=0)
        check(plax.jit(jnp.spacing)(x), want, dtype, rtol=0)
        if dtype != F16:
            check(jnp.spacing(x), np.spacing(x), dtype, rtol=0)
    check(jnp.spacing(np.arange(1, 3, dtype=I32)), np.spacing(np.arange(1, 3, dtype=F32)), F32)
    check_vmap(jnp.spacing, sample((3, 2), F32))
    with pytest.raises(ValueError, match="spacing is not defined for complex"):
        jnp.spacing(np.ones(2, np.complex64))


# --- finite differences, integration ----------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, I32, np.uint8, np.bool_])
@pytest.mark.parametrize("n,axis", [(1, -1), (2, 0), (0, 1)])
def test_diff(dtype, n, axis):
    a = sample((4, 5), dtype, domain="pos")
    check(jnp.diff(a, n=n, axis=axis), np.diff(a, n=n, axis=axis), dtype)


def test_diff_prepend_append():
    a = sample((3, 4), np.int8)
    check(jnp.diff(a, prepend=1.5), np.diff(a.astype(F32), prepend=1.5), F32, weak=True)
    app = np.zeros((1, 4), np.int8)
    check(jnp.diff(a, axis=0, append=app), np.diff(a, axis=0, append=app), np.int8)
    check(jnp.diff(a, prepend=a[:, :2], append=a[:, :1], n=2),
          np.diff(a, prepend=a[:, :2], append=a[:, :1], n=2), np.int8)
    f = sample((3, 4), F32)
    check(plax.jit(jnp.diff, static_argnames=("n",))(f, n=2), np.diff(f, n=2), F32)
    check_vmap(lambda v: jnp.diff(v, prepend=0.0), f)
    check_grads(lambda v: jnp.diff(v, n=2) ** 2, (f,), order=1, rtol=2e-2, atol=2e-2)
    with pytest.raises(ValueError, match="order n must be non-negative"):
        jnp.diff(f, n=-1)
    with pytest.raises(ValueError, match="at least one dimensional"):
        jnp.diff(np.float32(1))
    with pytest.raises(TypeError, match="Cannot concatenate|dimensions"):
        jnp.diff(f, append=np.zeros((3, 4, 1)))


def test_ediff1d():
    a = sample((2, 3), np.int16)
    check(jnp.ediff1d(a), np.ediff1d(a), np.int16)
    tb = np.array([1, 2], np.int8)
    check(jnp.ediff1d(a, to_begin=tb, to_end=7), np.ediff1d(a, to_begin=tb, to_end=7), np.int16)
    f = np.arange(4.0, dtype=F32)
    check(jnp.ediff1d(f, to_end=np.array([10, 11])), np.ediff1d(f, to_end=[10, 11]), F32)
    check(plax.jit(jnp.ediff1d)(f), np.ediff1d(f), F32)
    check_vmap(jnp.ediff1d, sample((3, 4), F32))
    with pytest.raises(TypeError, match="ediff1d does not support boolean"):
        jnp.ediff1d(np.array([True, False]))
    with pytest.raises(TypeError, match="ediff1d requires ndarray"):
        jnp.ediff1d([1, 2])


@pytest.mark.parametrize("dtype", [F32, F16, I32])
def test_gradient(dtype):
    f = sample((4, 5), dtype, domain="pos") * (3 if dtype != I32 else 1)
    want_dt = F32 if dtype == I32 else dtype
    wf = f.astype(F64)
    for got, want in zip(jnp.gradient(f), np.gradient(wf)):
        check(got, want, want_dt, rtol=2e-2 if dtype == F16 else 1e-5)
    for got, want in zip(jnp.gradient(f, 2.0, 0.5), np.gradient(wf, 2.0, 0.5)):
        check(got, want, want_dt, rtol=2e-2 if dtype == F16 else 1e-5)
    check(jnp.gradient(f, axis=1), np.gradient(wf, axis=1), want_dt, rtol=2e-2 if dtype == F16 else 1e-5)
    check(jnp.gradient(f, axis=(0,)), np.gradient(wf, axis=(0,)), want_dt,
          rtol=2e-2 if dtype == F16 else 1e-5)


def test_gradient_coordinates_and_errors():
    y = np.array([1.0, 4, 9, 16, 30], F32)
    x = np.array([0.0, 1, 3, 4, 7], F32)
    check(jnp.gradient(y, x), np.gradient(y.astype(F64), x.astype(F64)), F32)
    f = sample((3, 5), F32)
    got = jnp.gradient(f, np.array([0.0, 1, 3], F32), x)
    for g, w in zip(got, np.gradient(f.astype(F64), [0.0, 1, 3], x.astype(F64))):
        check(g, w, F32)
    check(jnp.gradient(np.ones(3, np.complex64)), np.zeros(3), np.complex64)
    check(jnp.gradient(np.ones(3, bool)), np.zeros(3), F32)
    check(plax.jit(jnp.gradient)(y), np.gradient(y), F32)
    check_vmap(jnp.gradient, sample((3, 4), F32))
    check_grads(lambda v: jnp.gradient(v) ** 2, (y,), order=1, rtol=2e-2, atol=2e-2, eps=1e-2)
    with pytest.raises(NotImplementedError, match="edge_order=2 is not supported"):
        jnp.gradient(y, edge_order=2)
    with pytest.raises(ValueError, match="at least 2 elements are required"):
        jnp.gradient(np.ones(1))
    with pytest.raises(TypeError, match="spacing arguments"):
        jnp.gradient(f, 1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="coordinate array"):
        jnp.gradient(y, np.ones(4))


@pytest.mark.parametrize("dtype", [F32, F16, I32, np.bool_, np.complex64])
def test_trapezoid(dtype):
    y = sample((3, 4), dtype, domain="pos")
    want_dt = {I32: F32, np.dtype(np.bool_): F32}.get(np.dtype(dtype), dtype)
    rtol = 4e-3 if dtype == F16 else 1e-5
    wy = y.astype(np.complex128 if dtype == np.complex64 else F64)
    check(jnp.trapezoid(y), np.trapezoid(wy), want_dt, rtol=rtol)
    check(jnp.trapezoid(y, dx=2, axis=0), np.trapezoid(wy, dx=2, axis=0), want_dt, rtol=rtol)
    x = np.array([0.0, 1, 3, 3.5], F32)
    check(jnp.trapezoid(y, x=x), np.trapezoid(wy, x=x), np.result_type(want_dt, F32) if dtype != F16 else F32,
          rtol=rtol)


def test_trapezoid_other():
    y, x = sample((3, 4), F32), np.cumsum(sample((3, 4), F32, domain="pos"), axis=1)
    check(jnp.trapezoid(y, x=x), np.trapezoid(y.astype(F64), x=x.astype(F64)), F32)
    check(jnp.trapezoid(np.arange(3, dtype=I32), x=np.arange(3, dtype=I32)), 2.0, F32)
    check(plax.jit(jnp.trapezoid)(y), np.trapezoid(y.astype(F64)), F32)
    check_vmap(jnp.trapezoid, y, x)
    check_grads(jnp.trapezoid, (y, x), order=1, rtol=2e-2, atol=2e-2)
    with pytest.raises(ValueError, match="trapezoid requires y of at least one dimension"):
        jnp.trapezoid(1.0)


@pytest.mark.parametrize("dtype", [F32, I32, np.complex64])
@pytest.mark.parametrize("na,nb", [(3, 3), (2, 3), (2, 2)])
def test_cross(dtype, na, nb):
    a, b = sample((4, na), dtype), sample((2, 1, nb), dtype, seed=1)
    check(jnp.cross(a, b), np.cross(a, b), dtype)


def test_cross_axes_and_errors():
    a, b = sample((3, 4), F32), sample((4, 3), F32, seed=1)
    check(jnp.cross(a, b, axisa=0, axisc=0), np.cross(a, b, axisa=0, axisc=0), F32)
    check(jnp.cross(a, a[::-1], axis=0), np.cross(a, a[::-1], axis=0), F32)
    check(jnp.cross(np.ones(3, np.int8), 1.0 * np.ones(3, F16)), np.zeros(3), F16)
    check(plax.jit(jnp.cross)(b, b[::-1]), np.cross(b, b[::-1]), F32)
    check_vmap(jnp.cross, b, b[::-1].copy())
    check_grads(jnp.cross, (b, b[::-1].copy()), order=1, rtol=2e-2, atol=2e-2)
    with pytest.raises(ValueError, match="Dimension must be either 2 or 3"):
        jnp.cross(np.ones(4), np.ones(3))
    with pytest.raises(TypeError, match="cross does not support boolean"):
        jnp.cross(np.ones(3, bool), np.ones(3, bool))


@pytest.mark.parametrize("dtype", [F32, F16, I32])
def test_interp(dtype):
    xp = np.array([0, 1, 2, 4, 7], dtype)
    fp = np.array([1, 3, 2, 5, 0], dtype)
    x = np.array([[-1, 0, 0.5, 1.5], [3, 7, 8, 6.5]], F32).astype(dtype)
    want_dt = F32 if dtype == I32 else dtype
    w = [np.asarray(v, F64) for v in (x, xp, fp)]
    check(jnp.interp(x, xp, fp), np.interp(*w), want_dt)
    check(jnp.interp(x, xp, fp, left=-5, right=9), np.interp(*w, left=-5, right=9), want_dt)
    check(jnp.interp(x, xp, fp, period=5), np.interp(*w, period=5), want_dt)


def test_interp_other():
    xp, fp = np.array([0.0, 1, 1, 2], F32), np.array([1.0, 3, 5, 4], F32)
    check(jnp.interp(np.array([1.0, 0.5, 2.0], F32), xp, fp), [5.0, 2.0, 4.0], F32)
    check(jnp.interp(0.5, np.array([0.0, 1]), np.array([1j, 2], np.complex64)), 1 + 0.5j, np.complex64)
    check(jnp.interp(0.5, xp, fp), 2.0, F32)
    x = sample((3, 4), F32)
    check(plax.jit(jnp.interp)(x, xp, fp), np.interp(x, xp, fp), F32)
    check_vmap(lambda v: jnp.interp(v, xp, fp), x)
    check_vmap(lambda f: jnp.interp(x, xp, f), np.stack([fp, fp * 2]))
    g = plax.grad(lambda v: jnp.interp(v, np.array([0.0, 1, 2]), np.array([1.0, 3, 4])))(0.5)
    check(g, 2.0, F32)
    g = plax.grad(lambda f: jnp.interp(0.5, np.array([0.0, 1, 2]), f).sum())(np.array([1.0, 3, 4], F32))
    check(g, [0.5, 0.5, 0.0], F32)
    with pytest.raises(ValueError, match="xp and fp must be one-dimensional arrays of equal size"):
        jnp.interp(0.5, np.ones((1, 3)), np.ones(3))
    with pytest.raises(ValueError, match="period must be a non-zero value"):
        jnp.interp(0.5, xp, fp, period=0)


@pytest.mark.parametrize("dtype", [F32, F16, I32])
def test_unwrap(dtype):
    rng = np.random.default_rng(0)
    p = np.cumsum(rng.uniform(-4, 4, (3, 6)), axis=1).astype(dtype)
    want_dt = F32 if dtype == I32 else dtype
    rtol = 2e-2 if dtype == F16 else 1e-5
    w = p.astype(F64)
    check(jnp.unwrap(p), np.unwrap(w), want_dt, rtol=rtol)
    check(jnp.unwrap(p, axis=0), np.unwrap(w, axis=0), want_dt, rtol=rtol)
    check(jnp.unwrap(p, discont=4.0), np.unwrap(w, discont=4.0), want_dt, rtol=rtol)
    check(jnp.unwrap(p, period=5.0), np.unwrap(w, period=5.0), want_dt, rtol=rtol)


def test_unwrap_integer_period_and_errors():
    p = np.array([0, 5, 10, 3, 1, 9], I32)
    check(jnp.unwrap(p, period=6), np.unwrap(p, period=6), I32)
    check(jnp.unwrap(p, period=7), np.unwrap(p, period=7), I32)
    check(jnp.unwrap(p, period=6.0), np.unwrap(p.astype(F64), period=6.0), F32)
    check(jnp.unwrap(np.array([True, False])), [1.0, 0.0], F32)
    f = np.array([0.0, 3.0, 6.5, 1.0], F32)
    check(plax.jit(jnp.unwrap)(f), np.unwrap(f), F32)
    check_vmap(jnp.unwrap, np.stack([f, f * 2]))
    check_grads(jnp.unwrap, (f,), order=1, rtol=2e-2, atol=2e-2)
    with pytest.raises(ValueError, match="unwrap requires p of at least one dimension"):
        jnp.unwrap(np.float32(1))
    with pytest.raises(ValueError, match="unwrap does not support complex"):
        jnp.unwrap(np.ones(2, np.complex64))


# --- complex and dtype queries -----------------------------------------------------------------
def test_iscomplex_isreal():
    z = np.array([1 + 1j, 2, 3j], np.complex64)
    check(jnp.iscomplex(z), np.iscomplex(z), np.bool_)
    check(jnp.isreal(z), np.isreal(z), np.bool_)
    i = np.arange(3, dtype=I32)
    check(jnp.iscomplex(i), [False] * 3, np.bool_)
    check(jnp.isreal(i), [True] * 3, np.bool_)
    check(plax.jit(jnp.iscomplex)(z), np.iscomplex(z), np.bool_)
    check_vmap(jnp.isreal, np.stack([z, z.conj()]))
    assert jnp.iscomplexobj(z) and not jnp.iscomplexobj(i) and jnp.isrealobj(i)
    assert not jnp.isrealobj(1j) and not jnp.iscomplexobj(None)
    with pytest.raises(TypeError, match="iscomplex requires ndarray"):
        jnp.iscomplex("a")


def test_real_if_close():
    check(jnp.real_if_close(np.array([1 + 1e-10j, 2], np.complex64)), [1.0, 2.0], F32)
    z = np.array([1 + 1e-3j, 2], np.complex64)
    check(jnp.real_if_close(z), z, np.complex64)
    check(jnp.real_if_close(z, tol=1e-2), [1.0, 2.0], F32)
    check(jnp.real_if_close(np.ones(3, F16)), np.ones(3), F16)
    with pytest.raises(TypeError, match="real_if_close requires ndarray"):
        jnp.real_if_close("a")


def test_can_cast_isdtype_common_type():
    assert not jnp.can_cast("int32", "float32") and jnp.can_cast(jnp.int32, jnp.int8, casting="same_kind")
    assert not jnp.can_cast(np.arange(2, dtype=I32), "int8")
    assert jnp.can_cast(F16, BF16, casting="same_kind") and jnp.can_cast(np.int8, F32)
    with pytest.raises(ValueError, match="casting must be one of"):
        jnp.can_cast(I32, "int8", casting="foo")
    with pytest.raises(TypeError, match="does not support Python ints"):
        jnp.can_cast(1, "int8")
    assert jnp.isdtype(jnp.float32, "real floating") and jnp.isdtype(BF16, "real floating")
    assert jnp.isdtype("int32", ("integral", "bool")) and jnp.isdtype(jnp.int32, jnp.int32)
    assert jnp.isdtype(np.dtype("complex64"), "numeric") and jnp.isdtype(np.uint8, "unsigned integer")
    assert not jnp.isdtype(np.uint8, "signed integer") and not jnp.isdtype(np.bool_, "numeric")
    assert not jnp.isdtype(F32, ("complex floating", np.int8))
    with pytest.raises(ValueError, match="Unrecognized kind='foo'"):
        jnp.isdtype(jnp.int32, "foo")
    with pytest.raises(TypeError, match="Expected kind to be a dtype, string, or tuple"):
        jnp.isdtype(jnp.int32, 3)
    assert jnp.common_type(np.arange(2, dtype=I32)) is np.float32
    assert jnp.common_type(np.ones(2, F16), np.ones(2, I32)) is np.float32
    assert jnp.common_type(np.ones(2, np.complex64), np.ones(2, F16)) is np.complex64
    assert jnp.common_type(np.ones(2, F16)) is np.float16
    with pytest.raises(TypeError, match="can't get common type for non-numeric array"):
        jnp.common_type(np.array([True]))


def test_loop_functions_compile_once_per_signature_as_jaxs_jitted_ones():
    # gcd, lcm (a while loop) and polyval (a scan) are one program each, as JAX's jitted
    # functions: a second eager call with the same types compiles nothing
    from plax._src import test_util as jtu
    a, b = np.int8([12, 18, 7]), np.int8([8, 24, 0])
    p, x = np.float32([1, 2, 3]), np.float32([2, 3])
    calls = [lambda: jnp.gcd(a, b), lambda: jnp.lcm(a, b), lambda: jnp.polyval(p, x),
             lambda: jnp.polyval(p, x, unroll=2)]
    first = [np.asarray(c()) for c in calls]
    with jtu.count_primitive_compiles() as count:
        again = [np.asarray(c()) for c in calls]
    assert count() == 0
    for got, want in zip(again, [np.gcd(a, b), np.lcm(a, b), np.polyval(p, x),
                                 np.polyval(p, x)]):
        np.testing.assert_array_equal(got, want)
    for f, s in zip(first, again):
        np.testing.assert_array_equal(f, s)


def test_abs_is_its_own_function_named_abs():
    assert jnp.abs.__name__ == "abs" and jnp.absolute.__name__ == "absolute"
    assert jnp.abs is not jnp.absolute
    np.testing.assert_array_equal(jnp.abs(np.int32([-3, 4])), [3, 4])
