"""Linear-algebra benchmark, plax next to JAX when one is found.

Measures, under jit and in steady state, a Cholesky factorisation of a 512x512 symmetric
positive-definite float32 matrix followed by cho_solve of 512x16 right-hand sides
(jnp.linalg.cholesky then jax.scipy.linalg.cho_solve: one LAPACK potrf and two trsm calls),
and the two halves alone. Both libraries hand XLA the same LAPACK custom calls, so the
figures should agree.

Target: run time <= 1.05x JAX.

    JAX_PYTHON=/tmp/jaxvenv/bin/python .venv/bin/python bench/bench_linalg.py [ROUNDS]

Each row is the best over ROUNDS (default 3) alternating plax/JAX runs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
import importlib
sla = importlib.import_module(lib.__name__ + ".scipy.linalg")
rng = np.random.default_rng(0)
N, K = 512, 16
x = rng.standard_normal((N, N)).astype(np.float32)
a = lib.device_put((x @ x.T / N + np.eye(N, dtype=np.float32)).astype(np.float32))
b = lib.device_put(rng.standard_normal((N, K)).astype(np.float32))

def solve(a, b):
    return sla.cho_solve((jnp.linalg.cholesky(a), True), b)

both = lib.jit(solve)
factor = lib.jit(jnp.linalg.cholesky)
back = lib.jit(lambda c, b: sla.cho_solve((c, True), b))
c = factor(a)
got = np.asarray(both(a, b))
want = np.linalg.solve(np.asarray(a, np.float64), np.asarray(b, np.float64))
assert np.abs(got - want).max() < 1e-3 * np.abs(want).max()

def run(f, *args):
    return lambda: lib.block_until_ready(f(*args))

res = {
  "cholesky + cho_solve f32[512,512] @ [512,16] under jit (us)": best_of(run(both, a, b), 20, 5),
  "cholesky f32[512,512] under jit (us)": best_of(run(factor, a), 20, 5),
  "cho_solve f32[512,512] @ [512,16] under jit (us)": best_of(run(back, c, b), 20, 5),
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE,
         "Target: run time <= 1.05x JAX.",
         "Program: jnp.linalg.cholesky of a float32[512,512] SPD matrix, then "
         "jax.scipy.linalg.cho_solve of float32[512,16], jitted, inputs on the device.")
