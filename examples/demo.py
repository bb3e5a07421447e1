"""The plax showcase: arrays on XLA, NumPy-style maths, and programs as jaxprs."""
import os

import numpy as np

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")  # eight virtual CPU devices for the mesh part
import plax  # noqa: E402
import plax.numpy as jnp  # noqa: E402
from plax import lax  # noqa: E402
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


def main():
    print(f"plax on {plax.default_backend()} with {plax.device_count()} device(s): {plax.devices()}")

    x = jnp.arange(5.0)
    y = jnp.sin(x) * 2 + 1
    print("x           =", x)
    print("sin(x)*2+1  =", y)
    print("NumPy check :", np.allclose(np.asarray(y), np.sin(np.arange(5.0)) * 2 + 1))

    a = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    print("a @ a.T     =", (a @ a.T).tolist())
    print("sum, max    =", float(a.sum()), float(a.max()))

    print("promotion   : int32 + 1.5 ->", (jnp.array([1, 2]) + 1.5).dtype,
          "| uint8 + int8 ->", (jnp.array([1], jnp.uint8) + jnp.array([1], jnp.int8)).dtype)

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    print("\nThe jaxpr of loss(w, x):")
    print(plax.make_jaxpr(loss)(jnp.ones((3, 2)), jnp.ones((4, 3))))
    print("\nloss =", float(loss(jnp.ones((3, 2)) * 0.1, jnp.ones((4, 3)))))
    print("lax.sort    =", lax.sort(jnp.array([3.0, 1.0, 2.0])).tolist())

    # jit: traced once per argument signature, compiled by XLA, then cached.
    @plax.jit
    def step(w, x):
        with plax.named_scope("layer"):
            h = jnp.tanh(x @ w)
        return h.sum(axis=0)

    w, xs = jnp.ones((3, 2)) * 0.5, jnp.arange(12.0).reshape(4, 3) / 10
    print("\njit(step)(w, x) =", step(w, xs).tolist())
    print("\nIts jaxpr:")
    print(step.trace(w, xs).jaxpr)
    print("\nThe StableHLO that XLA compiles:")
    print(step.lower(w, xs).as_text())
    print("A jitted call inside another trace is one pjit equation:")
    print(plax.make_jaxpr(lambda x: step(w, x) * 2)(xs))

    # grad composes with jit and with itself.
    def loss_fn(w, x):
        return jnp.mean(step(w, x) ** 2)

    g = plax.jit(plax.grad(loss_fn))(w, xs)
    print("\njit(grad(loss))(w, x) =", np.round(np.asarray(g, np.float64), 4).tolist())
    print("grad(grad(sin))(0.5) =", float(plax.grad(plax.grad(jnp.sin))(0.5)),
          "(-sin(0.5) =", round(-np.sin(0.5), 6), ")")

    # vmap: per-example gradients, and a collective over the named batch axis.
    per_example = plax.jit(plax.vmap(plax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)),
                                     in_axes=(None, 0)))(w, xs)
    print("\nper-example gradients, shape", per_example.shape)
    normalise = plax.vmap(lambda x: x / lax.psum(x, "batch"), axis_name="batch")
    print("vmap(x / psum(x, 'batch')) =", np.round(np.asarray(normalise(jnp.arange(1.0, 5.0)), np.float64),
                                                    3).tolist())
    print("jacrev(tanh)(x) via vmap of vjp, diagonal =",
          np.round(np.diag(np.asarray(plax.jacrev(jnp.tanh)(jnp.arange(3.0)), np.float64)), 4).tolist())

    # lax.scan: a whole SGD training loop as one compiled loop, the params (a pytree) as the carry.
    # The data come from plax.random and the initial weights from plax.nn.initializers: the
    # same key gives the same numbers as JAX's jax.random and jax.nn.initializers.
    k_data, k_noise, k_init = plax.random.split(plax.random.PRNGKey(0), 3)
    X = plax.random.normal(k_data, (64, 3))
    w_true = np.array([2.0, -1.0, 0.5], np.float32)
    Y = X @ w_true + 0.3 + 0.1 * plax.random.normal(k_noise, (64,))

    def mse(params, X, Y):
        return jnp.mean((X @ params["w"] + params["b"] - Y) ** 2)

    @plax.jit
    def train(params, X, Y):
        def sgd_step(params, _):
            loss, grads = plax.value_and_grad(mse)(params, X, Y)
            return plax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss
        return lax.scan(sgd_step, params, None, length=200)

    w0 = plax.nn.initializers.lecun_normal()(k_init, (3, 1))[:, 0]  # fan-in scaled weights
    params0 = {"w": w0, "b": plax.nn.initializers.zeros(k_init, ())}
    fitted, losses = train(params0, X, Y)
    print("\nSGD, 200 steps in one lax.scan under jit: loss", round(float(mse(params0, X, Y)), 4),
          "->", round(float(mse(fitted, X, Y)), 4), f"({losses.shape[0]} per-step losses returned)")
    print("fitted w, b =", np.round(np.asarray(fitted["w"], np.float64), 3).tolist(),
          round(float(fitted["b"]), 3), "(true:", w_true.tolist(), 0.3, ")")

    if plax.device_count() >= 8:
        sharded_demo()


