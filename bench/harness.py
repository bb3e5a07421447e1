"""Runs one measurement script against plax here and against JAX when one is found.

A benchmark is a string of Python that measures with the names `lib` (plax or
jax), `jnp` and `lax`, and prints one JSON object of {name: value}. JAX is
never required: it is used if `import jax` works, or if JAX_PYTHON names a
Python interpreter that has it (a scratch venv outside the repo).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys


# Helpers every measurement may use; prepended to it for both libraries.
PRELUDE = r'''
import json, time, numpy as np

def best_of(fn, n, repeats=5):
    """Best mean time (us) of n calls of fn, over several repeats, after one warm-up."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6

def best_single(make, run, repeats):
    """Best time (us) of run(make()) over fresh inputs; make() is not timed."""
    best = float("inf")
    for _ in range(repeats):
        arg = make()
        t = time.perf_counter()
        run(arg)
        best = min(best, time.perf_counter() - t)
    return best * 1e6

def mlp_data(sizes, batch, seed=0):
    """MLP parameters [(w, b), ...] for layer widths `sizes`, a batch of inputs and one-hot
    labels, all on the device."""
    rng = np.random.default_rng(seed)
    params = [(lib.device_put((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)),
               lib.device_put(np.zeros(n, np.float32)))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = lib.device_put(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    y = lib.device_put(np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)])
    return params, x, y

def mlp_loss(params, x, y):
    """Mean squared error of a tanh MLP with parameters [(w, b), ...]."""
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)

def mlp_example_loss(params, x, y):
    """Cross-entropy of a tanh MLP on one example (x f32[n_in], y one-hot): what per-example
    gradients (vmap of grad) differentiate."""
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(jnp.dot(h, w) + b)
    w, b = params[-1]
    logits = jnp.dot(h, w) + b
    m = jnp.max(logits)
    lse = jnp.log(jnp.sum(jnp.exp(logits - m))) + m
    return -jnp.sum(y * (logits - lse))

def chain_function(length=200):
    """A fresh function of `length` alternating sin / mul-by-x / add-0.5 ops."""
    def chain(x):
        y = x
        for i in range(length):
            k = i % 3
            if k == 0:
                y = lax.sin(y)
            elif k == 1:
                y = y * x
            else:
                y = y + 0.5
        return y
    return chain
'''


def use_cpu_devices(n: int) -> None:
    """Ask plax and JAX for ``n`` virtual CPU devices (call it before either is imported)."""
    os.environ.setdefault("PLAX_NUM_CPU_DEVICES", str(n))
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", str(n))
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={n}")


def run_plax(measure: str) -> dict:
    import plax as lib
    import plax.numpy as jnp
    from plax import lax
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(PRELUDE + measure, {"lib": lib, "lax": lax, "jnp": jnp})
    return json.loads(buf.getvalue().strip().splitlines()[-1])


def run_jax(measure: str) -> dict | None:
    prelude = "import jax as lib\nfrom jax import lax\nimport jax.numpy as jnp\n"
    try:
        import jax  # noqa: F401  (only to learn whether it is here)
        python = sys.executable
    except ImportError:
        python = os.environ.get("JAX_PYTHON")
        if not python:
            return None
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([python, "-c", prelude + PRELUDE + measure], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        print("JAX run failed:", proc.stderr[-500:], file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best_rounds(measure: str, rounds: int):
    """Alternate plax and JAX runs; keep each row's best (the machines are shared and noisy).
    Returns (plax figures, JAX figures or None)."""
    mine, theirs = {}, None
    for _ in range(rounds):
        for k, v in run_plax(measure).items():
            mine[k] = min(v, mine.get(k, v))
        other = run_jax(measure)
        if other is not None:
            theirs = theirs or {}
            for k, v in other.items():
                theirs[k] = min(v, theirs.get(k, v))
    return mine, theirs


def main(measure: str, *notes: str) -> None:
    """Command-line entry of a benchmark script: ``[ROUNDS]`` alternating rounds (default 3),
    the table, then ``notes`` (targets, what was measured)."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    mine, theirs = best_rounds(measure, rounds)
    print_table(mine, theirs)
    print(f"\nBest of {rounds} alternating rounds per row.")
    for note in notes:
        print(note)
    if theirs is None:
        print("\n(JAX not found: set JAX_PYTHON to a Python with jax installed to compare.)")


def report(measure: str, footer: str = "") -> None:
    """Measure with both libraries and print a plax / jax / ratio table."""
    mine = run_plax(measure)
    theirs = run_jax(measure)
    print_table(mine, theirs)
    if footer:
        print("\n" + footer)
    if theirs is None:
        print("\n(JAX not found: set JAX_PYTHON to a Python with jax installed to compare.)")


def print_table(mine: dict, theirs: dict | None) -> None:
    """Rows of plax's figure, JAX's and their ratio (JAX columns only when measured)."""
    width = max(len(k) for k in mine)
    header = f"{'benchmark':<{width}}  {'plax':>10}" + (f"  {'jax':>10}  {'plax/jax':>8}" if theirs else "")
    print(header)
    print("-" * len(header))
    for k, v in mine.items():
        line = f"{k:<{width}}  {v:>10.1f}"
        if theirs and k in theirs:
            line += f"  {theirs[k]:>10.1f}  {v / theirs[k]:>8.2f}"
        print(line)
