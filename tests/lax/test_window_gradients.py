"""The windowed reductions' gradient primitives, as JAX 0.10.2 has them: max/min pooling's
tangent is select_and_gather_add, its cotangent select_and_scatter_add (checked against NumPy
and finite differences), and select_and_scatter the general form with traced functions."""
import numpy as np
import pytest

import plax
from plax import lax
from plax.higher_order.windowed import _select_and_scatter
from plax.test_util import check_grads
from helpers import grad_check_defaults

X = np.random.default_rng(0).permutation(72).reshape(1, 6, 6, 2).astype(np.float32) / 9
GRAD = grad_check_defaults(np.float32)


def maxpool(x):
    return lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def minpool_same(x):
    return lax.reduce_window(x, np.inf, lax.min, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")


def _argmax_scatter(x, ct):
    """NumPy: each 2x2 window's cotangent lands on its (first) maximum."""
    out = np.zeros_like(x)
    for i in range(3):
        for j in range(3):
            for c in range(x.shape[-1]):
                win = x[0, 2 * i:2 * i + 2, 2 * j:2 * j + 2, c]
                a, b = np.unravel_index(np.argmax(win), (2, 2))
                out[0, 2 * i + a, 2 * j + b, c] += ct[0, i, j, c]
    return out


def test_maxpool_gradient_is_select_and_scatter_add():
    ct = np.arange(18, dtype=np.float32).reshape(1, 3, 3, 2)
    _, vjp = plax.vjp(maxpool, X)
    np.testing.assert_allclose(np.asarray(vjp(ct)[0]), _argmax_scatter(X, ct))
    eqns = plax.make_jaxpr(plax.grad(lambda x: maxpool(x).sum()))(X).jaxpr.eqns
    assert lax.select_and_scatter_add_p in [e.primitive for e in eqns]
    jvp_eqns = plax.make_jaxpr(lambda x, t: plax.jvp(maxpool, (x,), (t,)))(X, X).jaxpr.eqns
    assert lax.select_and_gather_add_p in [e.primitive for e in jvp_eqns]


@pytest.mark.parametrize("fn", [maxpool, minpool_same], ids=["max", "min_same"])
def test_derivatives_jit_vmap(fn):
    check_grads(fn, (X,), 2, modes=("fwd", "rev"), **GRAD)
    g = plax.grad(lambda x: (fn(x) ** 2).sum())
    np.testing.assert_allclose(np.asarray(plax.jit(g)(X)), np.asarray(g(X)), rtol=1e-6)
    batched = plax.vmap(g)(np.stack([X, 2 * X]))
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(g(2 * X)), rtol=1e-6)


def test_primitives_bound_directly():
    params = dict(select_prim=lax.ge_p, window_dimensions=(1, 2, 2, 1),
                  window_strides=(1, 2, 2, 1), padding=((0, 0),) * 4)
    ct = np.arange(18, dtype=np.float32).reshape(1, 3, 3, 2)
    out = lax.select_and_scatter_add_p.bind(ct, X, **params)
    np.testing.assert_allclose(np.asarray(out), _argmax_scatter(X, ct))
    picked = lax.select_and_gather_add_p.bind(X * 10, X, base_dilation=(1,) * 4,
                                              window_dilation=(1,) * 4, **params)
    np.testing.assert_allclose(np.asarray(picked), 10 * np.asarray(maxpool(X)), rtol=1e-6)
    with pytest.raises(ValueError, match="select_prim must be lax.ge_p or lax.le_p"):
        lax.select_and_scatter_add_p.bind(ct, X, **{**params, "select_prim": lax.lt_p})


def test_select_and_scatter_general_form():
    x = np.array([1.0, 5.0, 2.0, 2.0, 7.0, 3.0], np.float32)
    src = np.array([10.0, 20.0, 30.0], np.float32)
    # max of each pair receives source * 1, combined by multiplication from an init of 1
    out = _select_and_scatter(x, lambda a, b: a >= b, (2,), (2,), ((0, 0),), src, np.float32(1),
                              lambda a, b: a * b)
    np.testing.assert_allclose(np.asarray(out), [1, 10, 20, 1, 30, 1])
    eqns = plax.make_jaxpr(lambda x: _select_and_scatter(
        x, lambda a, b: a <= b, (3,), (3,), ((0, 0),), src[:2], np.float32(0), lax.add))(x)
    assert [e.primitive for e in eqns.jaxpr.eqns] == [lax.select_and_scatter_p]
    got = plax.jit(lambda x: _select_and_scatter(x, lambda a, b: a <= b, (3,), (3,), ((0, 0),),
                                                 src[:2], np.float32(0), lax.add))(x)
    np.testing.assert_allclose(np.asarray(got), [10, 0, 0, 20, 0, 0])  # minima: 1.0, 2.0
