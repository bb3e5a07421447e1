"""A data-parallel least-squares training step, shared by the two-process program and the
single-process run it is compared with (bit for bit).

The data are small integers and the learning rate a power of two, and two steps keep every
value within float32's 24 bits, so every partial sum the cross-device reduction adds is
exact: gloo's order of adding (across processes) and XLA's in-process order give the same
bits, as any order would. (With arbitrary floats the two orders differ in the last bit.)"""
import numpy as np

FEATURES, ROWS, STEPS, LR = 4, 16, 2, 2.0 ** -6


def data():
    """The whole batch: inputs (ROWS, FEATURES) and targets (ROWS,)."""
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, (ROWS, FEATURES)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 1.0, 3.0], np.float32)).astype(np.float32)
    return x, y


def train(jax, x, y, replicated):
    """STEPS steps of gradient descent on the mean squared error from zero parameters
    (laid out ``replicated``) over the batch ``x``, ``y`` (laid out as given)."""
    jnp = jax.numpy

    def loss(w, x, y):
        return jnp.mean((x @ w - y) ** 2)

    @jax.jit
    def step(w, x, y):
        return w - LR * jax.grad(loss)(w, x, y)

    w = jax.device_put(np.zeros(FEATURES, np.float32), replicated)
    for _ in range(STEPS):
        w = step(w, x, y)
    return w
