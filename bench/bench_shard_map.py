"""shard_map on 8 CPU devices, plax next to JAX when one is found.

Measures (issue 14):
- a collective matmul (the all-gather of the left operand overlapped with the matmul, one
  ppermute per step, as in examples/shard_map_collective_matmul.py): run time;
- a data-parallel training step written with shard_map (batch split, parameters
  replicated, gradients averaged with pmean): run time and trace+lower time.

Every timed call waits for its result (XLA's CPU collectives deadlock with many programs in
flight on a 2-core machine). Ratios are only meaningful within one run.

Targets: run time <= 1.05x JAX, trace+lower <= 0.5x.

    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_shard_map.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, use_cpu_devices  # noqa: E402

use_cpu_devices(8)

MEASURE = r'''
S, lax = lib.sharding, lib.lax
mesh = S.Mesh(np.array(lib.devices()[:8]), ("i",))
P = S.PartitionSpec
rng = np.random.default_rng(0)

def collective_matmul(x_block, w_block):
    n = lax.axis_size("i")
    me = lax.axis_index("i")
    rows = x_block.shape[0]
    ring = [(j, (j + 1) % n) for j in range(n)]
    out = lax.pcast(jnp.zeros((rows * n, w_block.shape[1]), x_block.dtype), "i", to="varying")
    def step(t, carry):
        out, block = carry
        owner = (me - t) % n
        out = lax.dynamic_update_slice(out, block @ w_block, (owner * rows, 0))
        return out, lax.ppermute(block, "i", ring)
    return lax.fori_loop(0, n, step, (out, x_block))[0]

x = rng.standard_normal((1024, 512), dtype=np.float32)
w = rng.standard_normal((512, 1024), dtype=np.float32)
cm = lib.jit(lib.shard_map(collective_matmul, mesh=mesh, in_specs=(P("i"), P(None, "i")),
                           out_specs=P(None, "i")))
xs = lib.device_put(x, S.NamedSharding(mesh, P("i")))
ws = lib.device_put(w, S.NamedSharding(mesh, P(None, "i")))
lib.block_until_ready(cm(xs, ws))

sizes = [256, 512, 512, 10]
params = [(rng.standard_normal((m, n), dtype=np.float32) / np.sqrt(m), np.zeros(n, np.float32))
          for m, n in zip(sizes[:-1], sizes[1:])]
params = lib.device_put(params, S.NamedSharding(mesh, P()))
bx = lib.device_put(rng.standard_normal((1024, 256), dtype=np.float32), S.NamedSharding(mesh, P("i")))
by = lib.device_put(rng.standard_normal((1024, 10), dtype=np.float32), S.NamedSharding(mesh, P("i")))

def make_step():
    loss = mlp_loss
    def body(params, x, y):
        g = lib.grad(loss)(params, x, y)
        g = lib.tree_util.tree_map(lambda d: d / 8, g)
        return lib.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)
    return lib.shard_map(body, mesh=mesh, in_specs=(P(), P("i"), P("i")), out_specs=P())

step = lib.jit(make_step())
lib.block_until_ready(step(params, bx, by))

res = {
  "collective matmul 1024x512x1024, 8 devices (ms)":
      best_of(lambda: lib.block_until_ready(cm(xs, ws)), 10, 5) / 1e3,
  "shard_map DP MLP step, 8 devices (ms)":
      best_of(lambda: lib.block_until_ready(step(params, bx, by)), 10, 5) / 1e3,
  "trace+lower shard_map DP MLP step (ms)":
      best_single(make_step, lambda f: lib.jit(f).lower(params, bx, by), 5) / 1e3,
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE, "Targets: run time <= 1.05x JAX; trace+lower <= 0.5x.",
         "Every call waits for its result (see the module docstring).")
