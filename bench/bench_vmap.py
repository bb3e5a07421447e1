"""vmap benchmarks, plax next to JAX when one is found.

Measures (issue 5):
  - per-example gradients of an MLP (784 -> 256 -> 256 -> 10, tanh, softmax
    cross-entropy, batch 128) with `jit(vmap(grad(loss), in_axes=(None, 0, 0)))`:
    trace+lower time and steady-state run time;
  - trace time of `vmap(jacrev(f))` (make_jaxpr) for a 60-op vector function of
    x: f32[16] over a batch of 32, a fresh function every repetition.

Targets: trace time no slower than JAX; run time within 5% of JAX (same XLA).

    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_vmap.py [ROUNDS]

Each row is the best over ROUNDS (default 3) alternating plax/JAX runs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
rng = np.random.default_rng(0)
params, xb, yb = mlp_data([784, 256, 256, 10], batch=128)

def make_per_example():  # one example: x f32[784], y f32[10]
    return lib.vmap(lib.grad(mlp_example_loss), in_axes=(None, 0, 0))

per_example = lib.jit(make_per_example())
grads = per_example(params, xb, yb)
assert np.isfinite(float(jnp.sum(grads[0][0])))

def run_per_example():
    lib.block_until_ready(per_example(params, xb, yb))

W = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
xs = rng.standard_normal((32, 16)).astype(np.float32)

def make_vector_fn():
    def f(x):
        y = x
        for i in range(20):
            y = jnp.tanh(jnp.dot(W, y)) * x + 0.5
        return y
    return f

res = {
  "trace+lower jit(vmap(grad)) MLP per-example (ms)":
      best_single(make_per_example,
                  lambda g: lib.jit(g).lower(params, xb, yb), 10) / 1e3,
  "run jit(vmap(grad)) MLP per-example, batch 128 (ms)":
      best_of(run_per_example, 5, 20) / 1e3,
  "trace vmap(jacrev(f)) 60-op f32[16] fn, batch 32 (ms)":
      best_single(make_vector_fn, lambda f: lib.make_jaxpr(lib.vmap(lib.jacrev(f)))(xs), 10) / 1e3,
  "trace vmap(jacfwd(f)) 60-op f32[16] fn, batch 32 (ms)":
      best_single(make_vector_fn, lambda f: lib.make_jaxpr(lib.vmap(lib.jacfwd(f)))(xs), 10) / 1e3,
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE,
         "Targets: trace times <= 1x JAX; per-example gradient run time <= 1.05x JAX.")
