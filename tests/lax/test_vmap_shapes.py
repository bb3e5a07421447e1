"""vmap of the shape and slicing primitives (plax.lax.shapes): every primitive with the batch at
axis 0, 1 and -1 and with arguments left unbatched, compared with per-example calls; batched
dynamic-slice indices becoming gather/scatter; derivatives through them."""
import numpy as np
import pytest

import helpers
import plax
import plax.lax.shapes as L
from plax.test_util import check_grads

B = 3  # batch size


def _batch(shape, dtype=np.float32, seed=0):
    return helpers.sample((B,) + tuple(shape), dtype, seed=seed)


# --- one row per use of a primitive: (id, function, per-example argument shapes, dtype) -------
CASES = [
    ("broadcast_in_dim", lambda x: L.broadcast_in_dim(x, (2, 4, 5, 3), (1, 3)), [(4, 3)],
     np.float32),
    ("broadcast_in_dim_size1", lambda x: L.broadcast_in_dim(x, (2, 4, 3), (1, 2)), [(1, 3)],
     np.int32),
    ("broadcast_in_dim_scalar", lambda x: L.broadcast_in_dim(x, (2, 3), ()), [()], np.float32),
    ("broadcast", lambda x: L.broadcast(x, (2,)), [(4, 3)], np.bool_),
    ("expand_dims", lambda x: L.expand_dims(x, (0, 2)), [(4, 3)], np.float32),
    ("reshape", lambda x: L.reshape(x, (3, 2, 2)), [(4, 3)], np.float32),
    ("reshape_dimensions", lambda x: L.reshape(x, (2, 6), (1, 0)), [(4, 3)], np.int32),
    ("reshape_to_scalar", lambda x: L.reshape(x, ()), [(1, 1)], np.float32),
    ("transpose", lambda x: L.transpose(x, (2, 0, 1)), [(2, 4, 3)], np.float32),
    ("squeeze", lambda x: L.squeeze(x, (0, 2)), [(1, 4, 1, 3)], np.float32),
    ("rev", lambda x: L.rev(x, (0, 2)), [(2, 4, 3)], np.bool_),
    ("concatenate", lambda x, y: L.concatenate([x, y, x], 1), [(4, 3), (4, 2)], np.float32),
    ("concatenate_axis0", lambda x, y: L.concatenate([y, x], 0), [(4, 3), (2, 3)], np.int32),
    ("pad", lambda x, p: L.pad(x, p, ((1, 2, 1), (-1, 0, 0))), [(4, 3), ()], np.float32),
    ("pad_interior_negative", lambda x, p: L.pad(x, p, ((-2, 1, 2),)), [(4,), ()], np.int32),
    ("slice", lambda x: L.slice(x, (1, 0), (4, 3), (2, 2)), [(4, 3)], np.float32),
    ("slice_in_dim", lambda x: L.slice_in_dim(x, 1, -1, axis=1), [(4, 5)], np.float32),
    ("index_in_dim", lambda x: L.index_in_dim(x, -1, axis=1, keepdims=False), [(4, 5)],
     np.int32),
    ("dynamic_slice", lambda x, i, j: L.dynamic_slice(x, (i, j), (2, 2)), [(4, 3), (), ()],
     np.float32),
    ("dynamic_slice_in_dim", lambda x, i: L.dynamic_slice_in_dim(x, i, 2, axis=1),
     [(4, 5), ()], np.int32),
    ("dynamic_index_in_dim", lambda x, i: L.dynamic_index_in_dim(x, i, 0, keepdims=False),
     [(4, 5), ()], np.float32),
    ("dynamic_update_slice", lambda x, u, i: L.dynamic_update_slice(x, u, (i, 1)),
     [(4, 3), (2, 2), ()], np.float32),
    ("dynamic_update_index_in_dim",
     lambda x, u, i: L.dynamic_update_index_in_dim(x, u, i, 1), [(4, 3), (4,), ()], np.bool_),
]

# Start indices per example: negative (counted from the end) and out of bounds (clamped).
INDICES = np.array([-1, 1, 7], np.int32)


def _index_args(name, shapes):
    """Which arguments are start indices."""
    return [k for k, s in enumerate(shapes) if s == () and k > 0 and "pad" not in name]


@pytest.mark.parametrize("name, fun, shapes, dtype", CASES, ids=[c[0] for c in CASES])
def test_vmap(name, fun, shapes, dtype):
    idx = set(_index_args(name, shapes))
    args = [np.roll(INDICES, k) if k in idx else _batch(s, dtype, seed=k)
            for k, s in enumerate(shapes)]
    helpers.check_vmap_axes(fun, *args)


def test_vmap_out_axes_and_nesting():
    x = helpers.sample((2, B, 4, 3), np.float32)
    f = lambda x: L.transpose(L.rev(x, (0,)), (1, 0))
    helpers.check_vmap(f, x[0], in_axes=1, out_axes=-1)
    nested = plax.vmap(plax.vmap(f, in_axes=1), in_axes=0)(x)
    want = np.stack([np.stack([np.asarray(f(x[i, :, j])) for j in range(4)])
                     for i in range(2)])
    np.testing.assert_array_equal(np.asarray(nested), want)


def test_concatenate_operands_batched_at_different_axes():
    x, y = _batch((4, 3)), _batch((4, 2), seed=1)
    helpers.check_vmap(lambda x, y: L.concatenate([x, y], 1), x, np.moveaxis(y, 0, 2),
                       in_axes=(0, 2))


