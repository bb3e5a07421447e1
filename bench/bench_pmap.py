"""pmap on 8 CPU devices, plax next to JAX when one is found.

Measures (issue 15): an 8-device data-parallel MLP training step written with pmap (pmean of
the gradients) and the per-call dispatch of a small pmapped function. Every timed call waits
for its result. Ratios are only meaningful within one run.

Targets: step time <= 1.05x JAX, dispatch <= 1.5x.

    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_pmap.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, use_cpu_devices  # noqa: E402

use_cpu_devices(8)

MEASURE = r'''
lax = lib.lax
rng = np.random.default_rng(0)
sizes = [256, 512, 512, 10]
params = [(rng.standard_normal((m, n), dtype=np.float32) / np.sqrt(m), np.zeros(n, np.float32))
          for m, n in zip(sizes[:-1], sizes[1:])]
x = rng.standard_normal((8, 128, 256), dtype=np.float32)
y = rng.standard_normal((8, 128, 10), dtype=np.float32)

def step(params, x, y):
    g = lax.pmean(lib.grad(mlp_loss)(params, x, y), "batch")
    return lib.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)

pstep = lib.pmap(step, axis_name="batch", in_axes=(None, 0, 0), out_axes=None)
xs = lib.pmap(lambda v: v)(x)
ys = lib.pmap(lambda v: v)(y)
lib.block_until_ready(pstep(params, xs, ys))
small = lib.pmap(lambda v: v)(np.arange(8, dtype=np.float32))
inc = lib.pmap(lambda v: v + 1)
lib.block_until_ready(inc(small))

res = {
  "pmap DP MLP step, 8 devices (ms)":
      best_of(lambda: lib.block_until_ready(pstep(params, xs, ys)), 10, 5) / 1e3,
  "dispatch pmap(v + 1) on f32[8] (us)":
      best_of(lambda: lib.block_until_ready(inc(small)), 200, 5),
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE, "Targets: step time <= 1.05x JAX; dispatch <= 1.5x.",
         "Every call waits for its result (see the module docstring).")
