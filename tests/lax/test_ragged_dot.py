"""ragged_dot / ragged_dot_general (JAX 0.10.2's grouped matmul) against a NumPy loop over the
groups, in each of the three places the ragged dimension can sit, under jit, vmap (group sizes
shared or per example) and derivatives to second order."""
import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads
from helpers import grad_check_defaults

R = lax.RaggedDotDimensionNumbers
RNG = np.random.default_rng(0)
GRAD = grad_check_defaults(np.float32)


def _bounds(gs):
    ends = np.cumsum(gs)
    return list(zip(ends - gs, ends))


def ref_free(lhs, rhs, gs):  # lhs (b, m, k), rhs (b, g, k, n)
    out = np.zeros(lhs.shape[:2] + rhs.shape[3:])
    for g, (s, e) in enumerate(_bounds(gs)):
        out[:, s:e] = np.einsum("bmk,bkn->bmn", lhs[:, s:e], rhs[:, g])
    return out


def ref_contracting(lhs, rhs, gs):  # lhs (b, m, k), rhs (b, k, n) -> (g, b, m, n)
    return np.stack([np.einsum("bmk,bkn->bmn", lhs[..., s:e], rhs[:, s:e])
                     for s, e in _bounds(gs)])


# (name, lhs shape, rhs shape, group sizes, dimension numbers, NumPy reference)
ROWS = [
    ("ragged_dot", (6, 3), (2, 3, 4), [2, 3], None,
     lambda l, r, g: ref_free(l[None], r[None], g)[0]),
    ("ragged_dot_full", (5, 2), (3, 2, 3), [1, 0, 4], None,
     lambda l, r, g: ref_free(l[None], r[None], g)[0]),
    ("free_batched", (3, 6, 2), (3, 2, 2, 5), [2, 3],
     R((((2,), (2,)), ((0,), (0,))), (1,), (1,)), ref_free),
    ("contracting", (3, 4, 6), (3, 6, 5), [2, 3],
     R((((2,), (1,)), ((0,), (0,))), (2,), ()), ref_contracting),
    ("batch", (5, 4, 3), (5, 3, 2), [2, 2],
     R((((2,), (1,)), ((0,), (0,))), (0,), ()), lambda l, r, g: np.einsum("bmk,bkn->bmn", l, r)),
]


def _call(dn):
    if dn is None:
        return lax.ragged_dot
    return lambda l, r, g: lax.ragged_dot_general(l, r, g, dn)


@pytest.mark.parametrize("name,ls,rs,gs,dn,ref", ROWS, ids=[r[0] for r in ROWS])
def test_against_numpy_loop(name, ls, rs, gs, dn, ref):
    lhs = RNG.normal(size=ls).astype(np.float32)
    rhs = RNG.normal(size=rs).astype(np.float32)
    gs = np.array(gs, np.int32)
    f = _call(dn)
    want = ref(lhs.astype(np.float64), rhs.astype(np.float64), gs)
    for got in (f(lhs, rhs, gs), plax.jit(f)(lhs, rhs, gs)):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    eqns = plax.make_jaxpr(f)(lhs, rhs, gs).jaxpr.eqns
    assert [e.primitive.name for e in eqns] == ["ragged_dot_general"]
    order = 2 if name == "ragged_dot" else 1  # second order once: the rules are the same
    check_grads(lambda l, r: f(l, r, gs), (lhs, rhs), order, modes=("fwd", "rev"), **GRAD)
    # vmap over lhs and rhs with shared group sizes, and with per-example group sizes.
    got = plax.vmap(f, in_axes=(0, 0, None))(np.stack([lhs, 2 * lhs]), np.stack([rhs, rhs]), gs)
    np.testing.assert_allclose(np.asarray(got[1]), 2 * want, rtol=1e-5, atol=1e-5)
    other = gs[::-1].copy()
    got = plax.vmap(f, in_axes=(None, 1, 0))(lhs, np.stack([rhs, rhs], 1), np.stack([gs, other]))
    np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-5, atol=1e-5)
    want_other = ref(lhs.astype(np.float64), rhs.astype(np.float64), other)
    np.testing.assert_allclose(np.asarray(got[1]), want_other, rtol=1e-5, atol=1e-5)


def test_dtypes():
    lhs, rhs, gs = np.ones((6, 3), np.int8), np.ones((2, 3, 4), np.int8), np.array([2, 3])
    out = lax.ragged_dot(lhs, rhs, gs, preferred_element_type=np.int32)
    assert out.dtype == np.int32 and int(out.sum()) == 5 * 4 * 3
    assert lax.ragged_dot(lhs.astype(np.float32), rhs.astype(np.float32), gs).dtype == np.float32


@pytest.mark.parametrize("args,exc,match", [
    (((6, 3), (2, 3, 4), [2, 3, 1]), TypeError, "expected rhs group dimension size to be 3"),
    (((6, 3), (2, 4, 4), [2, 3]), TypeError, "contracting dimensions to have the same shape"),
])
def test_errors(args, exc, match):
    ls, rs, gs = args
    with pytest.raises(exc, match=match):
        lax.ragged_dot(np.ones(ls, np.float32), np.ones(rs, np.float32), np.array(gs, np.int32))


def test_float_group_sizes_and_group_offset_refused():
    lhs, rhs = np.ones((6, 3), np.float32), np.ones((2, 3, 4), np.float32)
    with pytest.raises(TypeError, match="group_sizes"):
        lax.ragged_dot(lhs, rhs, np.array([2.0, 3.0], np.float32))
    with pytest.raises(NotImplementedError, match="group_offset"):
        lax.ragged_dot(lhs, rhs, np.array([2, 3]), group_offset=np.array([1]))
