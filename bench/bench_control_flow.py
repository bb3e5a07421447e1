"""Structured control flow (scan, while_loop), plax next to JAX when one is found.

Measures:
  - a 1,000-step tanh RNN written with `lax.scan`, cell
    `h = tanh(h @ W + x_t @ U + b)`, hidden 256, input 256, batch 8
    (xs f32[1000, 8, 256]), loss = mean of all hidden states squared;
    `jit(value_and_grad(loss))` with respect to the params (W, U, b):
      * trace+lower time (a fresh function every repetition, no caching),
      * compile time (`.lower(...).compile()`, a fresh lowering each time),
      * steady-state step time (block_until_ready),
    and the forward pass alone, for reference;
  - a `lax.while_loop` Newton solver for x**3 = a, elementwise over f32[1000]
    (a in [1, 1000], x0 = a), iterating until max |x**3 - a| / a < 1e-5 or 50
    iterations, under jit: trace+lower time and steady-state run time.

Both results are checked before timing: the RNN loss and gradients against a
NumPy (float64) forward pass and backpropagation through time, the solver's
roots against np.cbrt.

Targets: trace+lower <= 0.5x JAX; compile <= 1.0x JAX; RNN step and Newton
run time <= 1.05x JAX (same XLA).

JAX is used if `import jax` works here or JAX_PYTHON names a Python that has it.
Ratios are only meaningful within one run: the machines are noisy.

    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_control_flow.py [ROUNDS]

Each row is the best over ROUNDS (default 3) alternating plax/JAX runs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
# --- a 1,000-step tanh RNN over lax.scan
T, B, D, H = 1000, 8, 256, 256
rng = np.random.default_rng(0)
W_np = (0.9 * rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
U_np = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
b_np = (0.1 * rng.standard_normal(H)).astype(np.float32)
xs_np = rng.standard_normal((T, B, D)).astype(np.float32)
rnn_params = tuple(lib.device_put(p) for p in (W_np, U_np, b_np))
xs = lib.device_put(xs_np)

def make_rnn_loss():
    """A fresh loss function (so no trace cache can be hit)."""
    def loss(params, xs):
        W, U, b = params
        def cell(h, x_t):
            h = jnp.tanh(h @ W + x_t @ U + b)
            return h, h
        h0 = jnp.zeros((xs.shape[1], W.shape[0]), xs.dtype)
        _, hs = lax.scan(cell, h0, xs)
        return jnp.mean(hs ** 2)
    return loss

def make_rnn_step():
    return lib.jit(lib.value_and_grad(make_rnn_loss()))

def rnn_reference():
    """Loss and gradients by a float64 forward pass and backpropagation through time."""
    W, U, b, x = (a.astype(np.float64) for a in (W_np, U_np, b_np, xs_np))
    hs = np.empty((T, B, H))
    h = np.zeros((B, H))
    for t in range(T):
        h = np.tanh(h @ W + x[t] @ U + b)
        hs[t] = h
    n = hs.size
    gW, gU, gb = np.zeros_like(W), np.zeros_like(U), np.zeros_like(b)
    g_next = np.zeros((B, H))
    for t in range(T - 1, -1, -1):
        dz = (2.0 * hs[t] / n + g_next) * (1.0 - hs[t] ** 2)
        h_prev = hs[t - 1] if t > 0 else np.zeros((B, H))
        gW += h_prev.T @ dz
        gU += x[t].T @ dz
        gb += dz.sum(0)
        g_next = dz @ W.T
    return np.mean(hs ** 2), (gW, gU, gb)

def rel_err(got, want):
    got = np.asarray(got, np.float64)
    return np.linalg.norm(got - want) / np.linalg.norm(want)

rnn_step = make_rnn_step()
value, grads = rnn_step(rnn_params, xs)
ref_value, ref_grads = rnn_reference()
assert abs(float(value) - ref_value) <= 1e-4 * ref_value, (float(value), ref_value)
for name, g, r in zip("WUb", grads, ref_grads):
    assert rel_err(g, r) < 1e-3, (name, rel_err(g, r))

rnn_forward = lib.jit(make_rnn_loss())
assert abs(float(rnn_forward(rnn_params, xs)) - ref_value) <= 1e-4 * ref_value

def run_rnn_step():
    lib.block_until_ready(rnn_step(rnn_params, xs))

def run_rnn_forward():
    lib.block_until_ready(rnn_forward(rnn_params, xs))

# --- a Newton solver for x**3 = a over lax.while_loop
N, TOL, MAX_ITERS = 1000, 1e-5, 50
a_np = rng.uniform(1.0, 1000.0, N).astype(np.float32)
a_dev = lib.device_put(a_np)

def make_newton():
    """A fresh jitted solver returning (iterations, roots)."""
    def solve(a):
        def residual(x):
            return jnp.max(jnp.abs(x ** 3 - a) / a)
        def keep_going(carry):
            i, x, err = carry
            return (i < MAX_ITERS) & (err >= TOL)
        def newton_step(carry):
            i, x, err = carry
            x = x - (x ** 3 - a) / (3.0 * x ** 2)
            return i + 1, x, residual(x)
        i, x, _ = lax.while_loop(keep_going, newton_step, (np.int32(0), a, residual(a)))
        return i, x
    return lib.jit(solve)

newton = make_newton()
iters, roots = newton(a_dev)
assert 5 < int(iters) < MAX_ITERS, int(iters)
assert np.allclose(np.asarray(roots), np.cbrt(a_np.astype(np.float64)), rtol=1e-5), "Newton roots"

def run_newton():
    lib.block_until_ready(newton(a_dev))

res = {
  "RNN 1000-step scan: trace+lower jit(value_and_grad) (ms)":
      best_single(make_rnn_step, lambda f: f.lower(rnn_params, xs), 10) / 1e3,
  "RNN 1000-step scan: compile jit(value_and_grad) (ms)":
      best_single(lambda: make_rnn_step().lower(rnn_params, xs), lambda low: low.compile(), 5) / 1e3,
  "RNN 1000-step scan: fwd+bwd step, steady state (ms)":
      best_of(run_rnn_step, 3, 10) / 1e3,
  "RNN 1000-step scan: forward only, steady state (ms)":
      best_of(run_rnn_forward, 5, 10) / 1e3,
  "Newton while_loop f32[1000]: trace+lower (ms)":
      best_single(make_newton, lambda f: f.lower(a_dev), 20) / 1e3,
  "Newton while_loop f32[1000]: run, steady state (us)":
      best_of(run_newton, 200, 10),
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE,
         "Targets: trace+lower <= 0.5x JAX; compile <= 1.0x JAX; RNN step and Newton run "
         "<= 1.05x JAX.",
         "RNN: h = tanh(h @ W + x_t @ U + b), T=1000, batch 8, hidden 256, input 256, "
         "loss = mean(hs**2), grad wrt (W, U, b).",
         "Newton: x**3 = a elementwise, f32[1000], until max |x**3 - a| / a < 1e-5 or 50 iterations.")
