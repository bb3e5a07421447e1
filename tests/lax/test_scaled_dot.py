"""scaled_dot (JAX 0.10.2's block-scaled dot): each block of the contracting dimensions is
multiplied by its scale, checked against NumPy (np.repeat of the scales), batched, under jit
and vmap; the result is bfloat16 unless asked otherwise; it has no derivative."""
import numpy as np
import pytest

import plax
from plax import lax

RNG = np.random.default_rng(0)


def ref(lhs, rhs, ls, rs, lc, rc):
    lhs = lhs * np.repeat(ls, lhs.shape[lc] // ls.shape[lc], axis=lc)
    rhs = rhs * np.repeat(rs, rhs.shape[rc] // rs.shape[rc], axis=rc)
    return np.matmul(lhs, rhs)


# (lhs shape, rhs shape, lhs scale shape, rhs scale shape, preferred dtype)
ROWS = [((2, 8), (8, 3), (2, 4), (2, 3), None), ((2, 8), (8, 3), (2, 1), (8, 3), np.float32),
        ((3, 2, 6), (3, 6, 4), (3, 2, 3), (3, 2, 4), np.float32)]


@pytest.mark.parametrize("ls_,rs_,lss,rss,pref", ROWS, ids=[str(r[:2]) for r in ROWS])
def test_against_numpy(ls_, rs_, lss, rss, pref):
    lhs, rhs = (RNG.normal(size=s).astype(np.float32) for s in (ls_, rs_))
    lsc, rsc = (RNG.uniform(0.5, 2, size=s).astype(np.float32) for s in (lss, rss))
    lc, rc = len(ls_) - 1, len(rs_) - 2
    want = ref(lhs, rhs, lsc, rsc, lc, rc)
    f = lambda a, b: lax.scaled_dot(a, b, lhs_scale=lsc, rhs_scale=rsc,  # noqa: E731
                                    preferred_element_type=pref)
    tol = 1e-5 if pref is np.float32 else 2e-2
    for got in (f(lhs, rhs), plax.jit(f)(lhs, rhs)):
        assert got.dtype == np.dtype(pref or "bfloat16")
        np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=tol, atol=tol)
    got = plax.vmap(f)(np.stack([lhs, 2 * lhs]), np.stack([rhs, rhs]))
    np.testing.assert_allclose(np.asarray(got[1]).astype(np.float64), 2 * want, rtol=tol,
                               atol=2 * tol)
    assert [e.primitive.name for e in plax.make_jaxpr(f)(lhs, rhs).jaxpr.eqns] == ["scaled_dot"]


def test_jax_values_and_missing_scale():
    lhs = np.arange(64.0, dtype=np.float32).reshape(2, 32) / 10
    rhs = np.ones((32, 3), np.float32)
    out = lax.scaled_dot(lhs, rhs, lhs_scale=np.full((2, 1), 2.0, np.float32),
                         rhs_scale=np.full((1, 3), 3.0, np.float32))
    np.testing.assert_array_equal(np.asarray(out).astype(np.float32), [[298] * 3, [912] * 3])
    np.testing.assert_array_equal(
        np.asarray(lax.scaled_dot(lhs, rhs, lhs_scale=np.full((2, 1), 2.0, np.float32)))
        .astype(np.float32), [[99] * 3, [304] * 3])


def test_errors():
    lhs, rhs = np.ones((2, 32), np.float32), np.ones((32, 3), np.float32)
    with pytest.raises(TypeError, match="must be divisible by its scale's dim size 3"):
        lax.scaled_dot(lhs, rhs, lhs_scale=np.ones((2, 3), np.float32))
    with pytest.raises(NotImplementedError, match="scaled_dot"):
        plax.grad(lambda a: lax.scaled_dot(a, rhs).astype(np.float32).sum())(lhs)
