"""plax next to JAX on one NVIDIA GPU, in one run (bench/gpu_check.sh runs it on a GPU machine).

    JAX_PYTHON=/path/to/python-with-jax-cuda .venv/bin/python bench/bench_gpu.py

Rows (targets from issue 36):
- dispatch: a jitted f32[8] function called and waited for (block_until_ready), µs per
  call; plax/JAX at most 1.0.
- mlp_step: an SGD step of a tanh MLP 784-512x6-10 on a batch of 128 (f32), µs per step;
  plax/JAX at most 1.02.
- matmul_ceiling: one bf16 8192x8192x8192 product, TFLOP/s: the card's measured ceiling.
- bf16_mlp: an SGD step of a 4-layer ReLU MLP of 8192x8192 bf16 weights on a batch of 8192,
  TFLOP/s (2·B·D²·(3L-1) flops a step: forward, weight and activation gradients); target at
  least 90 % of the ceiling and at least JAX's figure.
Each figure is the best of 5 timed rounds after a warm-up. JAX is optional: without
JAX_PYTHON (or `import jax` working) only plax's column is printed.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PRELUDE  # noqa: E402  (the timers and the MLP, shared with bench/)

HEADER = r'''
import sys
lib_name = sys.argv[1]
lib = __import__(lib_name)
jnp = lib.numpy
lax = lib.lax
assert lib.default_backend() == "gpu", lib.devices()
'''

BODY = r'''

def best(fn, n, rounds=5):
    fn()
    out = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            r = fn()
        lib.block_until_ready(r)
        out = min(out, (time.perf_counter() - t) / n)
    return out

results = {}
# dispatch, including the wait for the result
x8 = lib.device_put(np.ones(8, np.float32))
f = lib.jit(lambda v: v * 2 + 1)
results["dispatch_us"] = best(lambda: f(x8).block_until_ready(), 2000) * 1e6

# MLP 784-512x6-10, batch 128 (harness.PRELUDE's MLP)
params, x, y = mlp_data((784,) + (512,) * 6 + (10,), 128)

@lib.jit
def step(params, x, y):
    g = lib.grad(mlp_loss)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, g)]

state = [params]
def mlp_step():
    state[0] = step(state[0], x, y)
    return state[0]
results["mlp_step_us"] = best(mlp_step, 200) * 1e6
results["mlp_check"] = float(mlp_loss(state[0], x, y))

# bf16: the matmul ceiling, then the big MLP step
rng = np.random.default_rng(0)
D = B = 8192
L = 4
a = lib.device_put(rng.standard_normal((D, D)).astype(np.float32)).astype(jnp.bfloat16)
b = lib.device_put(rng.standard_normal((D, D)).astype(np.float32)).astype(jnp.bfloat16)
mm = lib.jit(lambda a, b: a @ b)
results["matmul_ceiling_tflops"] = 2 * D ** 3 / best(lambda: mm(a, b), 20) / 1e12

ws = [lib.device_put((rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32))
      .astype(jnp.bfloat16) for _ in range(L)]
xb = lib.device_put(rng.standard_normal((B, D)).astype(np.float32)).astype(jnp.bfloat16)

def big_loss(ws, x):
    h = x
    for w in ws:
        h = jnp.maximum(h @ w, 0)
    return jnp.mean(h.astype(jnp.float32) ** 2)

@lib.jit
def big_step(ws, x):
    g = lib.grad(big_loss)(ws, x)
    return [w - jnp.asarray(1e-3, jnp.bfloat16) * gw for w, gw in zip(ws, g)]

big = [ws]
def big_mlp():
    big[0] = big_step(big[0], xb)
    return big[0]
t = best(big_mlp, 10)
results["bf16_mlp_tflops"] = 2 * B * D * D * (3 * L - 1) / t / 1e12
results["bf16_mlp_ms"] = t * 1e3
print("RESULT", json.dumps(results), flush=True)
'''
PROGRAM = HEADER + PRELUDE + BODY

ROWS = [("dispatch_us", "dispatch (µs/call)", "at most 1.0x"),
        ("mlp_step_us", "mlp 784-512x6-10 step (µs)", "at most 1.02x"),
        ("matmul_ceiling_tflops", "bf16 matmul 8192³ (TFLOP/s)", "the ceiling"),
        ("bf16_mlp_tflops", "bf16 MLP 8192x8192x4 step (TFLOP/s)", ">= 90% of ceiling, >= JAX")]


def _run(python: str, lib: str, path: str) -> dict:
    env = dict(os.environ)
    env.pop("PLAX_PLATFORMS", None)
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run([python, path, lib], capture_output=True, text=True, env=env,
                          timeout=900, cwd=tempfile.gettempdir())
    found = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"{lib} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(found.group(1))


def main() -> int:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROGRAM)
        path = f.name
    mine = _run(sys.executable, "plax", path)
    theirs = None
    if os.environ.get("JAX_PYTHON"):
        theirs = _run(os.environ["JAX_PYTHON"], "jax", path)
    os.unlink(path)
    print(f"{'benchmark':<38} {'plax':>10} {'jax':>10} {'plax/jax':>9}  target")
    for key, label, target in ROWS:
        line = f"{label:<38} {mine[key]:>10.1f}"
        if theirs:
            line += f" {theirs[key]:>10.1f} {mine[key] / theirs[key]:>9.3f}"
        print(f"{line}  {target}")
    share = mine["bf16_mlp_tflops"] / mine["matmul_ceiling_tflops"]
    print(f"\nplax's bf16 MLP step: {mine['bf16_mlp_ms']:.2f} ms, {100 * share:.1f} % of the "
          f"measured bf16 matmul ceiling.")
    if theirs and abs(mine["mlp_check"] - theirs["mlp_check"]) > 1e-3 * abs(theirs["mlp_check"]):
        print(f"the MLP runs disagree: plax {mine['mlp_check']}, JAX {theirs['mlp_check']}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
