"""Programs written with libraries built on JAX (equinox, flax.linen + optax, diffrax,
numpyro, orbax-checkpoint), run with ``jax`` resolving to plax, give real JAX 0.10.2's numbers.

The expected numbers were printed by the same programs (tests/ecosystem/programs/*.jaxpy:
JAX code, run only with jax -> plax) under real JAX 0.10.2 in a scratch venv; each program
prints its figures with 7 decimals.
``make test`` installs the libraries with ``--no-deps`` (ecosystem/fast-libraries.txt), so
their ``import jax`` can only be plax. ``make ecosystem`` runs the libraries' own suites."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

PROGRAMS = pathlib.Path(__file__).parent / "programs"

JAX_OUTPUT = {
    # An equinox MLP trained 20 steps with filter_jit / filter_value_and_grad: losses.
    "equinox_mlp.jaxpy": [[0.6581256, 0.4945076, 0.4324901, 0.3723024, 0.3156194, 0.2781745]],
    # flax.linen MLP and small CNN trained 50 steps with optax.adam: losses.
    "flax_linen_train.jaxpy": [
        [1.4007089, 0.6350363, 0.3230977, 0.1629599, 0.0845286, 0.0499742],
        [1.3689984, 0.4516791, 0.0777849, 0.0157776, 0.0059993, 0.0036752]],
    # A diffrax Tsit5 solve with a PID controller (jitted), and its gradient.
    "diffrax_ode.jaxpy": [
        [1.0, 2.0, 0.8138850, 1.5185732, 0.8625668, 1.3591521, 1.0059427, 1.3558804,
         1.1185782, 1.3651751],
        [-2.5596752]],
    # numpyro NUTS (fixed key, 100 warmup + 200 samples): posterior means of a, b, s, and
    # samples 0, 50 and 199 of a.
    "numpyro_nuts.jaxpy": [[0.5006132, 1.9843572, 0.0761957], [0.4856678, 0.4964451, 0.4963522]],
    # An optax loop on 8 devices checkpointed by orbax's CheckpointManager, stopped at step 13,
    # resumed from step 10: losses of the straight run and of the resumed one; then the step
    # resumed from, resumed losses == straight (1), final parameters identical (1), a restore
    # onto a replicated sharding (1: True), the final step.
    "orbax_checkpoint_resume.jaxpy": [
        [1.1648206, 0.8055677, 0.7653700, 0.7460862, 0.7288014],
        [1.1648206, 0.8055677, 0.7653700, 0.7460862, 0.7288014],
        [10, 1, 1, 1, 20]],
}
DEVICES = {"orbax_checkpoint_resume.jaxpy": "8"}  # (the others run on one device)


# The longer ones (10-15 s each) run in `make slow`; `make test` runs equinox's and orbax's.
SLOW = {"diffrax_ode.jaxpy", "flax_linen_train.jaxpy", "numpyro_nuts.jaxpy"}


@pytest.mark.parametrize("program", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW else p
                                     for p in sorted(JAX_OUTPUT)])
def test_program_matches_jax(program):
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES=DEVICES.get(program, "1"))
    out = subprocess.run([sys.executable, "-m", "plax", str(PROGRAMS / program)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = [[float(v == "True") if v in ("True", "False") else float(v) for v in line.split()]
           for line in out.stdout.strip().splitlines()]
    assert len(got) == len(JAX_OUTPUT[program])
    for line, want in zip(got, JAX_OUTPUT[program]):
        np.testing.assert_allclose(line, want, rtol=1e-5, atol=2e-7)
