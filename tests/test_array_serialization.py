"""plax.experimental.array_serialization: arrays written and read per shard with tensorstore,
in JAX's on-disk layout (tests/data/jax_0.10.2_checkpoint was written by real JAX 0.10.2)."""
import os
import shutil

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental.array_serialization import serialization as ser
from plax.experimental.array_serialization import tensorstore_impl as ts_impl
from plax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

JAX_CHECKPOINT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                              "jax_0.10.2_checkpoint")


def _mesh():
    return plax.make_mesh((2, 4), ("a", "b"))


def _arrays():
    mesh = _mesh()
    return [plax.device_put(jnp.arange(32.0).reshape(4, 8) / 4, NamedSharding(mesh, P("a", "b"))),
            jnp.arange(6, dtype=jnp.int32) * 3,
            plax.device_put(jnp.linspace(-1, 1, 8, dtype=ml_dtypes.bfloat16),
                            NamedSharding(mesh, P("b")))]


def test_a_checkpoint_real_jax_wrote_is_read_onto_any_sharding():
    mesh = _mesh()
    specs = [ser.get_tensorstore_spec(os.path.join(JAX_CHECKPOINT, n)) for n in "wih"]
    targets = [NamedSharding(mesh, P("b")), NamedSharding(mesh, P()),
               SingleDeviceSharding(plax.devices()[3])]
    w, i, h = ser.run_deserialization(targets, specs)
    want = _arrays()
    assert w.sharding == targets[0] and np.array_equal(np.asarray(w), np.asarray(want[0]))
    assert i.dtype == np.int32 and i.tolist() == [0, 3, 6, 9, 12, 15]
    assert h.dtype == ml_dtypes.bfloat16 and np.array_equal(np.asarray(h), np.asarray(want[2]))
    assert h.sharding == targets[2]


def test_plax_writes_the_files_jax_writes(tmp_path):
    specs = [ser.get_tensorstore_spec(str(tmp_path / n)) for n in "wih"]
    ser.run_serialization(_arrays(), specs)

    def files(root):
        return sorted(os.path.relpath(os.path.join(r, f), root)
                      for r, _, fs in os.walk(root) for f in fs)
    assert files(tmp_path) == files(JAX_CHECKPOINT)
    for name in files(JAX_CHECKPOINT):
        with open(tmp_path / name, "rb") as mine, open(os.path.join(JAX_CHECKPOINT, name),
                                                       "rb") as jaxs:
            assert mine.read() == jaxs.read(), name


@pytest.mark.parametrize("ocdbt", [True, False])
def test_sharded_round_trip_onto_the_same_and_other_shardings(tmp_path, ocdbt):
    mesh = _mesh()
    x = plax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8),
                        NamedSharding(mesh, P("a", "b")))
    scalar = jnp.float32(2.5)
    specs = [ts_impl.get_tensorstore_spec(str(tmp_path / n), ocdbt=ocdbt) for n in ("x", "s")]
    ts_impl._run_serialization([x, scalar], specs)
    same, s = ts_impl._run_deserialization(
        [x.sharding, SingleDeviceSharding(plax.devices()[0])], specs)
    assert same.sharding == x.sharding and np.array_equal(np.asarray(same), np.asarray(x))
    assert s.shape == () and float(s) == 2.5
    (other,) = ts_impl._run_deserialization([NamedSharding(mesh, P(None, ("a", "b")))],
                                            specs[:1])
    assert np.array_equal(np.asarray(other), np.asarray(x))


def test_reading_a_larger_shape_fills_zeros_and_a_dtype_casts(tmp_path):
    spec = ts_impl.get_tensorstore_spec(str(tmp_path / "x"))
    ts_impl._run_serialization([jnp.arange(6.0).reshape(2, 3)], [spec])
    mesh = _mesh()
    (out,) = ts_impl._run_deserialization([NamedSharding(mesh, P("a"))], [spec],
                                          global_shapes=[(4, 4)], dtypes=[np.int32])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [[0, 1, 2, 0], [3, 4, 5, 0], [0] * 4, [0] * 4])


