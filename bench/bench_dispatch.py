"""The small things, plax next to JAX: jit dispatch, eager ops, import time and the run
time of a compiled vmap-of-jacrev.

Every row is a best time in microseconds (import: milliseconds), best of alternating
rounds; the machines are noisy, so quote ratios from one run only.

    JAX_PYTHON=/tmp/jaxvenv/bin/python .venv/bin/python bench/bench_dispatch.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, use_cpu_devices  # noqa: E402

use_cpu_devices(8)

MEASURE = r'''
import subprocess, sys
from functools import partial

x = lib.device_put(np.ones((4,), np.float32))
params = {f"w{i}": lib.device_put(np.full((4,), i, np.float32)) for i in range(10)}

one = lib.jit(lambda a: a + 1.0)
many = lib.jit(lambda p: p["w0"] + p["w9"])
static = lib.jit(lambda a, n: a * n, static_argnums=1)

mesh = lib.sharding.Mesh(np.array(lib.devices()), ("d",))
spread = lib.device_put(np.ones((8, 4), np.float32),
                        lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("d")))
sharded = lib.jit(lambda a: a * 2.0)

def affine(a):
    return a * 2.0 + 1.0

hundred = lib.device_put(np.ones((100,), np.float32))
reused = lib.jit(affine)

y = lib.device_put(np.ones((16, 16), np.float32))
v = lib.device_put(np.ones((64,), np.float32))

def layer(w, h):
    return jnp.tanh(w @ h)

w = lib.device_put(np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32) / 6)
hs = lib.device_put(np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32))
batched_jac = lib.jit(lib.vmap(lib.jacrev(layer, argnums=1), in_axes=(None, 0)))

def import_ms():
    # As installed: from bytecode (where PYTHONDONTWRITEBYTECODE is set, as on CI machines,
    # plax's would otherwise be compiled from source on every import while JAX's is not).
    import compileall, os
    compileall.compile_dir(os.path.dirname(lib.__file__), quiet=1)
    name = lib.__name__
    code = (f"import time; t=time.perf_counter(); import {name}, {name}.numpy; "
            "print((time.perf_counter()-t)*1e3)")
    return min(float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True).stdout) for _ in range(3))

res = {
  "jit dispatch, 1 array arg (us)": best_of(lambda: one(x), 2000),
  "jit dispatch, dict of 10 arrays (us)": best_of(lambda: many(params), 2000),
  "jit dispatch, static arg (us)": best_of(lambda: static(x, 3), 2000),
  "jit dispatch, sharded on 8 devices (us)": best_of(lambda: sharded(spread), 1000),
  "jit(f)(x) wrapper reused, 100 elements (us)": best_of(lambda: reused(hundred), 2000),
  # The cache belongs to f: a wrapper built afresh on each call finds f's executable.
  "jit(f)(x) wrapper built afresh, f cached (us)":
      best_of(lambda: lib.jit(affine)(hundred), 2000),
  "eager y * 2.0 + y (us)": best_of(lambda: y * 2.0 + y, 1000),
  "eager sin(y) (us)": best_of(lambda: jnp.sin(y), 1000),
  "eager sum(y) (us)": best_of(lambda: jnp.sum(y), 1000),
  "eager v[0] (us)": best_of(lambda: v[0], 1000),
  "eager v.at[0].set(1) (us)": best_of(lambda: v.at[0].set(1.0), 1000),
  "jit(vmap(jacrev)) 32x32 tanh, batch 64 (us)":
      best_of(lambda: batched_jac(w, hs).block_until_ready(), 300),
  "import lib, lib.numpy (ms)": import_ms(),
}
print(json.dumps(res))
'''

if __name__ == "__main__":
    main(MEASURE,
         "Targets: every ratio at most 1.0; import at most 0.5.",
         "Dispatch rows time the call only (results are not waited on), as a training step does.")
