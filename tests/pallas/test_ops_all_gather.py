"""plax.experimental.pallas.ops.tpu.all_gather (JAX's names): the ring all-gather kernel with
remote DMAs, in interpret mode over the 8 virtual CPU devices, against lax.all_gather."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental.pallas.ops.tpu import all_gather as ag

pytestmark = pytest.mark.needs_devices(8)

P = plax.sharding.PartitionSpec


def _mesh(shape, names=("x",)):
    n = int(np.prod(shape))
    return plax.make_mesh(shape, names, axis_types=(plax.sharding.AxisType.Auto,) * len(names),
                          devices=plax.devices()[:n])


@pytest.mark.parametrize("devices,shape,dtype", [
    (8, (16, 128), np.float32),  # two rows a shard: one row each way
    (4, (12, 3), np.int32),  # three rows: the right half is the larger
    (8, (8, 5), jnp.bfloat16),  # one row a shard: only rightwards copies
    (2, (4, 2, 3), np.float32),
])
def test_all_gather_matches_lax_all_gather(devices, shape, dtype):
    mesh = _mesh((devices,))
    x = jnp.asarray(np.arange(np.prod(shape)).reshape(shape) % 251, dtype)
    got = ag.all_gather(x, mesh=mesh, axis_name="x")
    want = plax.shard_map(lambda s: lax.all_gather(s, "x", tiled=True), mesh=mesh,
                          in_specs=P("x"), out_specs=P(None), check_vma=False)(x)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_one_device_axis_returns_the_input_and_axis_names_are_checked():
    x = jnp.arange(8.0).reshape(4, 2)
    np.testing.assert_array_equal(np.asarray(ag.all_gather(x, mesh=_mesh((1,)),
                                                           axis_name=("x",))), np.asarray(x))
    with pytest.raises(NotImplementedError, match="Only one axis supported"):
        ag.all_gather(x, mesh=_mesh((2, 2), ("x", "y")), axis_name=("x", "y"))


def test_get_neighbor_wraps_round_the_ring():
    mesh = _mesh((4,))

    def neighbours(s):
        me = lax.axis_index("x")
        (left,) = ag.get_neighbor(me, mesh, "x", direction="left")
        (right,) = ag.get_neighbor(me, mesh, "x", direction="right")
        return jnp.stack([left, right])[None]
    got = plax.shard_map(neighbours, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                         check_vma=False)(jnp.zeros((4,)))
    np.testing.assert_array_equal(np.asarray(got), [[3, 1], [0, 2], [1, 3], [2, 0]])
    with pytest.raises(ValueError, match="direction must be"):
        ag.get_neighbor(0, mesh, "x", direction="up")
