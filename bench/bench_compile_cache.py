"""The persistent compilation cache (issue 18), plax next to JAX when one is found.

Each figure comes from fresh child processes running the same MLP training step (layers
256-512-512-10, batch 128; jit of a gradient step): one with the cache off, then two with
the cache on sharing an empty directory (the first compiles and writes, the second loads).
Both libraries are set up the same way (``jax_compilation_cache_dir``, a minimum compile
time of 0 so every program is written, ``jax_enable_compilation_cache`` for the off run).

- "first step": in the child, from after the import to the first result (trace, lower,
  compile or load, run);
- "4 more steps, new programs": four more first calls of steps whose learning rate differs
  (new programs, so each is compiled, or loaded in the second cache run), best of four;
- "process to first result": the import and the first step (interpreter start-up not
  counted).

    JAX_PYTHON=/tmp/jaxvenv/bin/python .venv/bin/python bench/bench_compile_cache.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
import subprocess, sys, tempfile
CHILD = """
import json, sys, time
import numpy as np
t0 = time.perf_counter()
import %(name)s as lib
import %(name)s.numpy as jnp
lib.config.update("jax_enable_compilation_cache", sys.argv[1] == "on")
lib.config.update("jax_compilation_cache_dir", sys.argv[2])
lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
t_import = time.perf_counter()
rng = np.random.default_rng(0)
sizes = [256, 512, 512, 10]
params = [(rng.standard_normal((m, n), dtype=np.float32) / np.sqrt(m), np.zeros(n, np.float32))
          for m, n in zip(sizes[:-1], sizes[1:])]
x = rng.standard_normal((128, 256), dtype=np.float32)
y = rng.standard_normal((128, 10), dtype=np.float32)

def loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)

def make_step(lr):
    def step(params, x, y):
        g = lib.grad(loss)(params, x, y)
        return lib.tree_util.tree_map(lambda p, d: p - lr * d, params, g)
    return lib.jit(step)

lib.block_until_ready(make_step(0.01)(params, x, y))
first = time.perf_counter() - t_import
more = []
for i in range(4):
    t = time.perf_counter()
    lib.block_until_ready(make_step(0.02 + 0.01 * i)(params, x, y))
    more.append(time.perf_counter() - t)
print(json.dumps({"first": first, "more": min(more), "import": t_import - t0}))
"""

def child(mode, directory):
    """(first step, best further step, import + first step) in seconds, from a new process."""
    proc = subprocess.run([sys.executable, "-c", CHILD % {"name": lib.__name__}, mode, directory],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    return got["first"], got["more"], got["import"] + got["first"]

with tempfile.TemporaryDirectory() as d:
    off = child("off", d)
    miss = child("on", d)
    hit = child("on", d)
res = {
  "first step, cache off (ms)": off[0] * 1e3,
  "first step, cache on: compile + write (ms)": miss[0] * 1e3,
  "first step, new process, from the cache (ms)": hit[0] * 1e3,
  "4 more steps, new programs, cache off (ms)": off[1] * 1e3,
  "4 more steps, new programs, compile + write (ms)": miss[1] * 1e3,
  "4 more steps, new programs, from the cache (ms)": hit[1] * 1e3,
  "process to first result, cache off (ms)": off[2] * 1e3,
  "process to first result, from the cache (ms)": hit[2] * 1e3,
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE, "Every figure waits for its result; child processes, see the module docstring.",
         "'process to first result' is import + first step, timed inside the child "
         "(interpreter start-up excluded).")
