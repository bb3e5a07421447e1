"""A fast subset of optax's own test suite, run with ``jax`` resolving to plax (the whole
suites of optax, chex, flax, ... are ``make ecosystem``'s). The files chosen pass in full on
real JAX 0.10.2; each must pass in full here too."""
import importlib.util
import os
import pathlib
import subprocess
import sys

# Found without importing it: its ``import jax`` resolves to plax only under ``python -m plax``.
OPTAX = pathlib.Path(importlib.util.find_spec("optax").origin).parent
FILES = ["_src/transform_test.py", "_src/update_test.py", "_src/base_test.py",
         "transforms/_masking_test.py", "_src/numerics_test.py"]


def test_optax_subset_passes():
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES="1")
    out = subprocess.run([sys.executable, "-m", "plax", "-m", "pytest", "-q", "-p",
                          "no:cacheprovider", *(str(OPTAX / f) for f in FILES)],
                         capture_output=True, text=True, env=env, timeout=900,
                         cwd=OPTAX.parent)
    last = out.stdout.strip().splitlines()[-1]
    assert out.returncode == 0, out.stdout[-4000:]
    assert " passed" in last and "failed" not in last, last