def test_pad_batched_value_only():
    x, p = helpers.sample((4, 3), np.float32), _batch((), seed=3)
    cfg = ((1, -1, 1), (0, 2, 0))
    out = plax.vmap(lambda p: L.pad(x, p, cfg))(p)
    want = np.stack([np.asarray(L.pad(x, p[i], cfg)) for i in range(B)])
    np.testing.assert_array_equal(np.asarray(out), want)


# --- batched start indices become gather / scatter --------------------------------------------
def test_dynamic_slice_batched_index_is_a_gather():
    x = np.arange(6.0, dtype=np.float32)
    i = np.array([0, 3, 5, -2], np.int32)
    f = plax.vmap(lambda x, i: L.dynamic_slice(x, (i,), (2,)), in_axes=(None, 0))
    text = str(plax.make_jaxpr(f)(x, i))
    assert "gather[" in text and "mode=GatherScatterMode.CLIP" in text
    assert "dynamic_slice" not in text
    starts = np.clip(np.where(i < 0, i + 6, i), 0, 4)
    helpers.check(f(x, i), np.stack([x[s:s + 2] for s in starts]), np.float32)


def test_dynamic_slice_unbatched_index_stays_a_dynamic_slice():
    f = plax.vmap(lambda x, i: L.dynamic_slice(x, (i,), (2,)), in_axes=(0, None))
    text = str(plax.make_jaxpr(f)(_batch((6,)), np.int32(2)))
    assert "dynamic_slice[" in text and "gather" not in text


def test_dynamic_update_slice_batched_index_is_a_scatter():
    x, u = _batch((6,)), _batch((2,), seed=1)
    f = plax.vmap(lambda x, u, i: L.dynamic_update_slice(x, u, (i,)))
    text = str(plax.make_jaxpr(f)(x, u, INDICES))
    assert "scatter[" in text and "dynamic_update_slice" not in text
    want = x.copy()
    for b, s in enumerate(np.clip(np.where(INDICES < 0, INDICES + 6, INDICES), 0, 4)):
        want[b, s:s + 2] = u[b]
    helpers.check(f(x, u, INDICES), want, np.float32)
    out = plax.vmap(lambda x, u, i: L.dynamic_update_slice(x, u, (i,)),
                    in_axes=(None, None, 0))(np.float32(1) * x[0], u[0], INDICES)
    assert not out.aval.weak_type


# --- derivatives through batched slices ------------------------------------------------------------
def _loss_slice(x, i):
    return (L.dynamic_slice(x, (i, 1), (2, 2)) ** 2).sum()


def _loss_update(x, u, i):
    return (L.dynamic_update_slice(x, u * u, (i, 0)) * x).sum()


def test_vmap_of_grad_through_dynamic_slice():
    x = _batch((4, 3))
    g = plax.vmap(plax.grad(_loss_slice))(x, INDICES)
    want = np.stack([np.asarray(plax.grad(_loss_slice)(x[b], INDICES[b])) for b in range(B)])
    helpers.check(g, want, np.float32)


def test_grad_of_vmap_through_dynamic_slice():
    x = _batch((4, 3))
    total = lambda x: plax.vmap(_loss_slice)(x, INDICES).sum()
    g = plax.grad(total)(x)
    want = np.stack([np.asarray(plax.grad(_loss_slice)(x[b], INDICES[b])) for b in range(B)])
    helpers.check(g, want, np.float32)
    check_grads(lambda x: plax.vmap(lambda x, i: L.dynamic_slice(x, (i, 1), (2, 2)))(x, INDICES),
                (x,), order=2, modes=("fwd", "rev"))
    # An unbatched operand: the per-example cotangents add up in one scatter-add.
    shared = lambda x: plax.vmap(_loss_slice, in_axes=(None, 0))(x, INDICES).sum()
    want = sum(np.asarray(plax.grad(_loss_slice)(x[0], i)) for i in INDICES)
    helpers.check(plax.grad(shared)(x[0]), want, np.float32)


def test_vmap_of_grad_through_dynamic_update_slice():
    x, u = _batch((4, 3)), _batch((2, 3), seed=1)
    g = plax.vmap(plax.grad(_loss_update, (0, 1)))(x, u, INDICES)
    per = [plax.grad(_loss_update, (0, 1))(x[b], u[b], INDICES[b]) for b in range(B)]
    for k in range(2):
        helpers.check(g[k], np.stack([np.asarray(p[k]) for p in per]), np.float32)


def test_grad_of_vmap_through_dynamic_update_slice():
    x, u = _batch((4, 3)), _batch((2, 3), seed=1)
    total = lambda x, u: plax.vmap(_loss_update)(x, u, INDICES).sum()
    g = plax.grad(total, (0, 1))(x, u)
    per = [plax.grad(_loss_update, (0, 1))(x[b], u[b], INDICES[b]) for b in range(B)]
    for k in range(2):
        helpers.check(g[k], np.stack([np.asarray(p[k]) for p in per]), np.float32)
    f = plax.vmap(lambda x, u, i: L.dynamic_update_slice(x, u, (i, 0)))
    check_grads(lambda x, u: f(x, u, INDICES), (x, u), order=2, modes=("fwd", "rev"))
