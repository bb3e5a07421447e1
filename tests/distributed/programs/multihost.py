"""plax.experimental.multihost_utils across two processes (run by test_global_arrays.py
through the launcher): ``CHECK <name> PASS|FAIL`` lines, ``DONE`` at the end. argv[1]: a
directory both processes can write to (for the barrier check)."""
import os
import sys
import time

import numpy as np

import jax
from jax.experimental import multihost_utils as mhu
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.distributed.initialize()
pid = jax.process_index()
shared_dir = sys.argv[1]


def check(name, ok, detail=""):
    print(f"CHECK {name} {'PASS' if ok else 'FAIL'} {detail}".rstrip(), flush=True)


def raises(name, kind, phrase, fn):
    try:
        fn()
    except kind as e:
        check(name, phrase in str(e), str(e)[:300])
    except Exception as e:
        check(name, False, f"{type(e).__name__}: {e}")
    else:
        check(name, False, "no error")


devs = jax.devices()
mesh = Mesh(np.array(devs), ("x",))
grid = Mesh(np.array(devs).reshape(2, 4), ("p", "l"))
G = np.arange(16, dtype=np.float32)
a = jax.make_array_from_callback((16,), NamedSharding(mesh, P("x")), lambda idx: G[idx])

# --- process_allgather ---
got = mhu.process_allgather(np.arange(3, dtype=np.int32) + pid)
check("allgather_stacked", np.array_equal(got, [[0, 1, 2], [1, 2, 3]]) and got.dtype == np.int32)
got = mhu.process_allgather(np.arange(3) + pid, tiled=True)
check("allgather_tiled", np.array_equal(got, [0, 1, 2, 1, 2, 3]))
got = mhu.process_allgather({"s": np.float32(pid), "m": np.ones((2, 2)) * pid})
check("allgather_tree", np.array_equal(got["s"], [0.0, 1.0])
      and np.array_equal(got["m"], np.stack([np.zeros((2, 2)), np.ones((2, 2))])))
check("allgather_scalar_tiled", np.array_equal(mhu.process_allgather(np.float32(pid), tiled=True),
                                               [0.0, 1.0]))
check("allgather_global_tiled", np.array_equal(mhu.process_allgather(a, tiled=True), G))
raises("allgather_global_untiled", ValueError, "only supports tiled=True",
       lambda: mhu.process_allgather(a))
local_arr = jax.device_put(np.arange(4.0) * (pid + 1), jax.local_devices()[1])
check("allgather_local_array", np.array_equal(mhu.process_allgather(local_arr),
                                              [np.arange(4.0), 2 * np.arange(4.0)]))

# --- broadcast_one_to_all ---
got = mhu.broadcast_one_to_all({"a": np.arange(3, dtype=np.int32) + pid, "b": np.float32(pid)})
check("broadcast_default", np.array_equal(got["a"], [0, 1, 2]) and got["a"].dtype == np.int32
      and got["b"] == 0 and got["b"].dtype == np.float32)
got = mhu.broadcast_one_to_all(np.arange(3) + pid, is_source=pid == 1)
check("broadcast_source_1", np.array_equal(got, [1, 2, 3]))

# --- sync_global_devices: a real barrier; a name may be used again ---
marker = os.path.join(shared_dir, "process1-arrived")
if pid == 1:
    time.sleep(0.5)  # (arrives late: process 0 must still wait for it)
    open(marker, "w").close()
mhu.sync_global_devices("step")
check("sync_waits_for_all", os.path.exists(marker))
mhu.sync_global_devices("step")
mhu.sync_global_devices("other")
check("sync_name_reused", True)
raises("sync_name_mismatch", AssertionError, "sync_global_devices name mismatch",
       lambda: mhu.sync_global_devices(f"name-{pid}"))
mhu.sync_global_devices("after-mismatch")
check("sync_after_mismatch", True)

# --- host-local <-> global arrays ---
host = np.arange(8.0).reshape(4, 2) + 100 * pid
ga = mhu.host_local_array_to_global_array(host, grid, P(("p", "l")))
whole = np.concatenate([np.arange(8.0).reshape(4, 2), np.arange(8.0).reshape(4, 2) + 100])
check("local_to_global", ga.shape == (8, 2) and not ga.is_fully_addressable
      and ga.sharding == NamedSharding(grid, P(("p", "l")))
      and np.array_equal(mhu.process_allgather(ga, tiled=True), whole))
back = mhu.global_array_to_host_local_array(ga, grid, P(("p", "l")))
check("global_to_local", back.shape == (4, 2) and back.is_fully_addressable
      and back.sharding == NamedSharding(grid.local_mesh, P(("p", "l")))
      and np.array_equal(np.asarray(back), host))
again = mhu.host_local_array_to_global_array(back, grid, P(("p", "l")))  # (no copy)
check("local_array_to_global", np.array_equal(mhu.process_allgather(again, tiled=True), whole))
rep = mhu.host_local_array_to_global_array(host, grid, P())
check("local_to_global_replicated", rep.shape == (4, 2))
rep_back = mhu.global_array_to_host_local_array(rep, grid, P())
check("global_to_local_replicated", rep_back.shape == (4, 2)
      and np.array_equal(np.asarray(rep_back), host))
tree = mhu.global_array_to_host_local_array({"g": a}, mesh, P("x"))
check("global_to_local_tree", np.array_equal(np.asarray(tree["g"]), G[8 * pid:8 * pid + 8]))
doubled = jax.jit(lambda x: x * 2)(ga)
check("global_through_jit", np.array_equal(
    np.asarray(mhu.global_array_to_host_local_array(doubled, grid, P(("p", "l")))), host * 2))

# --- assert_equal ---
mhu.assert_equal({"x": np.arange(3), "y": np.float32(2)}, "should agree")
check("assert_equal_same", True)
raises("assert_equal_differ", AssertionError, "differs here. Expected:",
       lambda: mhu.assert_equal(np.arange(3) + pid, "differs here"))
print("DONE", flush=True)
