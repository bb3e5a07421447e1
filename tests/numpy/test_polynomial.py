"""plax.numpy polynomial functions against NumPy (values) and JAX 0.10 (result dtypes,
hard-coded here)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.errors import ConcretizationTypeError
from plax.test_util import check_grads
from helpers import close, rand

F16, F32, I32, I8, C64 = (np.dtype(t) for t in (np.float16, np.float32, np.int32, np.int8,
                                               np.complex64))


# --- polyval ------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 20])
@pytest.mark.parametrize("xshape", [(), (5,), (2, 3)])
def test_polyval_matches_numpy(n, xshape):
    p, x = rand(n), rand(xshape, seed=1)
    close(jnp.polyval(p, x), np.polyval(p.astype(np.float64), x), F32, rtol=1e-4, atol=1e-4)
    close(jnp.polyval(p, x, unroll=1), np.polyval(p.astype(np.float64), x), F32, rtol=1e-4,
          atol=1e-4)


def test_polyval_dtypes_and_shapes():
    p = np.array([1, 2, 3], np.int32)
    out = jnp.polyval(p, np.array([1, 2], np.int32))
    assert out.dtype == I32
    np.testing.assert_array_equal(np.asarray(out), np.polyval(p, [1, 2]))
    assert jnp.polyval(np.array([1, 2], np.int8), np.array([1, 2], np.int8)).dtype == I8
    assert jnp.polyval(np.array([1, 2], F16), 2).dtype == F16
    assert jnp.polyval(p, 2.0).dtype == F32
    p2 = np.array([[1.0, 2], [3, 4]], np.float32)  # a batch of polynomials along axis 1
    close(jnp.polyval(p2, np.array([1.0, 2], np.float32)), np.polyval(p2, [1.0, 2]), F32)
    close(jnp.polyval(np.zeros(0, np.float32), 2.0), 0.0, F32)


def test_polyval_jit_and_grad():
    p, x = rand(5), rand((3,), seed=2)
    close(plax.jit(jnp.polyval)(p, x), np.polyval(p.astype(np.float64), x), F32, rtol=1e-4)
    check_grads(jnp.polyval, (p, x), order=2, atol=2e-2, rtol=2e-2)
    g = plax.grad(lambda p: jnp.polyval(p, 2.0))(np.array([1.0, 2, 3], np.float32))
    close(g, [4.0, 2.0, 1.0], F32)


def test_polyval_errors():
    with pytest.raises(ValueError, match="p must be an array of coefficients"):
        jnp.polyval(np.float32(3.0), 2.0)
    with pytest.raises(TypeError, match="polyval requires ndarray or scalar"):
        jnp.polyval([1.0, 2.0], 2.0)


# --- polyadd, polysub, polymul ------------------------------------------------------------------
@pytest.mark.parametrize("n1,n2", [(1, 1), (3, 5), (6, 2)])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_polyadd_polysub(n1, n2, dtype):
    a, b = rand(n1, dtype), rand(n2, dtype, seed=1)
    close(jnp.polyadd(a, b), np.polyadd(a, b), dtype)
    close(jnp.polysub(a, b), np.polysub(a, b), dtype)


def test_polyadd_dtypes_jit_errors():
    assert jnp.polyadd(np.array([1, 2], np.int32), np.array([1.0, 2, 3], np.float32)).dtype == F32
    assert jnp.polysub(np.array([1, 2], np.int8), np.array([1, 2], np.int8)).dtype == I8
    assert jnp.polyadd(np.array([1, 2], np.uint8), np.array([1.0, 3, 4], F16)).dtype == F16
    a, b = rand(3), rand(5, seed=1)
    close(plax.jit(jnp.polysub)(a, b), np.polysub(a, b), F32)
    check_grads(jnp.polyadd, (a, b), order=1)
    with pytest.raises(ValueError, match="a1 must be an array of coefficients"):
        jnp.polyadd(np.float32(1.0), a)
    with pytest.raises(ValueError, match="a2 must be an array of coefficients"):
        jnp.polysub(a, 2.0)


@pytest.mark.parametrize("n1,n2", [(1, 1), (3, 5), (7, 2), (1, 4)])
@pytest.mark.parametrize("dtype", [F32, I32, C64])
def test_polymul_matches_numpy(n1, n2, dtype):
    a, b = rand(n1, dtype), rand(n2, dtype, seed=1)
    want_dt = C64 if dtype == C64 else F32
    # np.polymul drops leading zeros (poly1d); the untrimmed product is the convolution
    close(jnp.polymul(a, b), np.convolve(a.astype(np.complex128 if dtype == C64 else np.float64),
                                         b), want_dt, rtol=1e-4, atol=1e-4)


def test_polymul_trim_dtypes_jit_grad():
    a, b = np.array([0, 1, 2]), np.array([1, 2])
    close(jnp.polymul(a, b), [0.0, 1.0, 4.0, 4.0], F32)
    close(jnp.polymul(a, b, trim_leading_zeros=True), [1.0, 4.0, 4.0], F32)
    close(jnp.polymul(np.array([0, 0]), np.array([0]), trim_leading_zeros=True), [0.0], F32)
    close(jnp.polymul(np.float32(2.0), np.array([1.0, 2], np.float32)), [2.0, 4.0], F32)
    assert jnp.polymul(np.array([1, 2], F16), np.array([1])).dtype == F16
    assert jnp.polymul(np.array([True, False]), np.array([3])).dtype == F32
    x, y = rand(4), rand(3, seed=1)
    close(plax.jit(jnp.polymul)(x, y), np.polymul(x.astype(np.float64), y), F32, rtol=1e-4)
    with pytest.raises(ConcretizationTypeError, match="trim_leading_zeros"):
        plax.jit(lambda a, b: jnp.polymul(a, b, trim_leading_zeros=True))(x, y)
    check_grads(jnp.polymul, (x, y), order=2)
    with pytest.raises(ValueError, match="a1 must be 1-dimensional"):
        jnp.polymul(np.ones((2, 2)), y)


# --- polydiv --------------------------------------------------------------------------------------
@pytest.mark.parametrize("nu,nv", [(5, 2), (4, 4), (6, 3), (2, 1)])
def test_polydiv_matches_numpy(nu, nv):
    u, v = rand(nu), rand(nv, seed=1) + np.float32(3.0)
    q, r = jnp.polydiv(u, v)
    wq, wr = np.polydiv(u.astype(np.float64), v)
    close(q, wq, F32, rtol=1e-4, atol=1e-4)
    # the remainder keeps the length of u (leading entries zero up to rounding), as in JAX
    assert r.shape == u.shape and r.dtype == F32
    close(r[nu - len(wr):], wr, F32, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(r[:nu - len(wr)]), 0.0, atol=1e-5)
    close(polyrecombine(q, v, r), u, F32, rtol=1e-4, atol=1e-4)


def polyrecombine(q, v, r):
    return jnp.polyadd(jnp.polymul(q, v), r)


def test_polydiv_cases():
    q, r = jnp.polydiv(np.array([1, 3, 2]), np.array([1, 1]))
    close(q, [1.0, 2.0], F32)
    close(r, [0.0, 0.0, 0.0], F32)
    q, r = jnp.polydiv(np.array([1.0, 3, 2, 4]), np.array([1.0, 1]), trim_leading_zeros=True)
    close(q, [1.0, 2.0, 0.0], F32)
    close(r, [4.0], F32)
    q, r = jnp.polydiv(np.array([1, 3]), np.array([1, 1, 4]))  # deg u < deg v
    close(q, [0.0], F32)
    close(r, [1.0, 3.0], F32)
    q, r = jnp.polydiv(np.array([1, 3, 2, 5]), np.array([0, 2, 1]))  # zero leading v, as JAX
    close(q, [np.inf, -np.inf], F32)
    close(r, [np.nan, np.nan, np.nan, np.inf], F32)
    q, r = jnp.polydiv(np.array([1, 2], F16), np.array([1], F16))
    assert q.dtype == F16 and r.dtype == F16


def test_polydiv_jit_grad_errors():
    u, v = rand(5), np.array([2.0, 1.0, -1.0], np.float32)
    q, r = plax.jit(jnp.polydiv)(u, v)
    wq, wr = np.polydiv(u.astype(np.float64), v)
    close(q, wq, F32, rtol=1e-4)
    close(r[-2:], wr, F32, rtol=1e-4, atol=1e-4)
    check_grads(lambda u, v: jnp.polydiv(u, v)[0], (u, v), order=1, atol=2e-2, rtol=2e-2)
    with pytest.raises(ValueError, match="v must be a non-empty 1-D array"):
        jnp.polydiv(u, np.zeros(0))
    with pytest.raises(ValueError, match="u must be a non-empty 1-D array"):
        jnp.polydiv(np.ones((2, 2)), v)


# --- polyder, polyint -----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3, 6])
@pytest.mark.parametrize("m", [0, 1, 2, 4])
def test_polyder_matches_numpy(n, m):
    p = rand(n)
    want = np.polyder(p.astype(np.float64), m)
    out = jnp.polyder(p, m)
    if m >= n:  # NumPy gives [0.]; JAX (and plax) an empty array
        assert out.shape == (0,) and out.dtype == F32
    else:
        close(out, want, F32, rtol=1e-4, atol=1e-4)


def test_polyder_dtypes_jit_grad_errors():
    close(jnp.polyder(np.array([1, 2, 3, 4]), 2), [6.0, 4.0], F32)
    assert jnp.polyder(np.array([1, 2, 3], np.int8)).dtype == F32
    assert jnp.polyder(np.array([1, 2, 3], F16)).dtype == F16
    assert jnp.polyder(np.array([1, 2, 3]), 0).dtype == F32
    p = rand(5)
    close(plax.jit(jnp.polyder, static_argnums=1)(p, 2), np.polyder(p.astype(np.float64), 2),
          F32, rtol=1e-4)
    check_grads(lambda p: jnp.polyder(p, 2), (p,), order=1)
    with pytest.raises(ValueError, match="Order of derivative must be positive"):
        jnp.polyder(p, -1)
    with pytest.raises(TypeError, match="m must be a non-negative integer"):
        jnp.polyder(p, 1.5)


@pytest.mark.parametrize("n", [1, 3, 5])
@pytest.mark.parametrize("m,k", [(1, None), (2, None), (2, [1.0, 2.0]), (3, 2.5), (0, None)])
def test_polyint_matches_numpy(n, m, k):
    p = rand(n)
    want = np.polyint(p.astype(np.float64), m, k=k)
    out = jnp.polyint(p, m, None if k is None else np.asarray(k, np.float32))
    close(out, want, F32, rtol=1e-4, atol=1e-4)


def test_polyint_dtypes_jit_grad_errors():
    close(jnp.polyint(np.array([1, 2, 3]), m=2, k=np.array([5.0])),
          [1 / 12, 1 / 3, 1.5, 5.0, 5.0], F32)
    assert jnp.polyint(np.array([1, 2], np.int8)).dtype == F32
    assert jnp.polyint(np.array([1, 2, 3], F16)).dtype == F16
    assert jnp.polyint(np.array([1, 2, 3]), m=0).dtype == F32
    p, k = rand(4), np.array([1.0, -1.0], np.float32)
    f = plax.jit(lambda p, k: jnp.polyint(p, 2, k))
    close(f(p, k), np.polyint(p.astype(np.float64), 2, k), F32, rtol=1e-4)
    check_grads(lambda p, k: jnp.polyint(p, 2, k), (p, k), order=1)
    with pytest.raises(ValueError, match="Order of integral must be positive"):
        jnp.polyint(p, -1)
    with pytest.raises(ValueError, match="k must be a scalar or a rank-1 array"):
        jnp.polyint(p, 2, k=np.ones(3))
    with pytest.raises(TypeError, match="polyint requires ndarray or scalar"):
        jnp.polyint(p, 2, k=[1, 2])


# --- poly --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5, 9])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_poly_matches_numpy(n, dtype):
    z = rand(n, dtype)
    close(jnp.poly(z), np.poly(z.astype(np.float64)), F32, rtol=1e-4, atol=1e-3)


def test_poly_cases_jit_grad_errors():
    close(jnp.poly(np.array([1, 2, 3])), [1.0, -6.0, 11.0, -6.0], F32)
    close(jnp.poly(np.float32(2.0)), [1.0, -2.0], F32)
    close(jnp.poly(np.zeros(0, np.float32)), 1.0, F32)
    c = np.array([1 + 1j, 1 - 1j], np.complex64)  # complex roots give complex coefficients
    close(jnp.poly(c), [1.0, -2.0, 2.0], C64)
    assert jnp.poly(np.array([1, 2], np.int8)).dtype == F32
    assert jnp.poly(np.array([1, 2], F16)).dtype == F16
    z = rand(4)
    close(plax.jit(jnp.poly)(z), np.poly(z.astype(np.float64)), F32, rtol=1e-4, atol=1e-4)
    check_grads(jnp.poly, (z,), order=2)
    m = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)  # its characteristic polynomial
    close(jnp.poly(m), np.poly(m.astype(np.float64)), C64, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="input must be 1d or non-empty square 2d array"):
        jnp.poly(np.ones((2, 3)))
    with pytest.raises(ValueError, match="input must be 1d or non-empty square 2d array"):
        jnp.poly(np.ones((2, 2, 2)))


# --- roots -------------------------------------------------------------------------------------
@pytest.mark.parametrize("coeffs", [[1.0, -6.0, 11.0, -6.0], [0.0, 0.0, 1.0, -3.0, 2.0],
                                    [2.0, 0.0, 1.0], [1.0, 0.0, 0.0], [3.0, 1.5]])
def test_roots_match_numpy(coeffs):
    found = np.sort_complex(np.asarray(jnp.roots(np.array(coeffs, np.float32))))
    np.testing.assert_allclose(found, np.sort_complex(np.roots(coeffs)), atol=1e-5)
    assert found.dtype == C64


def test_roots_without_stripping_under_jit_and_errors():
    # Each leading zero is a root at infinity: NaN, at the end (as JAX).
    out = np.asarray(plax.jit(lambda p: jnp.roots(p, strip_zeros=False))(
        np.array([0.0, 1.0, 1.0, -6.0], np.float32)))
    np.testing.assert_allclose(np.sort_complex(out[:2]), [-3.0, 2.0], atol=1e-5)
    assert np.isnan(out[2].real) and np.isnan(out[2].imag)
    assert jnp.roots(np.array([2.0], np.float32)).shape == (0,)
    assert jnp.roots(np.array([1, 2], np.int32)).dtype == C64
    with pytest.raises(ConcretizationTypeError, match="strip_zeros=False under jit"):
        plax.jit(jnp.roots)(np.array([1.0, 2.0], np.float32))
    with pytest.raises(ValueError, match="rank-1 array of coefficients"):
        jnp.roots(np.ones((2, 2), np.float32))


# --- polyfit -----------------------------------------------------------------------------------
def test_polyfit_matches_numpy():
    x = np.arange(6.0, dtype=np.float32)
    y = (x ** 2 + 0.3 * np.sin(7 * x)).astype(np.float32)
    close(jnp.polyfit(x, y, 2), np.polyfit(x, y, 2), F32, rtol=1e-3, atol=1e-3)
    c, resid, rank, s, rcond = jnp.polyfit(x, y, 2, full=True)
    ref = np.polyfit(x.astype(np.float64), y, 2, full=True)
    close(resid, ref[1], F32, rtol=1e-2, atol=1e-3)
    assert int(rank) == ref[2]
    close(s, ref[3], F32, rtol=1e-4)
    c, cov = jnp.polyfit(x, y, 1, cov=True)
    close(cov, np.polyfit(x, y, 1, cov=True)[1], F32, rtol=1e-3, atol=1e-4)
    close(jnp.polyfit(x, y, 1, cov="unscaled")[1], np.polyfit(x, y, 1, cov="unscaled")[1], F32,
          rtol=1e-4)
    both = np.stack([y, 2 * y], 1)
    w = np.linspace(1, 2, 6).astype(np.float32)
    close(jnp.polyfit(x, both, 2, w=w), np.polyfit(x, both, 2, w=w), F32, rtol=1e-3, atol=1e-3)
    assert jnp.polyfit(x, both, 2, w=w, cov=True)[1].shape == (3, 3, 2)


def test_polyfit_jit_grad_errors():
    x = np.arange(5.0, dtype=np.float32)
    y = (x ** 2).astype(np.float32)
    close(plax.jit(lambda x, y: jnp.polyfit(x, y, 2))(x, y), [1.0, 0.0, 0.0], F32, atol=1e-3)
    # The slope of a least-squares line is linear in y: d slope / d y = (x - mean) / sum(...)
    centred = x - x.mean()
    close(plax.grad(lambda y: jnp.polyfit(x, y, 1)[0])(y), centred / (centred ** 2).sum(), F32,
          atol=1e-5)
    with pytest.raises(TypeError, match="expected 1D vector for x"):
        jnp.polyfit(np.ones((2, 2)), np.ones(2), 1)
    with pytest.raises(TypeError, match="expected x and y to have same length"):
        jnp.polyfit(np.ones(3), np.ones(4), 1)
    with pytest.raises(ValueError, match="must exceed order"):
        jnp.polyfit(np.arange(2.0), np.arange(2.0), 1, cov=True)
