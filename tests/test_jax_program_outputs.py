"""JAX programs whose whole output, run on plax through `python -m plax`, equals real JAX's.

Each ``tests/jax_programs/<name>.jaxpy`` that has an ``expected/<name>.out`` is run
unchanged with ``jax`` resolving to plax, on 8 CPU devices; its stdout must equal the
file, which holds what real JAX 0.10.2 printed for the same program (see the README
in ``tests/jax_programs/`` for how to make one). Programs print rounded numbers, so
the comparison is exact.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PROGRAMS = os.path.join(HERE, "jax_programs")
EXPECTED = os.path.join(PROGRAMS, "expected")

NAMES = sorted(f[:-len(".out")] for f in os.listdir(EXPECTED) if f.endswith(".out"))
# The longer programs (each 5-20 s): their features have unit tests of their own, so they run
# in `make slow`; `make test` runs the others.
SLOW = {"custom_pytree_nodes", "custom_transformation_rules", "explicit_sharding_training",
        "export_round_trip", "host_reads_free_arrays", "nested_checkpoints",
        "shard_map_global_mesh", "training_cookbook"}


def run_under_plax(name, tmp_path, devices="8"):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src")
    env["PLAX_NUM_CPU_DEVICES"] = devices
    env.pop("XLA_FLAGS", None)
    script = os.path.join(PROGRAMS, name + ".jaxpy")
    return subprocess.run([sys.executable, "-m", "plax", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in NAMES])
def test_program_prints_what_real_jax_prints(name, tmp_path):
    proc = run_under_plax(name, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(EXPECTED, name + ".out")) as f:
        want = f.read()
    assert proc.stdout.splitlines() == want.splitlines()


def test_every_expected_output_has_its_program():
    assert NAMES, "no expected outputs found"
    assert SLOW <= set(NAMES), SLOW - set(NAMES)
    for name in NAMES:
        assert os.path.exists(os.path.join(PROGRAMS, name + ".jaxpy")), name
