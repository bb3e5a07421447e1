"""The shard_map examples in examples/ run, and agree with their plain jit versions (each
example asserts it)."""
import importlib.util
import pathlib

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_collective_matmul_example():
    out, plain = load("shard_map_collective_matmul").main(m=32, k=16, n=24)
    assert out.shape == (32, 24)
    np.testing.assert_allclose(np.asarray(out), np.asarray(plain), rtol=1e-4, atol=1e-4)


def test_data_parallel_example():
    losses = load("shard_map_data_parallel").main(steps=2)
    for sharded, plain in losses:
        np.testing.assert_allclose(sharded, plain, rtol=1e-5)
    assert losses[1][0] < losses[0][0]
