"""Autodiff tracing and training-step time, plax next to JAX when one is found.

Measures (issue 4):
  - trace time of `grad` of a 200-op scalar chain (make_jaxpr), and trace+lower
    of `jit(grad(f))`, with a fresh function every repetition (no caching);
  - a 6-layer MLP training step (784 -> 512 x6 -> 10, batch 128, relu (jnp.maximum),
    softmax cross-entropy by log-sum-exp, SGD on every parameter, params as a
    pytree): trace+lower time of `jit(step)` and steady-state step time.

JAX is used if `import jax` works here or JAX_PYTHON names a Python that has it.
Ratios are only meaningful within one run: the machines are noisy.

Targets: tracing no slower than JAX; step time within 5% of JAX (same XLA).

    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_autodiff.py [ROUNDS]

Each row is the best over ROUNDS (default 3) alternating plax/JAX runs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
# --- grad of a 200-op scalar chain, a fresh function each repetition
CHAIN_LEN = 200

def make_chain():
    return chain_function(CHAIN_LEN)

x0 = np.float32(0.3)

# --- 6-layer MLP training step
params, xb, yb = mlp_data([784] + [512] * 6 + [10], batch=128)

def make_step():
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.maximum(jnp.dot(h, w) + b, 0.0)
        w, b = params[-1]
        logits = jnp.dot(h, w) + b
        m = jnp.max(logits, axis=1, keepdims=True)
        lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=1, keepdims=True)) + m
        return -jnp.mean(jnp.sum(y * (logits - lse), axis=1))

    def step(params, x, y, lr=0.01):
        value, grads = lib.value_and_grad(loss)(params, x, y)
        new = [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)]
        return new, value
    return step

jstep = lib.jit(make_step())
new, value = jstep(params, xb, yb)
assert np.isfinite(float(value))

def run_step():
    new, value = jstep(params, xb, yb)
    lib.block_until_ready((new, value))

res = {
  "trace grad 200-op chain (make_jaxpr) (ms)":
      best_single(make_chain, lambda f: lib.make_jaxpr(lib.grad(f))(x0), 20) / 1e3,
  "trace+lower jit(grad) 200-op chain (ms)":
      best_single(make_chain, lambda f: lib.jit(lib.grad(f)).lower(x0), 20) / 1e3,
  "trace MLP step (make_jaxpr) (ms)":
      best_single(make_step, lambda s: lib.make_jaxpr(s)(params, xb, yb), 10) / 1e3,
  "trace+lower jit(MLP step) (ms)":
      best_single(make_step, lambda s: lib.jit(s).lower(params, xb, yb), 10) / 1e3,
  "MLP step, steady state (ms)":
      best_of(run_step, 2, 50) / 1e3,
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE,
         "Targets: tracing (trace, trace+lower) <= 1x JAX; MLP step time <= 1.05x JAX.",
         "MLP: 784-512x6-10, batch 128, relu (jnp.maximum), log-sum-exp cross-entropy, SGD on "
         "all params.")
