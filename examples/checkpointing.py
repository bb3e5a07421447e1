"""Checkpointing a training run with orbax-checkpoint on plax: stop, resume, same loss.

An optax training loop on 8 CPU devices (the weights sharded over a mesh) saves its whole
state with orbax's CheckpointManager every 10 steps, asynchronously. The run is stopped at
step 37, a new manager resumes it from the latest checkpoint (step 30), and it trains on to
step 60. Its final loss equals an uninterrupted run's, bit for bit.

    python examples/checkpointing.py        (needs: pip install orbax-checkpoint optax)
"""
import os
import sys
import tempfile

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")
import plax  # noqa: E402

plax.install_as_jax()  # orbax and optax import jax: it is plax here
try:
    import optax  # noqa: E402
    import orbax.checkpoint as ocp  # noqa: E402
except ImportError as e:
    print(f"This example needs orbax-checkpoint and optax ({e.name} is missing): "
          "pip install orbax-checkpoint optax  (make demo's venv has them: they come with "
          "`make test`'s libraries, ecosystem/fast-libraries.txt).")
    sys.exit(0)

import numpy as np  # noqa: E402
import plax.numpy as jnp  # noqa: E402
from plax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

STEPS, SAVE_EVERY, STOP_AT = 60, 10, 37
mesh = plax.make_mesh((2, 4), ("data", "model"))
rng = np.random.default_rng(0)
xs = plax.device_put(rng.normal(size=(128, 32)).astype(np.float32), NamedSharding(mesh, P("data")))
ys = plax.device_put(rng.normal(size=(128, 16)).astype(np.float32), NamedSharding(mesh, P("data")))
optimizer = optax.adamw(0.02)


def initial_state():
    """Weights sharded over 'model', everything else replicated over the mesh."""
    w = np.random.default_rng(1).normal(size=(32, 16)).astype(np.float32) * 0.1
    params = {"w": plax.device_put(w, NamedSharding(mesh, P(None, "model"))), "b": jnp.zeros(16)}
    state = {"params": params, "opt": optimizer.init(params), "step": jnp.int32(0)}
    return plax.tree.map(lambda a: a if isinstance(a.sharding, NamedSharding) else
                         plax.device_put(a, NamedSharding(mesh, P())), state)


@plax.jit
def train_step(state):
    def loss_fn(params):
        return jnp.mean((jnp.tanh(xs @ params["w"] + params["b"]) - ys) ** 2)
    loss, grads = plax.value_and_grad(loss_fn)(state["params"])
    updates, opt = optimizer.update(grads, state["opt"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates), "opt": opt,
            "step": state["step"] + 1}, loss


def main():
    state = initial_state()
    for _ in range(STEPS):
        state, loss = train_step(state)
    uninterrupted = float(loss)

    directory = tempfile.mkdtemp(prefix="plax-checkpoints-")
    options = ocp.CheckpointManagerOptions(save_interval_steps=SAVE_EVERY, max_to_keep=2)
    state = initial_state()
    with ocp.CheckpointManager(directory, options=options) as manager:
        for _ in range(STOP_AT):
            state, loss = train_step(state)
            manager.save(int(state["step"]), args=ocp.args.StandardSave(state))  # async
        print(f"stopped at step {int(state['step'])} (loss {float(loss):.6f}); checkpoints: "
              f"{sorted(manager.all_steps())}")
    del state

    with ocp.CheckpointManager(directory, options=options) as manager:
        latest = manager.latest_step()
        abstract = plax.tree.map(ocp.utils.to_shape_dtype_struct, initial_state())
        state = manager.restore(latest, args=ocp.args.StandardRestore(abstract))
    print(f"resumed from step {int(state['step'])}; w laid out as "
          f"{state['params']['w'].sharding.spec}")
    while int(state["step"]) < STEPS:
        state, loss = train_step(state)
    print(f"final loss after {STEPS} steps: resumed {float(loss):.7f}, uninterrupted "
          f"{uninterrupted:.7f}, identical: {float(loss) == uninterrupted}")


if __name__ == "__main__":
    main()
