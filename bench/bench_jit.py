"""jit dispatch time and trace/lower/compile time, plax next to JAX when one is found.

JAX is never required: it is used if `import jax` works here, or if the
environment variable JAX_PYTHON names a Python interpreter that has it
(e.g. a scratch venv outside the repo). Ratios are only meaningful within
one run: the machines are noisy.

Targets (issue 3): dispatch at most 2x JAX's; trace+lower no slower than JAX's.

    .venv/bin/python bench/bench_jit.py
    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_jit.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import report  # noqa: E402

# The measurement runs the same code against either library: `lib` is plax or
# jax, `jnp` its numpy module, `lax` its lax module; harness.PRELUDE adds the timers.
MEASURE = r'''
# --- dispatch: a jitted function on small arrays, compiled once, called many times
small = lib.device_put(np.ones(8, np.float32))
a, b, c = (lib.device_put(np.full(8, v, np.float32)) for v in (1.0, 2.0, 3.0))
params = {"w": lib.device_put(np.full(8, 0.5, np.float32)),
          "b": (lib.device_put(np.full(8, 0.25, np.float32)), 2.0)}

@lib.jit
def f1(x):
    return x * 2 + 1

@lib.jit
def f4(a, b, c, p):
    return a * p["w"] + b * p["b"][0] + c * p["b"][1]

@lib.jit
def identity(x):
    return x

# --- trace+lower: a 200-op elementwise chain, a fresh function each time (no caching)
CHAIN_LEN = 200
xs = lib.device_put(np.linspace(0, 1, 64, dtype=np.float32))

def make_chain():
    return lib.jit(chain_function(CHAIN_LEN))

res = {
  "dispatch f(x)=x*2+1, f32[8] (us)":
      best_of(lambda: f1(small).block_until_ready(), 1000, repeats=10),
  "dispatch identity, f32[8] (us)":
      best_of(lambda: identity(small).block_until_ready(), 1000, repeats=10),
  "dispatch 3 arrays + pytree arg, f32[8] (us)":
      best_of(lambda: f4(a, b, c, params).block_until_ready(), 1000, repeats=10),
  "trace+lower 200-op chain, f32[64] (ms)":
      best_single(make_chain, lambda g: g.lower(xs), 20) / 1e3,
  "trace+lower+as_text 200-op chain (ms)":
      best_single(make_chain, lambda g: g.lower(xs).as_text(), 20) / 1e3,
  "compile 200-op chain (ms)":
      best_single(lambda: make_chain().lower(xs), lambda low: low.compile(), 10) / 1e3,
}
print(json.dumps(res))
'''


def main():
    report(MEASURE, "Targets: dispatch <= 2x JAX; trace+lower <= 1x JAX (compile is XLA's, for reference).")


if __name__ == "__main__":
    main()
