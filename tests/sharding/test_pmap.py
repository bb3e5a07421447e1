"""pmap on 8 CPU devices, built on shard_map + jit: values against NumPy per-device models,
the errors with JAX's phrases, composition with the other transformations, caching."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import NamedSharding, PartitionSpec as P

X = np.arange(16.0, dtype=np.float32).reshape(8, 2)


def test_maps_over_the_devices_and_returns_sharded_arrays():
    out = plax.pmap(lambda a: a * 2)(X)
    np.testing.assert_allclose(np.asarray(out), 2 * X)
    assert len(out.addressable_shards) == 8 and out.addressable_shards[3].data.shape == (1, 2)
    assert out.addressable_shards[3].device == plax.devices()[3]
    np.testing.assert_allclose(np.asarray(out[3]), 2 * X[3])
    again = plax.pmap(lambda a: a + 1)(out)  # the layout is pmap's own: no copy needed
    assert again.sharding == out.sharding
    np.testing.assert_allclose(np.asarray(jnp.sum(again, 0)), (2 * X + 1).sum(0))


def test_collectives_over_the_axis_name():
    f = plax.pmap(lambda a: (lax.psum(a, "i"), lax.pmean(a, "i"), lax.pmax(a, "i"),
                             lax.axis_index("i"), lax.all_gather(a, "i"),
                             lax.ppermute(a, "i", [(j, (j + 1) % 8) for j in range(8)])),
                  axis_name="i")
    s, m, mx, idx, gathered, ring = f(X)
    np.testing.assert_allclose(np.asarray(s), np.broadcast_to(X.sum(0), (8, 2)))
    np.testing.assert_allclose(np.asarray(m), np.broadcast_to(X.mean(0), (8, 2)))
    np.testing.assert_allclose(np.asarray(mx), np.broadcast_to(X.max(0), (8, 2)))
    np.testing.assert_array_equal(np.asarray(idx), np.arange(8))
    np.testing.assert_allclose(np.asarray(gathered), np.broadcast_to(X, (8, 8, 2)))
    np.testing.assert_allclose(np.asarray(ring), np.roll(X, 1, axis=0))
    sc = plax.pmap(lambda a: lax.psum_scatter(a, "i", tiled=True), axis_name="i")(
        np.arange(64.0, dtype=np.float32).reshape(8, 8))
    np.testing.assert_allclose(np.asarray(sc).reshape(-1),
                               np.arange(64.0).reshape(8, 8).sum(0))


def test_in_axes_out_axes_and_static_arguments():
    np.testing.assert_allclose(np.asarray(plax.pmap(lambda a: a.sum(), in_axes=1)(X.T)),
                               X.sum(1))
    np.testing.assert_allclose(np.asarray(plax.pmap(lambda a: a, in_axes=-1)(X.T)), X)
    np.testing.assert_allclose(np.asarray(plax.pmap(lambda a: a, out_axes=1)(X)), X.T)
    both = plax.pmap(lambda a, b: a * b, in_axes=(0, None))(X, np.float32(3))
    np.testing.assert_allclose(np.asarray(both), 3 * X)
    tree = plax.pmap(lambda d: d["a"] + d["b"], in_axes=({"a": 0, "b": None},))(
        {"a": X, "b": np.ones(2, np.float32)})
    np.testing.assert_allclose(np.asarray(tree), X + 1)
    rep = plax.pmap(lambda a: lax.psum(a, "i"), axis_name="i", out_axes=None)(X)
    np.testing.assert_allclose(np.asarray(rep), X.sum(0))

    @functools.partial(plax.pmap, static_broadcasted_argnums=1)
    def scaled(a, power):
        return a ** power if power > 1 else a  # Python control flow on the static value

    np.testing.assert_allclose(np.asarray(scaled(X, 2)), X ** 2)
    np.testing.assert_allclose(np.asarray(scaled(X, 1)), X)
    small = plax.pmap(lambda a: a + 1, devices=plax.devices()[4:])(np.ones((4, 2), np.float32))
    assert {s.device for s in small.addressable_shards} == set(plax.devices()[4:])
    sized = plax.pmap(lambda a: a + 1, in_axes=None, axis_size=4)(np.ones(3, np.float32))
    np.testing.assert_allclose(np.asarray(sized), np.full((4, 3), 2.0))


def test_errors_with_jax_phrases():
    with pytest.raises(ValueError, match="requires 9 logical devices, but only 8 XLA devices"):
        plax.pmap(lambda a: a)(np.ones((9, 2)))
    with pytest.raises(ValueError, match="pmap got inconsistent sizes for array axes to be mapped"):
        plax.pmap(lambda a, b: a + b)(np.ones((8, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="pmap requires at least one argument with a mapped axis"):
        plax.pmap(lambda a: a, in_axes=None)(np.ones((8, 2)))
    with pytest.raises(ValueError, match="its rank should be at least 1, but is only 0"):
        plax.pmap(lambda a: a)(np.float32(1))
    with pytest.raises(ValueError, match="axis 5 is out of bounds for array of dimension 2"):
        plax.pmap(lambda a: a, out_axes=5)(X)
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        plax.pmap(lambda a, s: a, static_broadcasted_argnums=1)(X, [1])
    with pytest.raises(ValueError, match="pmap of pmap is not supported"):
        plax.pmap(plax.pmap(lambda a: a))(np.ones((2, 4, 3)))


def test_composition_with_grad_vmap_and_jit():
    def f(a):
        return jnp.sin(a) * lax.psum(a, "i")
    pf = plax.pmap(f, axis_name="i")

    def model(a):  # the same without pmap: every row sees the column sums
        return jnp.sin(a) * a.sum(0)
    np.testing.assert_allclose(np.asarray(pf(X / 10)), np.asarray(model(X / 10)), rtol=1e-5)
    g = plax.grad(lambda a: pf(a).sum())(X / 10)
    gm = plax.grad(lambda a: model(a).sum())(X / 10)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gm), rtol=1e-5)
    inner = plax.pmap(plax.grad(lambda a: jnp.sum(jnp.sin(a))))(X)
    np.testing.assert_allclose(np.asarray(inner), np.cos(X), rtol=1e-5)
    batch = np.stack([X, 2 * X])
    v = plax.vmap(pf)(batch / 10)
    np.testing.assert_allclose(np.asarray(v), np.stack([model(X / 10), model(2 * X / 10)]),
                               rtol=1e-5)
    named = plax.pmap(plax.vmap(lambda r: lax.psum(r, "j"), axis_name="j"))(
        X.reshape(8, 2, 1))
    np.testing.assert_allclose(np.asarray(named), np.broadcast_to(X.sum(1)[:, None, None],
                                                                  (8, 2, 1)))
    np.testing.assert_allclose(np.asarray(plax.jit(pf)(X / 10)), np.asarray(model(X / 10)),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(plax.pmap(plax.jit(lambda a: a * 3))(X)), 3 * X)


def test_second_call_does_not_retrace():
    traces = []

    def f(a):
        traces.append(a.shape)
        return a * 2
    pf = plax.pmap(f)
    pf(X)
    pf(X + 1)
    assert traces == [(2,)]
    pf(np.ones((8, 3), np.float32))
    assert traces == [(2,), (3,)]


def test_lower_and_data_parallel_step():
    rng = np.random.default_rng(0)
    xb = rng.normal(size=(8, 4, 3)).astype(np.float32)
    yb = rng.normal(size=(8, 4)).astype(np.float32)
    w = rng.normal(size=(3,)).astype(np.float32)

    def loss(w, x, y):
        return jnp.mean((x @ w - y) ** 2)

    def step(w, x, y):
        return w - 0.1 * lax.pmean(plax.grad(loss)(w, x, y), "batch")

    pstep = plax.pmap(step, axis_name="batch", in_axes=(None, 0, 0), out_axes=None)
    new = pstep(w, xb, yb)
    full = w - 0.1 * plax.grad(loss)(w, xb.reshape(32, 3), yb.reshape(32))
    np.testing.assert_allclose(np.asarray(new), np.asarray(full), rtol=1e-5, atol=1e-6)
    text = pstep.lower(w, xb, yb).as_text()
    assert "sdy.manual_computation" in text and "stablehlo.all_reduce" in text
    # Host arguments are lowered split over the devices, as a call places them: each device's
    # program takes its own slice, never the whole batch to slice itself.
    main = next(line for line in text.splitlines() if "func.func public @main" in line)
    assert main.count('[{"batch"}, {}, {}]') == 1 and main.count('[{"batch"}, {}]') == 1
    assert "dynamic-slice" not in pstep.lower(w, xb, yb).compile().as_text()


def test_device_arrays_are_split_before_the_call():
    whole = jnp.asarray(X)  # on one device
    out = plax.pmap(lambda a: a * 3)(whole)
    np.testing.assert_allclose(np.asarray(out), 3 * X)
    assert out.sharding.spec == P("_internal_pmap_axis_name")
    assert whole.devices() == {plax.devices()[0]} and not whole.is_deleted()


def test_donation():
    pf = plax.pmap(lambda a: a + 1, donate_argnums=0)
    a = plax.pmap(lambda v: v)(X)
    out = pf(a)
    np.testing.assert_allclose(np.asarray(out), X + 1)
    assert a.is_deleted()  # its buffers went to the result


def test_keyword_arguments_are_mapped_along_their_leading_axis():
    out = plax.pmap(lambda a, *, b: a * b)(X, b=X + 1)
    np.testing.assert_allclose(np.asarray(out), X * (X + 1))


def test_pmap_after_clear_backends_runs_on_the_new_devices():
    f = plax.pmap(lambda a: a + 1)
    f(X)
    plax.clear_backends()
    out = plax.pmap(lambda a: a + 1)(X)
    np.testing.assert_allclose(np.asarray(out), X + 1)
    assert out.addressable_shards[3].device == plax.devices()[3]
    assert out.sharding.mesh.devices.flat[0] == plax.devices()[0]
