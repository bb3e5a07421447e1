"""plax.experimental.multihost_utils in one process: the values, types and layouts JAX gives."""
import numpy as np
import pytest

import plax
from plax.experimental import multihost_utils as mh
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P

N = len(plax.devices())  # 8 in the suite, 1 in its one-device run
X = np.arange(2.0 * N, dtype=np.float32).reshape(N, 2)


@pytest.fixture(scope="module")
def line():
    return Mesh(np.array(plax.devices()), ("i",))


def test_host_local_and_global_arrays(line):
    g = mh.host_local_array_to_global_array({"x": X, "y": X[:, 0]}, line, {"x": P("i"), "y": P()})
    assert g["x"].sharding == NamedSharding(line, P("i"))
    assert g["y"].sharding.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(g["x"]), X)
    back = mh.global_array_to_host_local_array(g["x"], line, P("i"))
    assert back.sharding == NamedSharding(line, P("i"))
    np.testing.assert_array_equal(np.asarray(back), X)


def test_process_allgather_broadcast_sync_and_assert_equal():
    stacked = mh.process_allgather(X)
    assert isinstance(stacked, np.ndarray) and stacked.shape == (1, N, 2)
    np.testing.assert_array_equal(stacked[0], X)
    tiled = mh.process_allgather({"a": X}, tiled=True)["a"]
    np.testing.assert_array_equal(tiled, X)
    b = mh.broadcast_one_to_all({"a": X, "b": 3})
    np.testing.assert_array_equal(b["a"], X)
    assert isinstance(b["b"], np.ndarray) and b["b"].shape == () and int(b["b"]) == 3
    assert mh.sync_global_devices("step") is None
    assert mh.assert_equal(X, "params differ") is None


def test_pmap_takes_host_data_through_the_helpers():
    out = plax.pmap(lambda a, s: a * s, in_axes=(0, None))(X, 2.0)
    np.testing.assert_allclose(np.asarray(out), 2 * X)
