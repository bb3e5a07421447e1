"""plax.experimental.transfer: arrays pulled from a peer's transfer server (two servers in
one process, on the loopback interface)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import transfer
from plax.runtime.xla import JaxRuntimeError
from plax.sharding import NamedSharding, PartitionSpec as P


def _server():
    client = plax.devices()[0].client
    return transfer.start_transfer_server(client, "127.0.0.1:0", ["127.0.0.1:0"])


@pytest.mark.needs_devices(8)
def test_a_pytree_of_sharded_arrays_is_pulled_from_a_peer():
    serving, pulling = _server(), _server()
    assert isinstance(serving, transfer.TransferServer)
    mesh = plax.make_mesh((8,), ("a",))
    x = plax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("a")))
    y = plax.device_put(jnp.arange(6, dtype=jnp.int32).reshape(2, 3), plax.devices()[2])
    offered = {"x": x, "y": [y]}
    serving.await_pull(11, offered)
    connection = pulling.connect(serving.address())
    assert isinstance(connection, transfer.TransferConnection)
    wanted = plax.tree.map(lambda a: plax.ShapeDtypeStruct.like(a), offered)
    got = connection.pull(11, wanted)
    assert got["x"].sharding == x.sharding
    np.testing.assert_array_equal(got["x"], np.arange(16.0))
    np.testing.assert_array_equal(got["y"][0], np.arange(6).reshape(2, 3))
    assert got["y"][0].devices() == {plax.devices()[2]}
    assert connection.pull(12, {}) == {}


def test_an_error_array_fails_the_programs_that_read_it():
    sharding = plax.sharding.SingleDeviceSharding(plax.devices()[0])
    broken = transfer.make_error_array(
        plax.ShapeDtypeStruct((2,), jnp.float32, sharding=sharding), "the peer went away")
    assert broken.shape == (2,) and broken.dtype == jnp.float32
    with pytest.raises(JaxRuntimeError, match="the peer went away"):
        np.asarray(broken + 1)
