"""Under ``set_mesh`` (or ``use_mesh``) computations run over the mesh, as in JAX: eager
operations, array creation and jitted calls that no argument places give arrays replicated
over the mesh's devices; ``with mesh:`` and ``device_put`` without a target do not."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.sharding import AxisType, NamedSharding, PartitionSpec as P

pytestmark = pytest.mark.needs_devices(8)
HOST = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def auto_mesh():
    return plax.make_mesh((2, 2), ("row", "col"), axis_types=(AxisType.Auto,) * 2)


# (what it computes, what it must equal)
CASES = {
    "jnp.ones": (lambda x0: jnp.ones((2, 3)), np.ones((2, 3))),
    "jnp.arange": (lambda x0: jnp.arange(3), np.arange(3)),
    "jnp.asarray(numpy)": (lambda x0: jnp.asarray(HOST), HOST),
    "jnp.array(list)": (lambda x0: jnp.array([[1.0, 2.0]]), np.array([[1.0, 2.0]])),
    "x0 + 1 (x0 uncommitted)": (lambda x0: x0 + 1, HOST + 1),
    "jnp.zeros_like(x0)": (lambda x0: jnp.zeros_like(x0), np.zeros((2, 3))),
    "sum": (lambda x0: x0.sum(), HOST.sum()),
    "jit(f)(x0)": (lambda x0: plax.jit(lambda x: x * 2)(x0), HOST * 2),
    "jit with no arguments": (lambda x0: plax.jit(lambda: jnp.full((2,), 7.0))(), [7.0, 7.0]),
    "random.normal": (lambda x0: plax.random.normal(plax.random.key(0), (3,)),
                      np.asarray(plax.random.normal(plax.random.key(0), (3,)))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_computations_under_set_mesh_are_replicated_over_it(name):
    compute, want = CASES[name]
    mesh = auto_mesh()
    x0 = jnp.asarray(HOST)
    compute(x0)  # (first outside: what C++ dispatch records there must not be reused inside)
    with plax.set_mesh(mesh):
        out = compute(x0)
    assert out.sharding == NamedSharding(mesh, P()) and out.committed, out.sharding
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert compute(x0).sharding == plax.sharding.SingleDeviceSharding(plax.devices()[0])


def test_what_set_mesh_leaves_alone_and_what_it_refuses():
    mesh = auto_mesh()
    x0 = jnp.asarray(HOST)
    with plax.set_mesh(mesh):
        assert x0.sharding.device_set == {plax.devices()[0]} and not x0.committed
        assert plax.device_put(HOST).sharding == plax.sharding.SingleDeviceSharding(
            plax.devices()[0])  # (device_put with no target: the default device, as JAX)
        weak = jnp.asarray(2.0)
        assert weak.weak_type and (jnp.asarray(3) * 2.5).dtype == np.float32
        split = plax.device_put(HOST, NamedSharding(mesh, P("row")))
        assert (split * 2).sharding == NamedSharding(mesh, P("row"))
        off_mesh = plax.device_put(HOST, plax.devices()[5])
        with pytest.raises(ValueError, match="Received incompatible devices"):
            off_mesh + 1
        with pytest.raises(ValueError, match="Received incompatible devices"):
            plax.jit(lambda x: x * 2)(off_mesh)
    with pytest.warns(DeprecationWarning, match="with mesh"):
        with mesh:  # (names the mesh of PartitionSpecs only)
            assert (x0 + 1).sharding == plax.sharding.SingleDeviceSharding(plax.devices()[0])


def test_a_global_set_mesh_places_computations_until_unset():
    mesh = auto_mesh()
    x0 = jnp.asarray(HOST)
    plax.sharding.set_mesh(mesh)
    try:
        assert (x0 + 1).sharding == NamedSharding(mesh, P())
    finally:
        plax.sharding.set_mesh(None)
    assert (x0 + 1).sharding == plax.sharding.SingleDeviceSharding(plax.devices()[0])


def test_results_of_an_abstract_mesh_constraint_are_named_over_the_set_mesh():
    # (flax.nnx's with_partitioning inside a jit with no arguments: a constraint over the
    # abstract mesh; the result is named over set_mesh's concrete mesh, not a mesh of its own)
    mesh = auto_mesh()

    @plax.jit
    def make():
        spec = NamedSharding(plax.sharding.get_abstract_mesh(), P("row", "col"))
        return plax.lax.with_sharding_constraint(jnp.ones((8, 2)), spec)

    with plax.set_mesh(mesh):
        out = make()
    assert out.sharding == NamedSharding(mesh, P("row", "col"))
    np.testing.assert_array_equal(np.asarray(out), np.ones((8, 2)))
