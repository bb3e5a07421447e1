"""A data-parallel training step written with shard_map: the batch split over the devices,
the parameters replicated; each device differentiates its share of the loss and pmean
averages the gradients. The step agrees with the plain jit of the same step on the whole
batch.

    PLAX_NUM_CPU_DEVICES=8 python examples/shard_map_data_parallel.py
"""
import os

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")

import numpy as np  # noqa: E402

import plax  # noqa: E402
import plax.numpy as jnp  # noqa: E402
from plax import lax  # noqa: E402
from plax.sharding import Mesh, PartitionSpec as P  # noqa: E402


def loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] + params["b2"] - y) ** 2)


def sharded_step(params, x, y, lr=0.1):
    # The parameters are invariant over the devices, so the gradient of this device's loss
    # comes back summed over them (the transpose of the implicit pvary); dividing by the
    # number of devices gives the gradient of the mean loss over the whole batch.
    grads = plax.grad(loss)(params, x, y)
    grads = plax.tree.map(lambda g: g / lax.axis_size("batch"), grads)
    return plax.tree.map(lambda p, g: p - lr * g, params, grads), lax.pmean(loss(params, x, y),
                                                                           "batch")


def plain_step(params, x, y, lr=0.1):
    value, grads = plax.value_and_grad(loss)(params, x, y)
    return plax.tree.map(lambda p, g: p - lr * g, params, grads), value


def main(steps=3, seed=0):
    mesh = Mesh(np.array(plax.devices()[:8]), ("batch",))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    y = rng.normal(size=(64, 2)).astype(np.float32)
    params = {"w1": (rng.normal(size=(8, 16)) * 0.3).astype(np.float32),
              "b1": np.zeros(16, np.float32),
              "w2": (rng.normal(size=(16, 2)) * 0.3).astype(np.float32),
              "b2": np.zeros(2, np.float32)}
    step = plax.jit(plax.shard_map(sharded_step, mesh=mesh,
                                   in_specs=(P(), P("batch"), P("batch")), out_specs=(P(), P())))
    reference = plax.jit(plain_step)
    p_sharded, p_plain, losses = params, params, []
    for _ in range(steps):
        p_sharded, value = step(p_sharded, x, y)
        p_plain, ref_value = reference(p_plain, x, y)
        losses.append((float(value), float(ref_value)))
    for k in params:
        np.testing.assert_allclose(np.asarray(p_sharded[k]), np.asarray(p_plain[k]),
                                   rtol=1e-4, atol=1e-5)
    return losses


if __name__ == "__main__":
    for i, (a, b) in enumerate(main()):
        print(f"step {i}: shard_map loss {a:.5f}  plain jit loss {b:.5f}")
