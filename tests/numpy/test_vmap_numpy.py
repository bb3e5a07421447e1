"""vmap over common plax.numpy functions, against per-example calls and NumPy."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.scipy.special import logsumexp
from helpers import check_vmap, check_vmap_axes

rng = np.random.default_rng(0)


# Functions built on reshape/transpose/broadcast_in_dim need the lax/shapes.py batch rules.


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def against_numpy(fun, np_fun, *args, in_axes=0, rtol=1e-5):
    """``vmap(fun, in_axes)(*args)`` equals ``np_fun`` applied to each example, stacked at 0."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    out = np.asarray(plax.vmap(fun, in_axes=in_axes)(*args))
    want = np.stack([np_fun(*[a if ax is None else np.take(a, i, ax) for a, ax in zip(args, axes)])
                     for i in range(size)])
    assert out.shape == want.shape, (out.shape, want.shape)
    if out.dtype.kind == "f":
        np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(out, want.astype(out.dtype))


# --- reductions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, -1, None])
def test_reduction(name, axis):
    x = normal(3, 4, 5)
    f = lambda v: getattr(jnp, name)(v, axis=axis)  # noqa: E731
    check_vmap_axes(f, x)
    against_numpy(f, lambda v: getattr(np, name)(v, axis=axis), x, in_axes=1)


def test_reductions_keepdims_and_tuple_axes():
    x = normal(3, 4, 5, 2)
    check_vmap_axes(lambda v: jnp.sum(v, axis=(0, 2), keepdims=True), x)
    against_numpy(lambda v: jnp.max(v, axis=(1, 2)), lambda v: np.max(v, axis=(1, 2)), x,
                  in_axes=3)


def test_cumulative():
    x = normal(3, 4, 5)
    for fn, ref in ((jnp.cumsum, np.cumsum), (jnp.cumprod, np.cumprod)):
        check_vmap_axes(lambda v: fn(v, axis=1), x)
        against_numpy(lambda v: fn(v, axis=0), lambda v: ref(v, axis=0), x, in_axes=2)


# --- products ----------------------------------------------------------------------------------
def test_matmul():
    a, b = normal(3, 2, 4), normal(3, 4, 5)
    check_vmap_axes(jnp.matmul, a, b, rtol=1e-5)
    against_numpy(jnp.matmul, np.matmul, a, b[0], in_axes=(0, None))
    against_numpy(lambda x, y: x @ y, np.matmul, a[:, 0], b, in_axes=(0, 0))  # vector @ matrix
    check_vmap(jnp.matmul, normal(3, 2, 2, 4), normal(4, 5, 3), in_axes=(0, 2), rtol=1e-5)


def test_dot():
    a, b = normal(3, 4), normal(3, 4, 5)
    check_vmap_axes(jnp.dot, a, b, rtol=1e-5)
    against_numpy(jnp.dot, np.dot, a, np.moveaxis(b, 0, 2), in_axes=(0, 2))


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", ((2, 4), (4, 5))),
    ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
    ("ij,ij->i", ((2, 4), (2, 4))),
    ("i,j->ij", ((3,), (4,))),
])
def test_einsum(spec, shapes):
    args = [normal(3, *s) for s in shapes]
    f = lambda x, y: jnp.einsum(spec, x, y)  # noqa: E731
    check_vmap_axes(f, *args, rtol=1e-5)
    against_numpy(f, lambda x, y: np.einsum(spec, x, y), args[0][0], args[1], in_axes=(None, 0))


# --- sorting ------------------------------------------------------------------------------------
def _sort(v):
    return jnp.sort(v, axis=-1)


def _argsort(v):
    return jnp.argsort(v, axis=-1)


def test_sort_and_argsort():
    x = normal(3, 4, 5)
    check_vmap_axes(_sort, x)
    check_vmap_axes(_argsort, x)
    against_numpy(_sort, lambda v: np.sort(v, -1), x, in_axes=2)
    against_numpy(_argsort, lambda v: np.argsort(v, -1, kind="stable"), x, in_axes=1)


# --- elementwise chains and where ----------------------------------------------------------------
def _chain(x, y):
    return jnp.tanh(x * 2.0 + y) - jnp.exp(-jnp.abs(x)) / (1.0 + y * y)


def test_elementwise_chain_and_where():
    x, y = normal(3, 4, 5), normal(3, 4, 5)
    check_vmap_axes(_chain, x, y)
    against_numpy(_chain, lambda a, b: np.tanh(a * 2 + b) - np.exp(-np.abs(a)) / (1 + b * b),
                  x, y[:, 0], in_axes=(1, None))
    w = lambda c, a, b: jnp.where(c > 0, a, b)  # noqa: E731
    check_vmap_axes(w, x, y, normal(3, 4, 5))
    against_numpy(w, lambda c, a, b: np.where(c > 0, a, b), x, y[0], 2.0, in_axes=(0, None, None))


def _log_softmax(x):
    return x - logsumexp(x, axis=-1, keepdims=True)


def _np_log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return x - (np.log(np.exp(x - m).sum(-1, keepdims=True)) + m)


def test_log_softmax():
    x = normal(3, 4, 5)
    check_vmap_axes(_log_softmax, x)
    against_numpy(_log_softmax, _np_log_softmax, x, in_axes=1)


def test_nested_vmap_mlp_layer():
    """A dense layer over a batch of sequences: vmap(vmap(...)) with different in_axes."""
    w, b, xs = normal(4, 3), normal(3), normal(5, 2, 4)  # xs: (seq, batch, features)
    layer = lambda x: jnp.tanh(jnp.dot(x, w) + b)  # noqa: E731
    out = plax.vmap(plax.vmap(layer, in_axes=0), in_axes=1)(xs)
    want = np.tanh(np.einsum("sbf,fo->bso", xs, w) + b)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
