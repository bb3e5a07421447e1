"""A collective matmul with shard_map: the all-gather of the left operand overlapped with
the matmul, one ppermute of a block per step (as in ring all-gather matmuls).

x (M, K) is split by rows over the devices, w (K, N) by columns; each device computes its
columns of x @ w, multiplying the row block it holds while it passes the block on to its
neighbour. The result agrees with the plain jit of x @ w.

    PLAX_NUM_CPU_DEVICES=8 python examples/shard_map_collective_matmul.py
"""
import os

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")

import numpy as np  # noqa: E402

import plax  # noqa: E402
import plax.numpy as jnp  # noqa: E402
from plax import lax  # noqa: E402
from plax.sharding import Mesh, PartitionSpec as P  # noqa: E402


def collective_matmul(x_block, w_block):
    """This device's columns of x @ w, from its row block of x and column block of w."""
    n = lax.axis_size("i")
    me = lax.axis_index("i")
    rows = x_block.shape[0]
    ring = [(j, (j + 1) % n) for j in range(n)]
    out = lax.pcast(jnp.zeros((rows * n, w_block.shape[1]), x_block.dtype), "i", to="varying")

    def step(t, carry):
        out, block = carry
        owner = (me - t) % n  # the device whose rows ``block`` is, after t hops
        out = lax.dynamic_update_slice(out, block @ w_block, (owner * rows, 0))
        return out, lax.ppermute(block, "i", ring)  # pass it on while the next one computes

    out, _ = lax.fori_loop(0, n, step, (out, x_block))
    return out


def main(m=64, k=32, n=48, seed=0):
    mesh = Mesh(np.array(plax.devices()[:8]), ("i",))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, k)).astype(np.float32)
    w = rng.normal(size=(k, n)).astype(np.float32)
    f = plax.jit(plax.shard_map(collective_matmul, mesh=mesh, in_specs=(P("i"), P(None, "i")),
                                out_specs=P(None, "i")))
    out = f(x, w)
    plain = plax.jit(lambda a, b: a @ b)(x, w)
    np.testing.assert_allclose(np.asarray(out), np.asarray(plain), rtol=1e-4, atol=1e-4)
    return out, plain


if __name__ == "__main__":
    out, plain = main()
    print("collective matmul over 8 devices:", out.shape, "max |difference| from x @ w:",
          float(np.abs(np.asarray(out) - np.asarray(plain)).max()))
