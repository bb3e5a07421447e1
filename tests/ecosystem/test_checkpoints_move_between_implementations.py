"""A training state (sharded parameters, optax state, step, RNG key) and a grain iterator's
position, checkpointed with orbax-checkpoint, move between real JAX and plax.

tests/data/jax_0.10.2_orbax_grain/checkpoint was saved by real JAX 0.10.2 on 8 CPU devices
(``programs/orbax_grain_state.jaxpy save``), and jax_restore.out is what real JAX printed
restoring it (``... restore``): onto the saved sharding and another, then one more training
step and the iterator's next batch. Run with ``jax`` resolving to plax, restoring the same
checkpoint must print the same, and a checkpoint plax saved must restore to the same state
(its three training steps agree with JAX's to float rounding). The other direction (JAX
restoring plax's checkpoint) was checked by hand with real JAX: it prints what plax does."""
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np

PROGRAM = pathlib.Path(__file__).parent / "programs" / "orbax_grain_state.jaxpy"
DATA = pathlib.Path(__file__).parents[1] / "data" / "jax_0.10.2_orbax_grain"


def _run(*args) -> str:
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES="8")
    out = subprocess.run([sys.executable, "-m", "plax", str(PROGRAM), *args],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _numbers(text: str) -> np.ndarray:
    return np.array([float(t) for t in
                     text.replace("[", " ").replace("]", " ").replace(",", " ").split()
                     if t.lstrip("-").replace(".", "", 1).isdigit()])


def test_plax_restores_what_jax_saved_as_jax_does(tmp_path):
    shutil.copytree(DATA / "checkpoint", tmp_path / "ckpt")  # (a restore may write there)
    assert _run("restore", str(tmp_path / "ckpt")) == (DATA / "jax_restore.out").read_text()


def test_what_plax_saves_restores_to_jaxs_state(tmp_path):
    _run("save", str(tmp_path / "ckpt"))
    mine = _run("restore", str(tmp_path / "ckpt"))
    theirs = (DATA / "jax_restore.out").read_text()
    assert [ln.split("]")[0] for ln in mine.splitlines()[::5]] == \
        [ln.split("]")[0] for ln in theirs.splitlines()[::5]]  # shardings, step, key
    assert _numbers(theirs).size == _numbers(mine).size == 72
    np.testing.assert_allclose(_numbers(mine), _numbers(theirs), rtol=1e-5, atol=1e-6)
