"""Import time (issue 18): ``import plax, plax.numpy`` next to ``import jax, jax.numpy``.

Every figure is the best, in ms, of several fresh child processes timing the import
statement alone (interpreter start-up not counted):

- "import, bytecode cached": the usual case of an installed package; both libraries read
  compiled bytecode from a scratch ``PYTHONPYCACHEPREFIX`` filled by a first, untimed run;
- "import, compiled from source": no bytecode anywhere (an empty prefix, nothing written),
  so each child compiles every module it loads;
- "shared: numpy, jaxlib": what both libraries import from others (bytecode cached), and
  "own part": the first row less this one (JAX's includes ml_dtypes, which plax imports on
  first need);
- "import and a first result": the import and ``numpy.ones(3).block_until_ready()``, which
  starts the CPU client. plax imports ml_dtypes (bfloat16, the float8s) on first need, and
  jaxlib needs it for its first array: this row pays it in both libraries.

    JAX_PYTHON=/tmp/jaxvenv/bin/python .venv/bin/python bench/bench_import.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
import os, subprocess, sys, tempfile
TIMED = "import time; t = time.perf_counter(); %s; print(time.perf_counter() - t)"

def best_ms(stmt, env, n=7):
    out = []
    for _ in range(n):
        proc = subprocess.run([sys.executable, "-c", TIMED % stmt], capture_output=True,
                              text=True, env=env, check=True)
        out.append(float(proc.stdout.split()[-1]))
    return min(out) * 1e3

name = lib.__name__
mine = f"import {name}, {name}.numpy"
shared = "import numpy, jaxlib.xla_client"
with tempfile.TemporaryDirectory() as cached, tempfile.TemporaryDirectory() as empty:
    warm = dict(os.environ, PYTHONPYCACHEPREFIX=cached)
    warm.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", mine], env=warm, check=True)  # writes the bytecode
    cold = dict(os.environ, PYTHONPYCACHEPREFIX=empty, PYTHONDONTWRITEBYTECODE="1")
    with_pyc = best_ms(mine, warm)
    first = best_ms(mine + f"; {name}.numpy.ones(3).block_until_ready()", warm)
    base = best_ms(shared, warm)
    print(json.dumps({
        "import, bytecode cached (ms)": with_pyc,
        "import, compiled from source (ms)": best_ms(mine, cold, n=4),
        "shared: numpy, jaxlib (ms)": base,
        "own part, bytecode cached (ms)": with_pyc - base,
        "import and a first result (ms)": first,
    }))
'''

if __name__ == "__main__":
    main(MEASURE, "Target (issue 18): plax's import at most 0.5x JAX's.")
