import jax, jax.numpy as jnp, numpy as np
import flax.linen as nn
import optax

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.tanh(nn.Dense(32)(x))
        return nn.Dense(4)(x)

class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        return nn.Dense(4)(x)

def train(model, x, labels, steps=50):
    params = model.init(jax.random.key(1), x)
    opt = optax.adam(1e-2)
    state = opt.init(params)

    @jax.jit
    def step(params, state):
        def loss(p):
            logits = model.apply(p, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        l, g = jax.value_and_grad(loss)(params)
        updates, state = opt.update(g, state, params)
        return optax.apply_updates(params, updates), state, l

    losses = []
    for _ in range(steps):
        params, state, l = step(params, state)
        losses.append(float(l))
    return losses

k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
labels = jax.random.randint(k3, (16,), 0, 4)
mlp = train(MLP(), jax.random.normal(k1, (16, 8)), labels)
cnn = train(CNN(), jax.random.normal(k2, (16, 8, 8, 1)), labels)
print(" ".join(f"{v:.7f}" for v in mlp[::10] + [mlp[-1]]))
print(" ".join(f"{v:.7f}" for v in cnn[::10] + [cnn[-1]]))
