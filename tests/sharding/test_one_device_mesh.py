"""Meshes of one device: what a machine with a single device (optax's test runs, a laptop)
sees of the sharding APIs. Every layout is the whole array on that device; values are checked
against NumPy and the reported shardings and types against what JAX 0.10.2 gives on one
device. The meshes use the first device only, so these run in both of the suite's runs."""
import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

HOST = np.arange(8.0, dtype=np.float32).reshape(4, 2)


def one_device_mesh(axis_type=AxisType.Auto):
    return Mesh(np.array(plax.devices()[:1]), ("x",), axis_types=(axis_type,))


def test_layouts_of_a_one_device_mesh():
    s = NamedSharding(one_device_mesh(), P("x"))
    whole = (slice(None), slice(None))
    assert s.devices_indices_map((4, 2)) == {plax.devices()[0]: whole}
    assert s.shard_shape((4, 2)) == (4, 2)
    assert s.is_fully_replicated and s.is_fully_addressable
    x = plax.device_put(HOST, s)
    assert [(sh.index, sh.replica_id, sh.data.shape) for sh in x.addressable_shards] == [
        (whole, 0, (4, 2))]
    assert (x + 1).sharding.spec == P("x") and x.T.sharding.spec == P("x")
    assert x.sum().sharding.spec == P()
    np.testing.assert_array_equal(np.asarray(x + 1), HOST + 1)
    made = plax.make_array_from_callback((4, 2), s, lambda index: HOST[index])
    assert made.sharding.spec == P("x")
    np.testing.assert_array_equal(np.asarray(made), HOST)


def test_shard_map_collectives_over_one_device():
    mesh = one_device_mesh()
    f = plax.shard_map(lambda b: (lax.psum(b, "x"), lax.axis_index("x")[None],
                                  lax.all_gather(b, "x")),
                       mesh=mesh, in_specs=P("x"), out_specs=(P("x"), P("x"), P("x")))
    total, index, gathered = f(plax.device_put(HOST, NamedSharding(mesh, P("x"))))
    np.testing.assert_array_equal(np.asarray(total), HOST)  # one block: the sum is itself
    np.testing.assert_array_equal(np.asarray(index), [0])
    np.testing.assert_array_equal(np.asarray(gathered), HOST[None])
    assert total.sharding.spec == P("x") and gathered.sharding.spec == P("x")
    jitted = plax.jit(f)(HOST)[0]
    assert jitted.sharding.spec == P()  # jit's results follow its first (host) argument
    np.testing.assert_array_equal(np.asarray(jitted), HOST)
    g = plax.grad(lambda a: f(a)[0].sum())(HOST)
    np.testing.assert_array_equal(np.asarray(g), np.ones_like(HOST))


def test_sharding_constraints_and_explicit_axes_on_one_device():
    mesh = one_device_mesh()
    w = plax.jit(lambda a: lax.with_sharding_constraint(
        a * 2, NamedSharding(mesh, P(None, "x"))))(HOST)
    assert w.sharding.spec == P()
    np.testing.assert_array_equal(np.asarray(w), HOST * 2)
    with plax.set_mesh(one_device_mesh(AxisType.Explicit)):
        e = plax.device_put(HOST, P("x"))
        assert str(plax.typeof(e)) == "float32[4@x,2]"
        y = e * 2 + 1
        assert str(plax.typeof(y)) == "float32[4@x,2]" and y.sharding.spec == P("x", None)
        z = jnp.sum(e, axis=0)
        assert str(plax.typeof(z)) == "float32[2]" and z.sharding.spec == P(None)
        np.testing.assert_array_equal(np.asarray(z), HOST.sum(0))
        r = plax.sharding.reshard(e, P(None, "x"))
        assert str(plax.typeof(r)) == "float32[4,2@x]" and r.sharding.spec == P(None, "x")
        m = jnp.matmul(e, np.ones((2, 3), np.float32))
        assert str(plax.typeof(m)) == "float32[4@x,3]"
        np.testing.assert_array_equal(np.asarray(m), HOST @ np.ones((2, 3), np.float32))


def test_a_shard_map_over_one_device_is_inlined_and_runs_its_callbacks():
    mesh = one_device_mesh()
    seen = []

    def body(b):
        plax.debug.callback(lambda v: seen.append(np.asarray(v).copy()), b)
        return lax.psum(b, "x") * 2

    f = plax.jit(plax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    text = f.lower(HOST).as_text()
    assert "sdy.manual_computation" not in text and "stablehlo.all_reduce" in text
    np.testing.assert_array_equal(np.asarray(f(HOST)), HOST * 2)
    plax.effects_barrier()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], HOST)
