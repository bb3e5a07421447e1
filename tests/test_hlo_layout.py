"""Where batching rules leave the batch dimension, and what that costs the compiled program.

vmap(jacrev(f)) of a layer used to end in a transpose of the whole batched jacobian
(elementwise ops kept the batch where it fell, far from where vmap's out_axes wanted it,
while broadcasting it into a larger result); they now move the batch first on the smaller
operands. These tests check the values against closed forms and NumPy, and that no copy or
transpose of the full result is left.
"""
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

from helpers import x64_for

B, N = 6, 5  # batch, layer width


def _layer(w, h):
    return jnp.tanh(w @ h)


def _layer_jacobians(w, hs):
    """d tanh(w @ h) / dh for each row h of hs: diag(1 - tanh(w h)^2) @ w."""
    w, hs = np.asarray(w, np.float64), np.asarray(hs, np.float64)
    y = np.tanh(hs @ w.T)
    return (1 - y ** 2)[:, :, None] * w[None]


def _data(dtype, n=N, b=B):
    rng = np.random.default_rng(0)
    return ((rng.standard_normal((n, n)) / np.sqrt(n)).astype(dtype),
            rng.standard_normal((b, n)).astype(dtype))


def _moves_at_least(text, elements):
    """The copy / transpose instructions of HLO ``text`` whose result has >= ``elements``."""
    found = []
    for m in re.finditer(r"=\s*[a-z0-9]+\[([0-9,]*)\]\S*\s+(copy|transpose)\(", text):
        size = int(np.prod([int(d) for d in m.group(1).split(",") if d]))
        if size >= elements:
            found.append(m.group(0))
    return found


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_vmap_jacobian_of_layer_matches_closed_form(jac, dtype):
    with x64_for(dtype):
        w, hs = _data(dtype)
        fn = plax.vmap(getattr(plax, jac)(_layer, argnums=1), in_axes=(None, 0))
        for f in (fn, plax.jit(fn)):
            got = f(w, hs)
            assert got.shape == (B, N, N) and got.dtype == np.dtype(dtype)
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(np.asarray(got), _layer_jacobians(w, hs), rtol=tol, atol=tol)


def test_vmap_jacrev_of_layer_jaxpr_ends_without_transpose():
    w, hs = _data(np.float32)
    jaxpr = plax.make_jaxpr(plax.vmap(plax.jacrev(_layer, argnums=1), in_axes=(None, 0)))(w, hs)
    eqns = jaxpr.jaxpr.eqns
    full_size = [e for e in eqns if e.primitive.name == "transpose"
                 and np.prod(e.outvars[0].aval.shape) >= B * N * N]
    assert full_size == [] and eqns[-1].primitive.name != "transpose"


@pytest.mark.parametrize("jac,moves", [("jacrev", 0), ("jacfwd", 1)])
def test_vmap_jacobian_of_layer_compiles_without_moving_the_result(jac, moves):
    # jacfwd's own vmap puts its batch last (out_axes=-1) after the elementwise ops have
    # brought it to the front next to an unbatched operand: one move of the result (JAX's
    # program has it too, and more copies besides).
    b, n = 64, 32
    w, hs = _data(np.float32, n, b)
    f = plax.jit(plax.vmap(getattr(plax, jac)(_layer, argnums=1), in_axes=(None, 0)))
    text = f.lower(w, hs).compile().as_text()
    assert len(_moves_at_least(text, b * n * n)) <= 2 * moves  # a transpose and its copy


def _sin_layer_times_x(w, x):
    return jnp.sin(w @ x) * x


def _sin_layer_jacobian(w, x):
    """d (sin(w x) * x) / dx = diag(x) diag(cos(w x)) w + diag(sin(w x))."""
    w, x = np.asarray(w, np.float64), np.asarray(x, np.float64)
    z = w @ x
    return (x * np.cos(z))[:, None] * w + np.diag(np.sin(z))


def test_jacfwd_with_unbatched_operand_takes_one_transpose():
    # An unbatched array among the operands brings the batch to the front (where the other
    # term of the sum has it already, and where XLA gets the dot's output for free): the
    # compiled jacobian then moves once, for jacfwd's out_axes=-1, not once more for the sum.
    w, hs = _data(np.float32)
    f = plax.jacfwd(_sin_layer_times_x, argnums=1)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(w, hs[0])), _sin_layer_jacobian(w, hs[0]),
                               rtol=1e-5, atol=1e-5)
    text = plax.jit(f).lower(w, hs[0]).compile().as_text()
    assert len(_moves_at_least(text, N * N)) <= 2  # a transpose and its copy
    got = plax.vmap(f, in_axes=(None, 0))(w, hs)
    want = np.stack([_sin_layer_jacobian(w, h) for h in hs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,in_axis,out_axes", [
    ((1, 3, 4), 2, 0), ((3, 1, 4), 0, 2), ((2, 1, 3, 1), 2, 0), ((4, 1, 1), 0, 2)])
def test_vmap_moves_batch_past_size_one_axes(shape, in_axis, out_axes):
    # Moving a batch among size-1 axes is a reshape (plus a transpose of the others).
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = np.arange(np.prod(shape) // shape[in_axis], dtype=np.float32).reshape(
        shape[:in_axis] + shape[in_axis + 1:]) + 1.0
    f = plax.vmap(lambda r: r * y, in_axes=in_axis, out_axes=out_axes)
    want = np.moveaxis(np.moveaxis(x, in_axis, 0) * y, 0, out_axes)
    for g in (f, plax.jit(f)):
        np.testing.assert_array_equal(np.asarray(g(x)), want)
    check_grads(f, (x,), order=1, modes=("fwd", "rev"), eps=1e-2)


@pytest.mark.parametrize("in_axis", [0, 1, 2])
@pytest.mark.parametrize("out_axes", [0, 2, -1])
def test_vmap_broadcast_in_dim_batch_anywhere(in_axis, out_axes):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    per_example = lambda r: lax.broadcast_in_dim(r, (r.shape[0], 5, r.shape[1]), (0, 2))
    got = plax.vmap(per_example, in_axes=in_axis, out_axes=out_axes)(x)
    rows = [np.broadcast_to(np.take(x, i, in_axis)[:, None, :],
                            (np.take(x, i, in_axis).shape[0], 5, np.take(x, i, in_axis).shape[1]))
            for i in range(x.shape[in_axis])]
    want = np.moveaxis(np.stack(rows), 0, out_axes)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_vmap_broadcast_in_dim_derivatives():
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    f = plax.vmap(lambda r: lax.broadcast_in_dim(r, (2, 3), (1,)) * jnp.sin(r), in_axes=1)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_elementwise_broadcast_into_larger_result(in_axis, dtype):
    with x64_for(dtype):
        rng = np.random.default_rng(2)
        x = np.moveaxis(rng.standard_normal((B, 3, 1)), 0, in_axis).astype(dtype)
        y = rng.standard_normal((3, 4)).astype(dtype)
        for op, ref in ((lax.mul, np.multiply), (lax.sub, np.subtract)):
            f = plax.vmap(lambda r: op(r, y), in_axes=in_axis)
            want = ref(np.moveaxis(x, in_axis, 0), y[None])
            for g in (f, plax.jit(f)):
                got = g(x)
                assert got.dtype == np.dtype(dtype)
                np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
            got = plax.vmap(lambda r: op(y, r), in_axes=in_axis, out_axes=1)(x)
            want = np.moveaxis(ref(y[None], np.moveaxis(x, in_axis, 0)), 0, 1)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
