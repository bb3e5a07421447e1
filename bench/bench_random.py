"""Random number generation, plax next to JAX when one is found.

Measures (issue 12): generating 10M uniform float32s and 10M standard normals under jit
from a fixed key: steady-state run time, and trace+lower time of a fresh function. (The
values themselves equal JAX's bit for bit: tests/random checks that.)

JAX is used if `import jax` works here or JAX_PYTHON names a Python that has it.
Ratios are only meaningful within one run: the machines are noisy.

Targets: run time <= 1.05x JAX; trace+lower no slower than JAX.

    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_random.py [ROUNDS]

Each row is the best over ROUNDS (default 3) alternating plax/JAX runs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
N = 10_000_000
key = lib.random.PRNGKey(0)
typed = lib.random.key(0)
split_many = lib.jit(lambda k: lib.random.split(k, 1000))

def make_uniform():
    return lambda k: lib.random.uniform(k, (N,))

def make_normal():
    return lambda k: lib.random.normal(k, (N,))

uniform = lib.jit(make_uniform())
normal = lib.jit(make_normal())
u, n = uniform(key), normal(key)
assert np.isfinite(np.asarray(u[:3])).all() and np.isfinite(np.asarray(n[:3])).all()

def run(f, k=key):
    return lambda: lib.block_until_ready(f(k))

res = {
  "uniform 10M f32 under jit, steady state (ms)": best_of(run(uniform), 3, 5) / 1e3,
  "normal 10M f32 under jit, steady state (ms)": best_of(run(normal), 3, 5) / 1e3,
  "normal 10M f32 from a typed key, under jit (ms)": best_of(run(normal, typed), 3, 5) / 1e3,
  "split a typed key into 1000, under jit (us)": best_of(run(split_many, typed), 20, 5),
  "eager split(key) (us)": best_of(lambda: lib.block_until_ready(lib.random.split(typed)), 50, 5),
  "trace+lower jit(uniform 10M) (ms)":
      best_single(make_uniform, lambda f: lib.jit(f).lower(key), 10) / 1e3,
  "trace+lower jit(normal 10M) (ms)":
      best_single(make_normal, lambda f: lib.jit(f).lower(key), 10) / 1e3,
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE,
         "Targets: run time <= 1.05x JAX; trace+lower <= 1x JAX.",
         "Draws: random.uniform / random.normal of 10M float32 from PRNGKey(0) (and from the typed "
         "key(0)), jitted; splits of a typed key.")