def sharded_demo():
    """An array laid out over a 2x4 mesh, and a data-parallel training step XLA partitions."""
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("data", "model"))
    x = plax.device_put(np.arange(64.0, dtype=np.float32).reshape(8, 8),
                        NamedSharding(mesh, P("data", "model")))
    print("\nAn 8x8 array laid out over a 2x4 mesh, P('data', 'model'):")
    plax.debug.visualize_array_sharding(x)
    print("sharding of jit(sin)(x):", plax.jit(jnp.sin)(x).sharding.spec,
          "| of x.sum(0):", plax.jit(lambda x: x.sum(0))(x).sharding.spec)

    # Data parallel: the batch split over every device, the parameters replicated. XLA's
    # partitioner adds the all-reduce of the gradients.
    key = plax.random.key(1)
    k_x, k_w = plax.random.split(key)
    batch = NamedSharding(mesh, P(("data", "model")))
    replicated = NamedSharding(mesh, P())
    X = plax.device_put(plax.random.normal(k_x, (256, 16)), batch)
    Y = plax.device_put(jnp.sin(X).sum(axis=1, keepdims=True), batch)
    params = plax.device_put({"w": plax.nn.initializers.glorot_normal()(k_w, (16, 1)),
                              "b": jnp.zeros(1)}, replicated)

    def loss(params, X, Y):
        return jnp.mean((X @ params["w"] + params["b"] - Y) ** 2)

    @plax.jit
    def dp_step(params, X, Y):
        value, grads = plax.value_and_grad(loss)(params, X, Y)
        return plax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value

    losses = []
    for _ in range(5):
        params, value = dp_step(params, X, Y)
        losses.append(round(float(value), 4))
    print("\ndata-parallel SGD on 8 devices, losses:", losses,
          "| params stay", params["w"].sharding.spec)
    print("the communication XLA inserted into dp_step:")
    plax.debug.explain_sharding(dp_step, params, X, Y)

    # Explicit axes (make_mesh's default): the sharding is part of the type, and
    # primitives propagate it as they trace.
    explicit = plax.make_mesh((2, 4), ("data", "model"))
    with plax.set_mesh(explicit):
        xs = plax.device_put(np.ones((8, 16), np.float32), P("data"))
        ws = plax.device_put(np.ones((16, 32), np.float32), P(None, "model"))
        print("\nexplicit sharding: types", plax.typeof(xs), "@", plax.typeof(ws), "->",
              plax.typeof(xs @ ws), "| resharded:",
              plax.typeof(plax.sharding.reshard(xs, P(None, "model"))))


if __name__ == "__main__":
    main()
