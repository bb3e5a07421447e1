"""Collectives over named axes, computed across the batch under vmap(axis_name=...)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

from helpers import sample

F32 = np.float32


def vm(f, **kw):
    return plax.vmap(f, axis_name="i", **kw)


def test_psum_normalises():
    x = sample((4, 3), F32, "pos")
    out = vm(lambda v: v / lax.psum(v, "i"))(x)
    np.testing.assert_allclose(out, x / x.sum(0), rtol=1e-6)


@pytest.mark.parametrize("in_axis", [0, 1])
def test_allreduce_family(in_axis):
    x = sample((4, 3), F32)
    xin = x if in_axis == 0 else x.T
    for fn, ref in ((lax.psum, np.sum), (lax.pmax, np.max), (lax.pmin, np.min),
                    (lax.pmean, np.mean)):
        out = vm(lambda v: fn(v, "i"), in_axes=in_axis)(xin)
        np.testing.assert_allclose(out, np.broadcast_to(ref(x, 0), x.shape), rtol=1e-6)


def test_psum_of_unbatched_values_and_pytrees():
    x = sample((4, 3), F32)
    out = vm(lambda v: lax.psum(1.0, "i") + 0 * v)(x)
    np.testing.assert_array_equal(out, np.full((4, 3), 4.0, F32))
    tree = vm(lambda v: lax.psum({"a": v, "b": 2 * v}, "i"))(x)
    np.testing.assert_allclose(tree["b"], np.broadcast_to(2 * x.sum(0), x.shape), rtol=1e-6)
    ints = vm(lambda v: lax.psum(v, "i"))(np.arange(8, dtype=np.int32).reshape(4, 2))
    np.testing.assert_array_equal(ints, np.broadcast_to(np.array([12, 16]), (4, 2)))


def test_psum_under_vmap_stages_a_reduction():
    jaxpr = str(plax.make_jaxpr(vm(lambda v: lax.psum(v, "i")))(sample((4, 3), F32)))
    assert "reduce_sum" in jaxpr and "psum" not in jaxpr


def test_axis_index_and_axis_size():
    x = sample((5, 2), F32)
    np.testing.assert_array_equal(vm(lambda v: lax.axis_index("i"))(x), np.arange(5))
    np.testing.assert_array_equal(vm(lambda v: v * 0 + lax.axis_size("i"))(x), np.full((5, 2), 5))
    out = plax.vmap(plax.vmap(lambda v: lax.axis_index(("i", "j")), axis_name="j"),
                    axis_name="i")(np.zeros((2, 3)))
    np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("axis,tiled", [(0, False), (1, False), (-1, False), (0, True),
                                        (1, True)])
def test_all_gather(axis, tiled):
    x = sample((4, 3, 2), F32)
    out = vm(lambda v: lax.all_gather(v, "i", axis=axis, tiled=tiled))(x)
    if tiled:
        want = np.concatenate(list(x), axis=axis)
    else:
        want = np.stack(list(x), axis=axis)
    np.testing.assert_array_equal(out, np.broadcast_to(want, (4,) + want.shape))


@pytest.mark.parametrize("dim,tiled", [(0, False), (1, False), (0, True), (1, True)])
def test_psum_scatter(dim, tiled):
    n = 8 if tiled else 4  # the scatter dimension: the axis size, or a multiple when tiled
    x = sample((4, n, 3) if dim == 0 else (4, 3, n), F32)
    out = vm(lambda v: lax.psum_scatter(v, "i", scatter_dimension=dim, tiled=tiled))(x)
    total = x.sum(0)
    if tiled:
        chunks = np.split(total, 4, axis=dim)
        want = np.stack(chunks)
    else:
        want = np.stack([np.take(total, i, axis=dim) for i in range(4)])
    np.testing.assert_allclose(out, want, rtol=1e-5)


@pytest.mark.parametrize("split,concat,tiled", [(0, 1, False), (1, 0, False), (0, 0, False),
                                                (0, 1, True), (1, 0, True)])
def test_all_to_all(split, concat, tiled):
    n = 4
    per = [n * 2 if tiled else n, 3] if split == 0 else [3, n * 2 if tiled else n]
    x = sample((n,) + tuple(per), F32)
    out = vm(lambda v: lax.all_to_all(v, "i", split, concat, tiled=tiled))(x)
    # Member i receives chunk i (along split) from every member j, stacked/concatenated at concat.
    want = []
    for i in range(n):
        parts = [np.split(x[j], n, axis=split)[i] for j in range(n)]
        if tiled:
            want.append(np.concatenate(parts, axis=concat))
        else:
            want.append(np.stack([np.squeeze(p, split) for p in parts], axis=concat))
    np.testing.assert_array_equal(out, np.stack(want))


@pytest.mark.parametrize("axis,shape", [(0, (4, 3)), (1, (3, 4)), (-1, (2, 4))])
def test_pswapaxes_swaps_the_mapped_axis_with_axis(axis, shape):
    x = sample((4,) + shape, F32)
    out = vm(lambda v: lax.pswapaxes(v, "i", axis))(x)
    # Member i's out[..., j, ...] is member j's x[..., i, ...].
    np.testing.assert_array_equal(out, np.swapaxes(x, 0, axis % len(shape) + 1))
    tree = vm(lambda v: lax.pswapaxes({"a": v, "b": (2 * v,)}, "i", axis))(x)
    np.testing.assert_array_equal(tree["b"][0], 2 * np.swapaxes(x, 0, axis % len(shape) + 1))
    with pytest.raises(ValueError, match="all_to_all requires the size of the mapped axis i to equal"):
        vm(lambda v: lax.pswapaxes(v, "i", 0))(sample((4, 3), F32))


def test_ppermute_and_pshuffle():
    x = sample((4, 3), F32)
    ring = [(i, (i + 1) % 4) for i in range(4)]
    np.testing.assert_array_equal(vm(lambda v: lax.ppermute(v, "i", ring))(x), np.roll(x, 1, 0))
    partial = vm(lambda v: lax.ppermute(v, "i", [(0, 2)]))(x)
    want = np.zeros_like(x)
    want[2] = x[0]
    np.testing.assert_array_equal(partial, want)
    np.testing.assert_array_equal(vm(lambda v: lax.pshuffle(v, "i", [3, 2, 1, 0]))(x), x[::-1])
    with pytest.raises(ValueError, match="unique"):
        vm(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 1)]))(x)


def test_nested_vmaps_with_two_axis_names():
    x = sample((2, 3, 4), F32)
    both = plax.vmap(plax.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(both(x), np.broadcast_to(x.sum((0, 1)), x.shape), rtol=1e-5)
    outer_only = plax.vmap(plax.vmap(lambda v: lax.psum(v, "i"), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(outer_only(x), np.broadcast_to(x.sum(0), x.shape), rtol=1e-5)
    inner_only = plax.vmap(plax.vmap(lambda v: lax.psum(v, "j"), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(inner_only(x), np.broadcast_to(x.sum(1, keepdims=True), x.shape),
                               rtol=1e-5)
    # all_gather over the outer axis from inside the inner vmap.
    g = plax.vmap(plax.vmap(lambda v: lax.all_gather(v, "i"), axis_name="j"), axis_name="i")(x)
    assert g.shape == (2, 3, 2, 4)
    np.testing.assert_array_equal(g[1, 2], x[:, 2])
    g2 = plax.vmap(plax.vmap(lambda v: lax.all_gather(v, ("i", "j")), axis_name="j"),
                   axis_name="i")(x)
    np.testing.assert_array_equal(g2[0, 0], x.reshape(6, 4))


def test_same_name_shadows():
    x = sample((2, 3), F32)
    out = plax.vmap(plax.vmap(lambda v: lax.psum(v, "i"), axis_name="i"), axis_name="i")(x)
    np.testing.assert_allclose(out, np.broadcast_to(x.sum(1, keepdims=True), x.shape), rtol=1e-6)


def test_unbound_axis_name():
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psum(1.0, "i")
    with pytest.raises(NameError, match="unbound axis name: j"):
        vm(lambda v: lax.psum(v, "j"))(sample((2,), F32))
    with pytest.raises(NameError, match="unbound axis name: k"):
        vm(lambda v: lax.axis_index("k"))(sample((2,), F32))
    with pytest.raises(NameError, match="unbound axis name"):
        plax.jit(lambda v: lax.all_gather(v, "i"))(sample((2,), F32))


def test_make_jaxpr_axis_env_stages_collectives():
    x = sample((4, 3), F32)
    j = str(plax.make_jaxpr(lambda v: lax.psum(v, "i"), axis_env=[("i", 4)])(x))
    assert "psum[axes=('i',) axis_index_groups=None]" in j
    j = str(plax.make_jaxpr(lambda v: lax.all_gather(v, "i"), axis_env=[("i", 4)])(x))
    assert "f32[4,4,3] = all_gather" in j and "axis_size=4" in j
    j = str(plax.make_jaxpr(lambda v: lax.pmean(v, "i"), axis_env=[("i", 4)])(x))
    assert "psum" in j and "div" in j


def test_collectives_inside_jit_under_vmap():
    x = sample((4, 3), F32)
    f = plax.jit(lambda v: v - lax.pmean(v, "i"))
    np.testing.assert_allclose(vm(f)(x), x - x.mean(0), rtol=1e-5, atol=1e-6)
    # The same jit under a different axis size is traced again (the size is baked in).
    y = sample((2, 3), F32, seed=1)
    np.testing.assert_allclose(vm(f)(y), y - y.mean(0), rtol=1e-5, atol=1e-6)


def test_gradients_through_collectives():
    x = sample((4, 3), F32)
    # As in JAX: psum transposes to psum, so d/dx_i sum(psum(x)) = axis size.
    g = vm(plax.grad(lambda v: lax.psum(v, "i").sum()))(x)
    np.testing.assert_array_equal(g, np.full((4, 3), 4.0))
    g = vm(plax.grad(lambda v: (lax.psum(v, "i") * v).sum()))(x)
    np.testing.assert_allclose(g, np.broadcast_to(2 * x.sum(0), x.shape), rtol=1e-5)
    # Outside the collective, grad of a vmapped function sees the whole batch.
    f = lambda v: jnp.sum(vm(lambda u: u / lax.psum(u * u, "i"))(v) ** 2)
    check_grads(f, (x.astype(np.float64),), order=1, modes=("rev", "fwd"))
    h = lambda v: jnp.sum(vm(lambda u: lax.all_gather(u, "i") * lax.axis_index("i"))(v) ** 2)
    check_grads(h, (x,), order=1, modes=("rev",))
    k = lambda v: jnp.sum(vm(lambda u: lax.ppermute(u, "i", [(0, 1), (1, 2), (2, 3)]) ** 2)(v))
    check_grads(k, (x,), order=1, modes=("rev", "fwd"))
    s = lambda v: jnp.sum(vm(lambda u: lax.psum_scatter(u, "i") ** 2)(v))
    check_grads(s, (sample((4, 4, 2), F32),), order=1, modes=("rev", "fwd"))
    a = lambda v: jnp.sum(vm(lambda u: lax.all_to_all(u, "i", 0, 1) ** 3)(v))
    check_grads(a, (sample((4, 4, 2), F32),), order=1, modes=("rev",))
