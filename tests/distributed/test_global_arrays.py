"""Arrays spanning processes: two processes x 4 CPU devices, run through the launcher
(127.0.0.1 only, bounded by its --timeout). The programs under programs/ compare values
with NumPy themselves and print one ``CHECK <name> PASS|FAIL`` line per check; these tests
run each program once and read its lines."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import plax
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P

PROGRAMS = Path(__file__).parent / "programs"
sys.path.insert(0, str(PROGRAMS))
import dp_step  # noqa: E402  (the training step both runs share)

LINE = re.compile(r"^\[(\d)\] (CHECK (\S+) (PASS|FAIL).*|PARAMS (\w+)|DONE)$")


def launch(program: str, *args) -> dict:
    """Run ``program`` in 2 processes x 4 devices; per process: its checks (name -> line),
    PARAMS and whether it reached DONE, with the launcher's exit status and output."""
    run = subprocess.run(
        [sys.executable, "-m", "plax.distributed.launch", "-n", "2", "--devices-per-process", "4",
         "--timeout", "120", str(PROGRAMS / program), *args],
        capture_output=True, text=True, timeout=180)
    per = {0: {"checks": {}, "params": None, "done": False},
           1: {"checks": {}, "params": None, "done": False}}
    for line in run.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        got = per[int(m.group(1))]
        if m.group(3):
            got["checks"][m.group(3)] = m.group(2)
        elif m.group(5):
            got["params"] = m.group(5)
        else:
            got["done"] = True
    return {"status": run.returncode, "output": run.stdout + run.stderr, "per": per}


def assert_all_passed(run: dict, expected: set) -> None:
    assert run["status"] == 0, run["output"][-4000:]
    for pid in (0, 1):
        got = run["per"][pid]
        assert got["done"], f"process {pid} did not finish:\n{run['output'][-4000:]}"
        failed = [line for line in got["checks"].values() if " FAIL" in line]
        assert not failed, f"process {pid}: {failed}"
        assert set(got["checks"]) == expected, set(got["checks"]) ^ expected


@pytest.fixture(scope="module")
def arrays_run():
    return launch("global_arrays.jaxpy")


ARRAY_CHECKS = {
    "devices", "callback_only_local", "not_fully_addressable", "addressable_devices",
    "addressable_shards", "global_shards", "addressable_data", "read_asarray",
    "read___array__", "read_tolist", "read_item", "read_device_get", "float_not_scalar",
    "repr", "replicated_readable", "device_put_split", "device_put_partial",
    "device_put_replicated", "device_put_global_reshard", "eager_ops", "copy", "remote_device",
    "remote_device_read", "local_data_infer_rows",
    "local_data_infer_split", "local_data_infer_whole_dim", "local_data_explicit_global",
    "local_data_mixed_dims", "local_data_pytree", "local_data_bad_dim", "single_device_arrays",
    "single_device_arrays_count", "jit_global_arg", "jit_in_out_shardings",
    "jit_global_result", "jit_numpy_split", "jit_numpy_replicated", "shard_map_psum",
    "shard_map_axis_index", "ordered_callback_in_shard_map", "pmap_psum", "pmap_result_local", "pmap_axis_index", "pmap_given_devices",
    "pmap_chained"}

MULTIHOST_CHECKS = {
    "allgather_stacked", "allgather_tiled", "allgather_tree", "allgather_scalar_tiled",
    "allgather_global_tiled", "allgather_global_untiled", "allgather_local_array",
    "broadcast_default", "broadcast_source_1", "sync_waits_for_all", "sync_name_reused",
    "sync_name_mismatch", "sync_after_mismatch", "local_to_global", "global_to_local",
    "local_array_to_global", "local_to_global_replicated", "global_to_local_replicated",
    "global_to_local_tree", "global_through_jit", "assert_equal_same", "assert_equal_differ"}


def test_global_arrays_jit_shard_map_and_pmap_across_two_processes(arrays_run):
    assert_all_passed(arrays_run, ARRAY_CHECKS)


@pytest.mark.needs_devices(8)
def test_data_parallel_step_matches_one_process_bit_for_bit(arrays_run):
    p0, p1 = (arrays_run["per"][pid]["params"] for pid in (0, 1))
    assert p0 is not None and p0 == p1, arrays_run["output"][-4000:]
    mesh = Mesh(np.array(plax.devices()[:8]), ("x",))
    x, y = dp_step.data()
    batch = NamedSharding(mesh, P("x"))
    w = dp_step.train(plax, plax.device_put(x, batch), plax.device_put(y, batch),
                      NamedSharding(mesh, P()))
    assert np.asarray(w).tobytes().hex() == p0
    # and the step does learn: the parameters move towards the true ones
    true = np.array([1.0, -2.0, 1.0, 3.0], np.float32)
    assert np.linalg.norm(np.asarray(w) - true) < np.linalg.norm(true)


def test_multihost_utils_across_two_processes(tmp_path):
    assert_all_passed(launch("multihost.jaxpy", str(tmp_path)), MULTIHOST_CHECKS)


@pytest.mark.needs_devices(8)
def test_process_local_data_in_one_process_takes_trees_and_specs():
    mesh = Mesh(np.array(plax.devices()[:8]), ("x",))
    got = plax.make_array_from_process_local_data(
        {"a": NamedSharding(mesh, P("x")), "b": NamedSharding(mesh, P())},
        {"a": np.arange(8.0), "b": np.ones(3)})
    assert got["a"].sharding == NamedSharding(mesh, P("x"))
    np.testing.assert_array_equal(np.asarray(got["a"]), np.arange(8.0))
    np.testing.assert_array_equal(np.asarray(got["b"]), np.ones(3))
    with plax.set_mesh(mesh):
        spec = plax.make_array_from_process_local_data(P("x"), np.arange(8.0))
    assert spec.sharding.spec == P("x") and spec.is_fully_addressable
    np.testing.assert_array_equal(np.asarray(spec), np.arange(8.0))
    with pytest.raises(ValueError, match="global_shape should be None or equal to"):
        plax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.arange(8.0),
                                                (16,))
    with pytest.raises(ValueError, match="no mesh is set"):
        plax.make_array_from_process_local_data(P("x"), np.arange(8.0))


def test_local_mesh_of_a_one_process_mesh_is_itself():
    mesh = Mesh(np.array(plax.devices()), ("x",))
    assert mesh.local_mesh is mesh and not mesh.is_multi_process
