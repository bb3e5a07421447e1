"""examples/keras_on_plax.py: Keras 3 (KERAS_BACKEND=jax) run with ``jax`` resolving to plax
trains, saves and reloads a convnet as it does on real JAX 0.10.2, on one device and spread
over 8 by keras.distribution.ModelParallel."""
import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "examples", "keras_on_plax.py")
# What the example printed under real JAX 0.10.2 (keras 3.15.1, a scratch venv), 3 epochs, on
# one CPU device and with --model-parallel on 8 (the same figures)
JAX_LOSSES = [1.3403, 1.1767, 0.8790]
JAX_ACCURACY = 0.926


@pytest.mark.parametrize("devices,flags", [("1", []), ("8", ["--model-parallel"])])
def test_the_keras_example_trains_saves_and_reloads_as_on_jax(devices, flags):
    out = subprocess.run([sys.executable, "-m", "plax", EXAMPLE, "--epochs", "3", *flags],
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PLAX_NUM_CPU_DEVICES=devices))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    losses = [float(line.split()[-1]) for line in lines if line.startswith("epoch")]
    assert losses == JAX_LOSSES, lines
    assert lines[-2] == f"test accuracy of the loaded model: {JAX_ACCURACY:.3f}", lines
    assert lines[-1].endswith("predictions: 0.0e+00"), lines
    if flags:
        assert "classifier kernel: P('model', None) over 8 devices" in lines, lines