def test_the_async_manager_commits_in_the_background_then_calls_back(tmp_path):
    manager = ser.GlobalAsyncCheckpointManager()
    arrays = _arrays()
    committed = []
    paths = [str(tmp_path / n) for n in "wih"]
    manager.serialize_with_paths(arrays, paths, on_commit_callback=lambda: committed.append(1))
    manager.wait_until_finished()
    assert committed == [1]
    back = manager.deserialize_with_paths([a.sharding for a in arrays], paths)
    for a, b in zip(arrays, back):
        assert np.array_equal(np.asarray(a), np.asarray(b)) and a.sharding == b.sharding


def test_a_failed_commit_is_raised_by_wait_until_finished(tmp_path):
    manager = ser.GlobalAsyncCheckpointManager()

    def fail():
        raise OSError("disk full")
    manager.serialize_with_paths([jnp.ones(3)], [str(tmp_path / "a")], on_commit_callback=fail)
    with pytest.raises(RuntimeError, match="Checkpoint commit failed: disk full"):
        manager.wait_until_finished()


def test_specs_paths_and_checks():
    spec = ts_impl.get_tensorstore_spec("/ckpt/step_1/params")
    assert spec == {"driver": "zarr3", "kvstore": {
        "driver": "ocdbt", "base": {"driver": "file", "path": "/ckpt/step_1"},
        "path": "params"}}
    assert ser.get_tensorstore_spec("/ckpt/w/") == {
        "driver": "zarr", "kvstore": {"driver": "file", "path": "/ckpt/w"}}
    assert ts_impl.get_tensorstore_spec("gs://bucket/dir/w", ocdbt=False, process_idx=1)[
        "kvstore"] == {"driver": "gcs", "bucket": "bucket", "path": "dir/process_1/w"}
    with pytest.raises(ValueError, match="should be absolute"):
        ts_impl.get_tensorstore_spec("relative/w")
    x = plax.device_put(jnp.ones((8, 12)), NamedSharding(_mesh(), P("a", "b")))
    meta = ts_impl.get_tensorstore_spec("/c/x", arr=x)["metadata"]
    assert meta["shape"] == (8, 12) and meta["data_type"] == "float32"
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [4, 3]  # the local shard
    ts_impl.verify_tensorstore_spec(ts_impl.get_tensorstore_spec("/c/x", arr=x), x, "/c",
                                    ocdbt=True)
    with pytest.raises(ValueError, match="does not match the spec path"):
        ts_impl.verify_tensorstore_spec(ts_impl.get_tensorstore_spec("/c/x", arr=x), x, "/d",
                                        ocdbt=True)
    with pytest.raises(ValueError, match="doesn't match"):
        ts_impl.verify_tensorstore_spec(ts_impl.get_tensorstore_spec("/c/x", arr=x),
                                        jnp.ones(3), "/c", ocdbt=True)
    assert ts_impl.merge_nested_ts_specs({"driver": "zarr", "kvstore": {"path": "a"}},
                                         {"kvstore": {"driver": "file"}}) == {
        "driver": "zarr", "kvstore": {"path": "a", "driver": "file"}}
    assert ser.is_remote_storage("gs://b/x") and not ser.is_remote_storage("/tmp/x")
    assert ser.is_remote_storage({"kvstore": {"driver": "ocdbt", "base": {"driver": "s3"}}})
    assert ts_impl.is_tensorstore_spec_leaf(None) and not ts_impl.is_tensorstore_spec_leaf([])


def test_chunks_stay_under_the_file_size_target():
    assert ts_impl._chunk_shape((1024, 1024), 4, 1 << 20) == [256, 1024]
    assert ts_impl._chunk_shape((0, 5), 4) == [1, 5] and ts_impl._chunk_shape((), 4) == []
    assert ts_impl._chunk_shape((7, 11), 4, 8) == [1, 1]
