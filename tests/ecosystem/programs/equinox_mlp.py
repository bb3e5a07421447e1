import jax, jax.numpy as jnp, numpy as np
import equinox as eqx

key = jax.random.key(0)
mkey, dkey = jax.random.split(key)
model = eqx.nn.MLP(in_size=3, out_size=1, width_size=16, depth=2, key=mkey)
x = jax.random.normal(dkey, (32, 3))
y = jnp.sin(x.sum(axis=1, keepdims=True))

@eqx.filter_jit
def step(model, x, y):
    def loss(m):
        return jnp.mean((jax.vmap(m)(x) - y) ** 2)
    l, g = eqx.filter_value_and_grad(loss)(model)
    model = eqx.apply_updates(model, jax.tree_util.tree_map(lambda d: -0.1 * d, g))
    return model, l

losses = []
for _ in range(20):
    model, l = step(model, x, y)
    losses.append(float(l))
print(" ".join(f"{v:.7f}" for v in losses[::4] + [losses[-1]]))
