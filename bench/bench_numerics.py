"""Numerical-library benchmark (issue 34's modules), plax next to JAX when one is found.

Measures, under jit and in steady state (inputs on the device, compile excluded):
- ops.segment_sum of 1M float32 values into 10k segments (unsorted ids);
- image.resize of a float32 512x512x3 image to 256x256x3, method 'linear';
- bcoo_dot_general: a 4096x4096 BCOO matrix of 1% density (167,772 stored entries) times a
  dense float32 4096x64 matrix;
- odeint (Dormand-Prince, rtol=atol=1e-6) of a 3-state nonlinear ODE over t in [0, 10]
  at 50 times, with the gradient of a scalar loss to its initial state and 3 rate
  constants (the adjoint pass);
- scipy.sparse.linalg.cg (tol 1e-5) on the 2-D Poisson problem of a 64x64 grid (4096
  unknowns), matrix-free 5-point stencil;
- scipy.linalg.cho_factor of a 512x512 SPD float32 matrix and cho_solve of 512x16
  right-hand sides: each half alone, and both in one jitted function.
A case whose feature a library lacks is left out of its table (and named on stderr).

Target: run time <= 1.05x JAX each.

    JAX_PYTHON=/tmp/jaxenv/bin/python .venv/bin/python bench/bench_numerics.py [ROUNDS]

Each row is the best over ROUNDS (default 3) alternating plax/JAX runs. BENCH_SMALL=1 runs
every case at a small size (a check that each runs, not a measurement).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
import importlib, os, sys
SMALL = os.environ.get("BENCH_SMALL") == "1"
rng = np.random.default_rng(0)
res = {}

def module(name):
    return importlib.import_module(lib.__name__ + "." + name)

def run(f, *args):
    return lambda: lib.block_until_ready(f(*args))

def case(title, body):
    """Run one case; a library without the feature (import or attribute missing) skips it."""
    try:
        res.update(body())
    except (ImportError, AttributeError, NotImplementedError) as e:
        print(f"{lib.__name__}: skipped {title}: {type(e).__name__}: {e}", file=sys.stderr)

def segment_sum():
    n, k = (10_000, 100) if SMALL else (1_000_000, 10_000)
    data = lib.device_put(rng.standard_normal(n).astype(np.float32))
    host_ids = rng.integers(0, k, n).astype(np.int32)
    ids = lib.device_put(host_ids)
    f = lib.jit(lambda d, s: module("ops").segment_sum(d, s, num_segments=k))
    want = np.bincount(host_ids, np.asarray(data, np.float64), minlength=k)
    assert np.abs(np.asarray(f(data, ids)) - want).max() < 1e-3
    return {f"segment_sum f32[{n}] -> [{k}] under jit (us)": best_of(run(f, data, ids), 20, 5)}

def resize():
    n, m = (64, 32) if SMALL else (512, 256)
    img = lib.device_put(rng.random((n, n, 3)).astype(np.float32))
    f = lib.jit(lambda x: module("image").resize(x, (m, m, 3), "linear"))
    out = np.asarray(f(img))
    assert out.shape == (m, m, 3) and abs(out.mean() - np.asarray(img).mean()) < 1e-2
    return {f"image.resize f32[{n},{n},3] -> [{m},{m},3] linear under jit (us)":
            best_of(run(f, img), 20, 5)}

def bcoo_dot():
    n, cols = (256, 8) if SMALL else (4096, 64)
    sparse = module("experimental.sparse")
    nse = n * n // 100
    flat = rng.choice(n * n, nse, replace=False)
    idx = np.stack([flat // n, flat % n], axis=1).astype(np.int32)
    vals = rng.standard_normal(nse).astype(np.float32)
    mat = sparse.BCOO((lib.device_put(vals), lib.device_put(idx)), shape=(n, n))
    x = lib.device_put(rng.standard_normal((n, cols)).astype(np.float32))
    dn = (((1,), (0,)), ((), ()))
    f = lib.jit(lambda m, x: sparse.bcoo_dot_general(m, x, dimension_numbers=dn))
    want = np.zeros((n, cols))
    np.add.at(want, idx[:, 0], vals[:, None].astype(np.float64) * np.asarray(x)[idx[:, 1]])
    assert np.abs(np.asarray(f(mat, x)) - want).max() < 1e-3 * np.abs(want).max()
    return {f"bcoo_dot_general 1% of f32[{n},{n}] @ [{n},{cols}] under jit (us)":
            best_of(run(f, mat, x), 20, 5)}

def odeint_grad():
    odeint = module("experimental.ode").odeint
    ts = lib.device_put(np.linspace(0.0, 2.0 if SMALL else 10.0, 50).astype(np.float32))
    y0 = lib.device_put(np.array([1.0, 0.5, 0.2], np.float32))
    k = lib.device_put(np.array([0.4, 3.0, 1.0], np.float32))

    def rhs(y, t, k):  # a Robertson-like reaction network, mildly nonlinear, not stiff
        a, b, c = y[0], y[1], y[2]
        return jnp.stack([-k[0] * a + k[2] * b * c,
                          k[0] * a - k[1] * b * b - k[2] * b * c,
                          k[1] * b * b])

    def loss(y0, k):
        ys = odeint(rhs, y0, ts, k, rtol=1e-6, atol=1e-6)
        return jnp.sum(ys[-1] ** 2) + jnp.sum(ys[:, 1])

    f = lib.jit(lib.value_and_grad(loss, argnums=(0, 1)))
    value, (g_y0, g_k) = f(y0, k)
    assert np.isfinite(float(value)) and np.isfinite(np.asarray(g_k)).all()
    return {"odeint 3-state, 50 times, value_and_grad under jit (us)":
            best_of(run(f, y0, k), 5, 5)}

def cg_poisson():
    cg = module("scipy.sparse.linalg").cg
    side = 16 if SMALL else 64

    def laplacian(u):  # -Laplacian, 5-point stencil, zero Dirichlet boundary
        g = u.reshape(side, side)
        p = jnp.pad(g, 1)
        out = 4 * g - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        return out.reshape(-1)

    b = lib.device_put(rng.standard_normal(side * side).astype(np.float32))
    f = lib.jit(lambda b: cg(laplacian, b, tol=1e-5)[0])
    x = f(b)
    r = np.asarray(laplacian(x)) - np.asarray(b)
    assert np.linalg.norm(r) <= 2e-5 * np.linalg.norm(np.asarray(b))
    return {f"cg 2-D Poisson {side}x{side} ({side * side} unknowns), tol 1e-5, under jit (us)":
            best_of(run(f, b), 5, 5)}

def cholesky():
    sla = module("scipy.linalg")
    n, m = (64, 4) if SMALL else (512, 16)
    x = rng.standard_normal((n, n)).astype(np.float32)
    a = lib.device_put((x @ x.T / n + np.eye(n, dtype=np.float32)).astype(np.float32))
    b = lib.device_put(rng.standard_normal((n, m)).astype(np.float32))
    factor = lib.jit(lambda a: sla.cho_factor(a)[0])
    solve = lib.jit(lambda c, b: sla.cho_solve((c, False), b))
    both = lib.jit(lambda a, b: sla.cho_solve(sla.cho_factor(a), b))
    c = factor(a)
    want = np.linalg.solve(np.asarray(a, np.float64), np.asarray(b, np.float64))
    for got in (both(a, b), solve(c, b)):
        assert np.abs(np.asarray(got) - want).max() < 1e-3 * np.abs(want).max()
    return {
        f"cho_factor f32[{n},{n}] under jit (us)": best_of(run(factor, a), 20, 5),
        f"cho_solve f32[{n},{n}] @ [{n},{m}] under jit (us)": best_of(run(solve, c, b), 20, 5),
        f"cho_factor + cho_solve in one jit (us)": best_of(run(both, a, b), 20, 5),
    }

for title, body in [("segment_sum", segment_sum), ("image.resize", resize),
                    ("bcoo_dot_general", bcoo_dot), ("odeint", odeint_grad),
                    ("cg", cg_poisson), ("cho_factor/cho_solve", cholesky)]:
    case(title, body)
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE,
         "Target: run time <= 1.05x JAX each.",
         "Inputs on the device, compile excluded; see the module docstring for each program.")
