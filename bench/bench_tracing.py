"""Tracing speed (issue 31): import, the first lower of a training step and a grad trace,
plax next to JAX, each in fresh processes so the first-call costs (lazy imports, first
rule lookups, caches filling) are seen as a program sees them.

Rows, all in ms, each the best over alternating rounds of fresh child processes:

- "import": ``import plax`` against ``import jax`` alone (each loads its numpy too), timed
  inside the child (interpreter start-up excluded), from bytecode: both read it from a
  scratch ``PYTHONPYCACHEPREFIX`` filled by an untimed first round, as an installed package
  does (the lazily imported modules too, which the first lower loads);
- "first jit(step).lower": in a fresh process after the import and after the data are on
  the device, the first ``jit(step).lower(params, x, y)`` of a training step: value_and_grad
  of an MSE loss over a 7-layer tanh MLP (widths 32, batch 16) and an SGD update by
  ``tree_util.tree_map``; "steady" is the best of 10 further lowers, each of a fresh
  closure of the same step (nothing cached by function);
- "own modules from source": the import and the first lower again, with the library's own
  package compiled from source in every child (its bytecode left out of the prefix, none
  written) while numpy, ml_dtypes and jaxlib still load from bytecode: a checkout run with
  PYTHONDONTWRITEBYTECODE=1, where each module loaded costs its compile;
- "first grad trace": ``make_jaxpr(grad(f))(x)`` of a fresh chain of 200 elementwise ops
  (sin, mul, add) in a fresh process after the import; "steady" is the best of 10 more,
  each on a fresh chain.

The script itself imports neither library: each child imports only the one it measures.
JAX is used when JAX_PYTHON names a Python that has it (or this Python has it).
PLAX_BASELINE_SRC=<dir> adds a column for another plax checkout's ``src`` (for instance a
git worktree of an older commit), run by this Python with that directory first on
PYTHONPATH, so a slowdown can be placed against the version before it. The machines are
noisy: compare figures from one run only.

    JAX_PYTHON=/tmp/jaxenv/bin/python .venv/bin/python bench/bench_tracing.py [ROUNDS]

    git worktree add /tmp/wave1 3ed67f1    # wave 1: the end of the autodiff and vmap work
    PLAX_BASELINE_SRC=/tmp/wave1/src JAX_PYTHON=... .venv/bin/python bench/bench_tracing.py
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PRELUDE, print_table  # noqa: E402

# Times `import <name>` alone, then loads the rest of the API untimed (the same names the
# harness prelude measures with), then runs one row.
CHILD_HEAD = r'''
import time
t = time.perf_counter()
import %(name)s as lib
import_ms = (time.perf_counter() - t) * 1e3
import %(name)s.numpy as jnp
from %(name)s import lax
'''

ROWS = {
    "lower": r'''
params, x, y = mlp_data([32] * 8, batch=16)  # 7 layers

def make_step():
    def step(params, x, y, lr=0.01):
        loss, grads = lib.value_and_grad(mlp_loss)(params, x, y)
        return lib.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss
    return step

t = time.perf_counter()
lib.jit(make_step()).lower(params, x, y)
first = (time.perf_counter() - t) * 1e3
steady = best_single(make_step, lambda s: lib.jit(s).lower(params, x, y), 10) / 1e3
print(json.dumps({"import (ms)": import_ms,
                  "first jit(step).lower, 7-layer MLP (ms)": first,
                  "steady jit(step).lower, fresh closure (ms)": steady}))
''',
    "grad": r'''
x0 = np.float32(0.3)
t = time.perf_counter()
lib.make_jaxpr(lib.grad(chain_function(200)))(x0)
first = (time.perf_counter() - t) * 1e3
steady = best_single(lambda: chain_function(200),
                     lambda f: lib.make_jaxpr(lib.grad(f))(x0), 10) / 1e3
print(json.dumps({"import (ms)": import_ms,
                  "first grad trace, 200-op chain (ms)": first,
                  "steady grad trace, fresh chain (ms)": steady}))
''',
}

# Rows measured again with the library's own modules compiled from source, and their names.
FROM_SOURCE = {"import (ms)": "import, own modules from source (ms)",
               "first jit(step).lower, 7-layer MLP (ms)":
                   "first jit(step).lower, own modules from source (ms)"}

ORDER = ["import (ms)", "import, own modules from source (ms)",
         "first jit(step).lower, 7-layer MLP (ms)",
         "first jit(step).lower, own modules from source (ms)",
         "steady jit(step).lower, fresh closure (ms)",
         "first grad trace, 200-op chain (ms)", "steady grad trace, fresh chain (ms)"]


def jax_python() -> str | None:
    """A Python interpreter that has JAX, found without importing it here."""
    if os.environ.get("JAX_PYTHON"):
        return os.environ["JAX_PYTHON"]
    return sys.executable if importlib.util.find_spec("jax") else None


def targets(pycache: str) -> dict:
    """label -> (python, module name, environment) of every library measured, all reading
    and writing bytecode under the prefix `pycache`."""
    base = dict(os.environ, PYTHONPYCACHEPREFIX=pycache)
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    found = {"plax": (sys.executable, "plax", base)}
    baseline = os.environ.get("PLAX_BASELINE_SRC")
    if baseline:
        path = os.pathsep.join(p for p in (baseline, base.get("PYTHONPATH")) if p)
        found["baseline"] = (sys.executable, "plax", dict(base, PYTHONPATH=path))
    python = jax_python()
    if python:
        found["jax"] = (python, "jax", dict(base, JAX_PLATFORMS="cpu"))
    return found


def without_own_bytecode(env: dict, package_dir: str, pycache: str) -> dict:
    """`env` reading bytecode from a copy of its prefix that lacks `package_dir`'s, and
    writing none: that package is compiled from source in every child."""
    os.makedirs(pycache, exist_ok=True)
    shutil.copytree(env["PYTHONPYCACHEPREFIX"], pycache, dirs_exist_ok=True)
    shutil.rmtree(os.path.join(pycache, package_dir.lstrip(os.sep)), ignore_errors=True)
    return dict(env, PYTHONPYCACHEPREFIX=pycache, PYTHONDONTWRITEBYTECODE="1")


def run_child(python: str, name: str, env: dict, row: str) -> dict:
    """One fresh process measuring one row; its figures."""
    code = CHILD_HEAD % {"name": name} + PRELUDE + ROWS[row]
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} ({python}) failed on row {row!r}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def where_from(python: str, name: str, env: dict) -> str:
    """The file the child imports the library from (to show which checkout a column is)."""
    code = f"import {name}; print({name}.__file__)"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def measure(rounds: int) -> dict:
    """label -> {row: best ms} over `rounds` alternating rounds of fresh processes."""
    with tempfile.TemporaryDirectory() as pycache, tempfile.TemporaryDirectory() as scratch:
        libs = targets(pycache)
        where = {}
        for label, (python, name, env) in libs.items():
            where[label] = where_from(python, name, env)
            print(f"{label}: {where[label]}")
        best = {label: {} for label in libs}
        source_env = {}
        for i in range(rounds + 1):  # round 0 writes the bytecode of every module the rows load
            for row in ROWS:
                for label, (python, name, env) in libs.items():
                    for k, v in run_child(python, name, env, row).items():
                        if i:
                            best[label][k] = min(v, best[label].get(k, v))
            for label, (python, name, env) in libs.items():
                if label not in source_env:  # after round 0: the prefix is full
                    source_env[label] = without_own_bytecode(
                        env, os.path.dirname(where[label]), os.path.join(scratch, label))
                if not i:
                    continue
                for k, v in run_child(python, name, source_env[label], "lower").items():
                    if k in FROM_SOURCE:
                        k = FROM_SOURCE[k]
                        best[label][k] = min(v, best[label].get(k, v))
    return {label: {k: got[k] for k in ORDER} for label, got in best.items()}


def print_with_baseline(now: dict, then: dict, jax: dict | None) -> None:
    """plax | baseline | plax/baseline (| JAX | plax/JAX) rows."""
    width = max(len(k) for k in now)
    header = f"{'benchmark':<{width}}  {'plax':>8}  {'baseline':>8}  {'/base':>6}"
    header += f"  {'jax':>8}  {'plax/jax':>8}" if jax else ""
    print(header)
    print("-" * len(header))
    for k, v in now.items():
        line = f"{k:<{width}}  {v:>8.1f}  {then[k]:>8.1f}  {v / then[k]:>6.2f}"
        if jax:
            line += f"  {jax[k]:>8.1f}  {v / jax[k]:>8.2f}"
        print(line)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    got = measure(rounds)
    print()
    if "baseline" in got:
        print_with_baseline(got["plax"], got["baseline"], got.get("jax"))
    else:
        print_table(got["plax"], got.get("jax"))
    print(f"\nBest of {rounds} alternating rounds of fresh processes per row "
          f"({2 * rounds} for the import from bytecode).")
    print("Targets (issue 31): the rows from bytecode (what an install runs) no slower than at "
          "wave 1 (commit 3ed67f1, measured with PLAX_BASELINE_SRC); tracing rows no slower than "
          "JAX. The rows from source also show the compile cost of the code the import loads.")
    if "jax" not in got:
        print("\n(JAX not found: set JAX_PYTHON to a Python with jax installed to compare.)")


if __name__ == "__main__":
    main()
