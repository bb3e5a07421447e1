"""A distributed run in which one process dies (argv[1] = which one) after a first collective
program; the survivor keeps running the program and must get PeerFailureError naming the dead
process. Prints ``FIRST <value>`` after the first run, ``DYING`` before dying, and
``RAISED <seconds since the death> <message>`` in the survivor."""
import os
import sys
import time

import numpy as np

import plax
import plax.numpy as jnp
from plax.experimental import multihost_utils
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P

victim = int(sys.argv[1])
plax.distributed.initialize()
me = plax.process_index()
mesh = Mesh(np.array(plax.devices()), ("x",))
make = plax.jit(lambda: jnp.arange(16.0), out_shardings=NamedSharding(mesh, P("x")))
total = plax.jit(lambda x: jnp.sum(2 * x), out_shardings=NamedSharding(mesh, P()))
x = make()
print("FIRST", float(total(x).addressable_shards[0].data), flush=True)
multihost_utils.sync_global_devices("before the death")
died_at = time.time() + 0.5
if me == victim:
    time.sleep(0.5)
    print("DYING", flush=True)
    os._exit(3)
try:
    while True:
        total(x).block_until_ready()
        time.sleep(0.05)
except plax.distributed.PeerFailureError as e:
    print(f"RAISED {time.time() - died_at:.1f} {e}", flush=True)
    sys.exit(5)
