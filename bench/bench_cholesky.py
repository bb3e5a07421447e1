"""cho_factor + cho_solve benchmark, plax next to JAX when one is found (issue 34).

Measures, under jit and in steady state, ``jax.scipy.linalg.cho_factor`` of a 512x512
symmetric positive-definite float32 matrix (one LAPACK potrf, with the layout copies around
it), ``cho_solve`` of 512x16 right-hand sides with that factor (two trsm calls), the two
together in one program, and float64 the same way. Factor and solve are timed apart so a
gap shows where it lies. Each figure is the minimum over many short batches (the machines
are shared and noisy: the minimum is the figure least disturbed by other work).

Target: run time <= 1.0x JAX.

    JAX_PYTHON=/tmp/jaxenv/bin/python .venv/bin/python bench/bench_cholesky.py [ROUNDS]

Each row is the best over ROUNDS (default 5) alternating plax/JAX runs.
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
res = {}
for dtype in (np.float32, np.float64):
    name = np.dtype(dtype).name
    if dtype == np.float64:
        lib.config.update("jax_enable_x64", True)
    x = rng.standard_normal((N, N))
    a = lib.device_put((x @ x.T / N + np.eye(N)).astype(dtype))
    b = lib.device_put(rng.standard_normal((N, K)).astype(dtype))
    factor = lib.jit(lambda a: sla.cho_factor(a)[0])
    solve = lib.jit(lambda c, b: sla.cho_solve((c, False), b))
    both = lib.jit(lambda a, b: sla.cho_solve(sla.cho_factor(a), b))
    c = factor(a)
    got = np.asarray(both(a, b), np.float64)
    want = np.linalg.solve(np.asarray(a, np.float64), np.asarray(b, np.float64))
    assert np.abs(got - want).max() < 1e-3 * np.abs(want).max()

    def run(f, *args):
        return lambda: lib.block_until_ready(f(*args))

    res[f"cho_factor {name}[512,512] under jit (us)"] = best_of(run(factor, a), 10, 30)
    res[f"cho_solve {name}[512,512] @ [512,16] under jit (us)"] = best_of(run(solve, c, b), 10, 30)
    res[f"cho_factor + cho_solve {name} under jit (us)"] = best_of(run(both, a, b), 10, 30)
print(json.dumps(res))
'''


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.argv.append("5")
    main(MEASURE,
         "Target: run time <= 1.0x JAX.",
         "Program: jax.scipy.linalg.cho_factor of an SPD [512,512] matrix and cho_solve of "
         "[512,16] right-hand sides, jitted, inputs on the device; min over 30 batches of 10.")
