"""approx_max_k / approx_min_k: on CPU, XLA's exact fallback (JAX 0.10.2's values), checked
against NumPy's stable sort along any dimension, under jit, vmap and grad."""
import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads
from helpers import grad_check_defaults

RNG = np.random.default_rng(0)
X = RNG.permutation(60).reshape(3, 4, 5).astype(np.float32) / 7


def ref(x, k, axis, is_max):
    order = np.argsort(-x if is_max else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis), idx


# (function, k, reduction_dimension)
ROWS = [(lax.approx_max_k, 2, -1), (lax.approx_min_k, 3, -1), (lax.approx_max_k, 1, 0),
        (lax.approx_min_k, 4, 1), (lax.approx_max_k, 5, 2)]


@pytest.mark.parametrize("fn,k,dim", ROWS, ids=[f"{r[0].__name__}-{r[1]}-{r[2]}" for r in ROWS])
def test_values_jit_vmap_grad(fn, k, dim):
    want_v, want_i = ref(X, k, dim, fn is lax.approx_max_k)
    for v, i in (fn(X, k, dim), plax.jit(lambda x: fn(x, k, dim))(X)):
        assert v.dtype == np.float32 and i.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(v), want_v)
        np.testing.assert_array_equal(np.asarray(i), want_i)
    eqns = plax.make_jaxpr(lambda x: fn(x, k, dim))(X).jaxpr.eqns
    assert [e.primitive for e in eqns] == [lax.approx_top_k_p]
    assert eqns[0].params["is_max_k"] == (fn is lax.approx_max_k)
    b = 1 if dim == 0 else 0  # vmap over another dimension
    inner = dim if dim < 0 else dim - (b < dim)
    v, i = plax.vmap(lambda x: fn(x, k, inner), in_axes=b, out_axes=b)(X)
    np.testing.assert_array_equal(np.asarray(v), want_v)
    np.testing.assert_array_equal(np.asarray(i), want_i)
    check_grads(lambda x: fn(x, k, dim)[0], (X,), 2, modes=("fwd", "rev"),
                **grad_check_defaults(np.float32))


def test_ties_aggregate_and_recall():
    v, i = lax.approx_max_k(np.ones(3, np.float32), 2)
    assert list(np.asarray(i)) == [0, 1]
    v, i = lax.approx_max_k(X[0], 2, aggregate_to_topk=False)
    np.testing.assert_array_equal(np.asarray(v), -np.sort(-X[0], axis=-1))
    big = np.arange(10000, dtype=np.float32)
    v, i = lax.approx_max_k(big, 3, aggregate_to_topk=False)
    assert v.shape == (2048,) and list(np.asarray(i[:3])) == [9999, 9998, 9997]
    v, _ = lax.approx_min_k(big, 3, recall_target=0.5, reduction_input_size_override=20000)
    assert list(np.asarray(v)) == [0, 1, 2]


@pytest.mark.parametrize("args,kw,exc,match", [
    ((X, 6), {}, ValueError, "k must be smaller than the size of reduction_dim 5"),
    ((X, 0), {}, ValueError, "k must be positive"),
    ((X.astype(np.int32), 2), {}, ValueError, "operand must be a floating type"),
    ((X, 2), {"recall_target": 1.5}, ValueError, "recall_target must be in"),
    ((X, 2), {"reduction_dimension": 3}, ValueError, "out of bounds"),
])
def test_errors(args, kw, exc, match):
    with pytest.raises(exc, match=match):
        lax.approx_max_k(*args, **kw)
