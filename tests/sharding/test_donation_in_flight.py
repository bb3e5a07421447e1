"""Donating programs on a mesh, next to programs with collectives: one collective program
runs at a time on the CPU, and the wait for the previous one must not touch its outputs,
which a later program may have been given by donation."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.sharding import AxisType, NamedSharding, PartitionSpec as P

pytestmark = pytest.mark.needs_devices(8)


def test_a_training_loop_donating_its_weights_between_collective_programs():
    mesh = plax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    w = plax.device_put(jnp.ones((64, 64)), NamedSharding(mesh, P(None, "model")))
    x = plax.device_put(jnp.ones((16, 64)), NamedSharding(mesh, P("data", None)))
    step = plax.jit(lambda w, x: (w - 0.01 * plax.grad(lambda w: jnp.tanh(x @ w).sum())(w),
                                  jnp.tanh(x @ w).sum()), donate_argnums=0)
    scale = plax.jit(lambda w: w * 0.5, donate_argnums=0)  # (no collectives)
    want_w, want_x = np.ones((64, 64)), np.ones((16, 64))
    for _ in range(3):
        old = w
        w, loss = step(w, x)
        assert old.is_deleted()
        w = scale(w)
        t = np.tanh(want_x @ want_w)
        want_loss = t.sum()
        want_w = (want_w - 0.01 * want_x.T @ (1 - t ** 2)) * 0.5
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5)


def test_shard_map_with_a_psum_between_donating_programs():
    mesh = plax.make_mesh((8,), ("i",))
    x = plax.device_put(jnp.arange(64.0).reshape(8, 8), NamedSharding(mesh, P("i")))

    @functools.partial(plax.jit, donate_argnums=0)
    def summed(x):
        return plax.shard_map(lambda b: b + plax.lax.psum(b, "i"), mesh=mesh, in_specs=P("i"),
                              out_specs=P("i"))(x)
    double = plax.jit(lambda x: x * 2, donate_argnums=0)
    want = np.arange(64.0).reshape(8, 8)
    for _ in range(3):
        x = double(summed(x))
        want = (want + want.reshape(8, 1, 8).sum(0)) * 2
    np.testing.assert_array_equal(np.asarray(x), want)


def test_pmap_with_a_psum_between_donating_programs():
    total = plax.pmap(lambda v: plax.lax.psum(v, "d"), axis_name="d", donate_argnums=0)
    half = plax.pmap(lambda v: v * 0.5, donate_argnums=0)
    y = total(jnp.ones((8, 3)))
    for _ in range(3):
        y = half(total(y))
    np.testing.assert_array_equal(np.asarray(y), np.full((8, 3), 512.0))


def test_a_collective_program_followed_by_many_donating_ones():
    mesh = plax.make_mesh((8,), ("i",))
    z = plax.device_put(jnp.ones(8), NamedSharding(mesh, P("i")))
    total = plax.jit(jnp.sum)
    inc = plax.jit(lambda z: z + 1, donate_argnums=0)
    first = total(z)
    for _ in range(50):
        z = inc(z)
    assert float(first) == 8.0 and float(total(z)) == 8 * 51.0


def _on_mesh(x):
    return plax.device_put(x, NamedSharding(plax.make_mesh((8,), ("i",)), P("i")))


@pytest.mark.parametrize("make, transform", [
    (_on_mesh, lambda f: plax.jit(f, donate_argnums=0)),
    (plax.pmap(lambda v: v), lambda f: plax.pmap(f, donate_argnums=0)),
])
def test_a_donated_input_used_again_is_a_clear_error(make, transform):
    inc = transform(lambda z: z + 1)  # (a new function: its second call is its first cached)
    z = make(jnp.ones((8, 2)))
    inc(z)
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        inc(z)
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        z * 2
