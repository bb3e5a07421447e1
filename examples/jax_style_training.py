"""A small JAX program, written for JAX and run unchanged on plax: `python -m plax` this file.

It fits a two-layer MLP to a noisy sine with plain gradient descent: parameters
as a pytree, a jitted training step built from value_and_grad, per-example
gradient norms with vmap, and results read back to NumPy.
"""
from functools import partial

import numpy as np

import jax
import jax.numpy as jnp
from jax import tree_util
from jax.flatten_util import ravel_pytree


def init_params(rng, sizes):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((n_in, n_out)).astype(np.float32) / np.sqrt(n_in)
        params.append({"w": jnp.asarray(w), "b": jnp.zeros(n_out)})
    return params


def predict(params, x):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


def loss(params, x, y):
    return jnp.mean((predict(params, x) - y) ** 2)


@partial(jax.jit, static_argnames="lr")
def train_step(params, x, y, lr=0.05):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    params = tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
    return params, value


@jax.jit
def per_example_grad_norms(params, x, y):
    def one(xi, yi):
        g = jax.grad(loss)(params, xi[None], yi[None])
        return jnp.sqrt(sum(jnp.sum(leaf ** 2) for leaf in jax.tree_util.tree_leaves(g)))
    return jax.vmap(one)(x, y)


def main():
    rng = np.random.default_rng(0)
    x = np.linspace(-3, 3, 128, dtype=np.float32)[:, None]
    y = np.sin(x) + 0.05 * rng.standard_normal(x.shape).astype(np.float32)
    params = init_params(rng, [1, 32, 32, 1])
    print(f"jax {jax.__version__} on {jax.default_backend()}: {jax.device_count()} device(s)")
    first = None
    for step in range(300):
        params, value = train_step(params, x, y)
        first = float(value) if first is None else first
        if step % 100 == 0:
            print(f"step {step:3d}  loss {float(value):.4f}")
    final = float(loss(params, x, y))
    print(f"loss {first:.4f} -> {final:.4f}")
    norms = np.asarray(per_example_grad_norms(params, x, y))
    print(f"per-example gradient norms: shape {norms.shape}, mean {norms.mean():.4f}")
    flat, unravel = ravel_pytree(params)
    print(f"{flat.size} parameters; round trip exact: "
          f"{all(np.array_equal(a, b) for a, b in zip(tree_util.tree_leaves(unravel(flat)), tree_util.tree_leaves(params)))}")
    assert final < 0.1 * first, (first, final)


if __name__ == "__main__":
    main()
