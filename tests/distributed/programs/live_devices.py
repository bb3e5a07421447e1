"""multihost_utils.live_devices across two processes: a block run while both are alive (a
psum over all 8 devices inside it), then a block process 1 dies in (process 0 leaves it with
ProcessFailureError naming process 1's devices), then a block entered by the survivor alone.
Prints ``BLOCK1 <devices> <sum>``, ``NOLOCAL <error>``, ``FAILED <how many> <whether they are process 1's> <cause>``, ``BLOCK3 <device ids>``."""
import os
import time

import numpy as np

import plax
import plax.numpy as jnp
from plax.experimental import multihost_utils
from plax.experimental.shard_map import shard_map
from plax.sharding import Mesh, PartitionSpec as P

plax.distributed.initialize(heartbeat_timeout_seconds=3)
me = plax.process_index()

with multihost_utils.live_devices(plax.devices()) as devices:
    mesh = Mesh(np.array(devices), ("x",))
    total = plax.jit(shard_map(lambda v: plax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"),
                               out_specs=P()))
    x = multihost_utils.host_local_array_to_global_array(
        np.arange(4.0) + 4 * me, mesh, P("x"))
    out = total(x)
    print("BLOCK1", len(devices), float(out.addressable_shards[0].data[0]), flush=True)

try:  # only the other process's devices
    with multihost_utils.live_devices([d for d in plax.devices() if d.process_index != me]):
        pass
except ValueError as e:
    print("NOLOCAL", e, flush=True)

try:
    with multihost_utils.live_devices(plax.devices()) as devices:
        if me == 1:
            print("DYING", flush=True)
            os._exit(3)
        start = time.time()
        while time.time() - start < 30:  # runs until the peer's death is noticed
            total(x).block_until_ready()
            time.sleep(0.05)
except multihost_utils.ProcessFailureError as e:
    ids = sorted(d.id for d in e.failed_devices)
    process1 = sorted(d.id for d in plax.devices() if d.process_index == 1)
    print("FAILED", len(ids), ids == process1, type(e.__cause__).__name__, flush=True)

with multihost_utils.live_devices(plax.devices()) as devices:
    print("BLOCK3", [d.id for d in devices], flush=True)
os._exit(0)  # (process 1's death left the run unable to shut down cleanly)
