"""Convolutions: a LeNet-style training step, plax next to JAX when one is found.

The step (one jit): two 5x5 convolutions (NHWC/HWIO; 6 filters 'SAME', 16 filters 'VALID'),
each followed by relu and 2x2 max pooling (lax.reduce_window), then dense 400-120-10,
log-sum-exp softmax cross-entropy and an SGD update of every parameter; batch 64 of 28x28x1.
Measured: the steady-state step time (every call waits for its result) and trace+lower time of
`jit(step).lower(...)` on a fresh step function each time (no caching). Ratios are only
meaningful within one run: the machines are shared and noisy.

Targets: step time <= 1.05x JAX; trace+lower <= 0.5x JAX.

    JAX_PYTHON=/tmp/jaxvenv/bin/python .venv/bin/python bench/bench_conv.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
rng = np.random.default_rng(0)

def init(shape, fan_in):
    return lib.device_put((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32))

params = {
    "c1": (init((5, 5, 1, 6), 25), lib.device_put(np.zeros(6, np.float32))),
    "c2": (init((5, 5, 6, 16), 150), lib.device_put(np.zeros(16, np.float32))),
    "d1": (init((400, 120), 400), lib.device_put(np.zeros(120, np.float32))),
    "d2": (init((120, 10), 120), lib.device_put(np.zeros(10, np.float32))),
}
x = lib.device_put(rng.standard_normal((64, 28, 28, 1)).astype(np.float32))
y = lib.device_put(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)])

def make_step():
    def conv_block(h, w, b, padding):
        h = lax.conv_general_dilated(h, w, (1, 1), padding,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jnp.maximum(h + b, 0.0)
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(params, x, y):
        h = conv_block(x, *params["c1"], "SAME")     # 28x28x6 -> 14x14x6
        h = conv_block(h, *params["c2"], "VALID")    # 10x10x16 -> 5x5x16
        h = h.reshape(h.shape[0], -1)
        w, b = params["d1"]
        h = jnp.maximum(h @ w + b, 0.0)
        w, b = params["d2"]
        logits = h @ w + b
        m = jnp.max(logits, axis=1, keepdims=True)
        lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=1, keepdims=True)) + m
        return -jnp.mean(jnp.sum(y * (logits - lse), axis=1))

    def step(params, x, y, lr=0.05):
        value, grads = lib.value_and_grad(loss)(params, x, y)
        return lib.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), value
    return step

jstep = lib.jit(make_step())
new, value = jstep(params, x, y)
assert np.isfinite(float(value))

def run_step():
    lib.block_until_ready(jstep(params, x, y))

res = {
  "LeNet step, batch 64 (ms)": best_of(run_step, 3, 30) / 1e3,
  "trace+lower jit(LeNet step) (ms)":
      best_single(make_step, lambda s: lib.jit(s).lower(params, x, y), 20) / 1e3,
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE, "Targets: step time <= 1.05x JAX; trace+lower <= 0.5x JAX.",
         "LeNet: conv 5x5x6 SAME, relu, maxpool 2x2, conv 5x5x16 VALID, relu, maxpool 2x2, "
         "dense 400-120-10, softmax cross-entropy, SGD; batch 64 of 28x28x1, all in one jit.")
