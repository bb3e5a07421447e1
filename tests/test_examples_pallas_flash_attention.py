"""examples/pallas_flash_attention.py: its two kernels' gradients match the reference
attention's, and a few SGD steps through them lower the loss (small sizes, interpret mode)."""
import importlib.util
import os

import pytest

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "examples", "pallas_flash_attention.py")


@pytest.mark.slow  # (~3 s: it compiles the model's gradients twice and a training step)
def test_training_through_the_kernels_lowers_the_loss():
    spec = importlib.util.spec_from_file_location("pallas_flash_attention_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    lines = []
    error, losses = example.train(steps=6, lr=5.0, vocab=16, seq=64, d_model=32, heads=2,
                                  batch=4, block=32, log=lines.append)
    assert error < 1e-5
    assert losses[-1] < losses[0] - 0.01, losses
    assert lines[0].startswith("kernel gradients vs the reference's") and len(lines) == 7
