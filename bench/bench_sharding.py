"""Sharded computation on 8 CPU devices, plax next to JAX when one is found.

Measures (issue 13):
- a data-parallel MLP training step (batch sharded over a 1-D 'data' mesh, params
  replicated; the gradient all-reduce is XLA's): step time and trace+lower time;
- a tensor-parallel matmul on a 2x4 mesh (contraction dimension sharded);
- dispatch of a small jitted call on a sharded argument.

Every timed call waits for its result: XLA's CPU collectives deadlock with many programs
in flight on a 2-core machine (JAX's too), so nothing here overlaps calls.

JAX is used if `import jax` works here or JAX_PYTHON names a Python that has it.
Ratios are only meaningful within one run: the machines are noisy.

Targets: step time <= 1.05x JAX, trace+lower <= 0.5x, sharded dispatch <= 1.5x.

    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_sharding.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, use_cpu_devices  # noqa: E402

use_cpu_devices(8)

MEASURE = r'''
S = lib.sharding
devices = lib.devices()[:8]
data = S.Mesh(np.array(devices), ("data",))
grid = S.Mesh(np.array(devices).reshape(2, 4), ("a", "b"))
rep, rows = S.NamedSharding(data, S.PartitionSpec()), S.NamedSharding(data, S.PartitionSpec("data"))
rng = np.random.default_rng(0)
sizes = [256, 512, 512, 10]
params = [(rng.standard_normal((m, n), dtype=np.float32) / np.sqrt(m),
           np.zeros(n, np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]
params = lib.device_put(params, rep)
x = lib.device_put(rng.standard_normal((1024, 256), dtype=np.float32), rows)
y = lib.device_put(rng.standard_normal((1024, 10), dtype=np.float32), rows)

def make_step():
    loss = mlp_loss

    def step(params, x, y):
        l, g = lib.value_and_grad(loss)(params, x, y)
        return l, lib.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)
    return step

step = lib.jit(make_step())
lib.block_until_ready(step(params, x, y))

a = lib.device_put(rng.standard_normal((512, 1024), dtype=np.float32),
                   S.NamedSharding(grid, S.PartitionSpec("a", "b")))
w = lib.device_put(rng.standard_normal((1024, 512), dtype=np.float32),
                   S.NamedSharding(grid, S.PartitionSpec("b", None)))
matmul = lib.jit(lambda a, w: a @ w)
lib.block_until_ready(matmul(a, w))

small = lib.device_put(np.arange(8, dtype=np.float32), rows)
inc = lib.jit(lambda v: v + 1)
lib.block_until_ready(inc(small))

res = {
  "DP MLP step, 8 devices (ms)":
      best_of(lambda: lib.block_until_ready(step(params, x, y)), 10, 5) / 1e3,
  "trace+lower DP MLP step (ms)":
      best_single(make_step, lambda f: lib.jit(f).lower(params, x, y), 5) / 1e3,
  "TP matmul 512x1024x512 on 2x4 (ms)":
      best_of(lambda: lib.block_until_ready(matmul(a, w)), 10, 5) / 1e3,
  "dispatch jit(v + 1) on f32[8] over 8 devices (us)":
      best_of(lambda: lib.block_until_ready(inc(small)), 200, 5),
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE,
         "Targets: step time <= 1.05x JAX; trace+lower <= 0.5x; sharded dispatch <= 1.5x.",
         "Every call waits for its result (see the module docstring).")
