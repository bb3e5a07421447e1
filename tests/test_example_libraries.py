"""plax.example_libraries (stax, optimizers), as jax.example_libraries.

Layer shapes and values are checked against NumPy references; initial parameters, a
trained MLP and every optimizer's first steps against numbers real JAX 0.10.2 computed
for the same keys and inputs (pasted below); schedules against their closed forms.
"""
import math

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random, tree_util
from plax.example_libraries import optimizers, stax
from plax.nn.initializers import normal
from test_drop_in import assert_ok, program, run_script  # tests/ is on sys.path (conftest.py)

RTOL, ATOL = 1e-5, 1e-6


def close(actual, expected, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=rtol, atol=atol)


# --- NumPy references ---------------------------------------------------------------------
def same_pads(sizes, window, strides):
    """'SAME' padding: the output has ceil(n / s) elements, the padding split low-first."""
    pads = []
    for n, k, s in zip(sizes, window, strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def np_conv(x, w, strides, padding):
    """Cross-correlation of x (N, *spatial, C) with w (*window, C, O)."""
    window = w.shape[:-2]
    pads = (same_pads(x.shape[1:-1], window, strides) if padding == "SAME"
            else [(0, 0)] * len(window))
    x = np.pad(x, [(0, 0), *pads, (0, 0)])
    out_spatial = [(n - k) // s + 1 for n, k, s in zip(x.shape[1:-1], window, strides)]
    out = np.zeros((x.shape[0], *out_spatial, w.shape[-1]))
    contract = list(range(1, len(window) + 2))
    for idx in np.ndindex(*out_spatial):
        patch = x[(slice(None),) + tuple(slice(i * s, i * s + k)
                                         for i, s, k in zip(idx, strides, window))]
        out[(slice(None),) + idx] = np.tensordot(patch, w, (contract, [c - 1 for c in contract]))
    return out


def np_conv_transpose_valid(x, w, strides):
    """The 'VALID' transposed convolution as a scatter: input element i adds x[i] times the
    flipped kernel at output i * s; the output has i * s + max(k - s, 0) elements."""
    window, spatial = w.shape[:-2], x.shape[1:-1]
    out_spatial = [n * s + max(k - s, 0) for n, k, s in zip(spatial, window, strides)]
    full = [max((n - 1) * s + k, o) for n, k, s, o in zip(spatial, window, strides, out_spatial)]
    out = np.zeros((x.shape[0], *full, w.shape[-1]))
    for idx in np.ndindex(*spatial):
        for offset in np.ndindex(*window):
            at = tuple(i * s + b for i, s, b in zip(idx, strides, offset))
            flipped = tuple(k - 1 - b for k, b in zip(window, offset))
            out[(slice(None),) + at] += x[(slice(None),) + idx] @ w[flipped]
    return out[(slice(None),) + tuple(slice(0, o) for o in out_spatial)]


def np_window_reduce(x, window, strides, padding, reduce, fill):
    """``reduce`` over every window of x (window and strides cover all dimensions)."""
    pads = same_pads(x.shape, window, strides) if padding == "SAME" else [(0, 0)] * x.ndim
    x = np.pad(x, pads, constant_values=fill)
    out_shape = [(n - k) // s + 1 for n, k, s in zip(x.shape, window, strides)]
    out = np.empty(out_shape)
    for idx in np.ndindex(*out_shape):
        out[idx] = reduce(x[tuple(slice(i * s, i * s + k) for i, s, k in zip(idx, strides, window))])
    return out


def np_pool(kind, window, strides, padding, channels_at=-1):
    """The pooling reference for a 4-D input with batch first and channels at ``channels_at``
    (the spatial axes are the other two)."""
    def full(dims):
        dims = [1, *dims]
        dims.insert(channels_at % 4, 1)
        return dims

    def reference(params, x):
        w, s = full(window), full(strides or (1,) * len(window))
        if kind == "max":
            return np_window_reduce(x, w, s, padding, np.max, -np.inf)
        total = np_window_reduce(x, w, s, padding, np.sum, 0.)
        if kind == "sum":
            return total
        return total / np_window_reduce(np.ones_like(x), w, s, padding, np.sum, 0.)
    return reference


def np_batch_norm(axis, center=True, scale=True):
    def reference(params, x):
        beta, gamma = params
        z = (x - x.mean(axis, keepdims=True)) / np.sqrt(x.var(axis, keepdims=True) + 1e-5)
        if scale:
            z = np.expand_dims(gamma, axis) * z
        if center:
            z = z + np.expand_dims(beta, axis)
        return z
    return reference


def np_dense(params, x):
    W, b = params
    return x @ W + b


def np_log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


SELU_SCALE, SELU_ALPHA = 1.0507009873554805, 1.6732632423543772
ELEMENTWISE = [
    ("Tanh", stax.Tanh, np.tanh),
    ("Relu", stax.Relu, lambda x: np.maximum(x, 0)),
    ("Exp", stax.Exp, np.exp),
    ("LogSoftmax", stax.LogSoftmax, np_log_softmax),
    ("Softmax", stax.Softmax, lambda x: np.exp(np_log_softmax(x))),
    ("Softplus", stax.Softplus, lambda x: np.log1p(np.exp(x))),
    ("Sigmoid", stax.Sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    ("Elu", stax.Elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    ("LeakyRelu", stax.LeakyRelu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("Selu", stax.Selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))),
    ("Gelu", stax.Gelu,  # the tanh approximation, jax.nn.gelu's default
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
]


def _nchw_conv(params, x):
    W, b = params  # W is OIHW
    y = np_conv(x.transpose(0, 2, 3, 1), W.transpose(2, 3, 1, 0), (1, 1), "VALID")
    return y.transpose(0, 3, 1, 2) + b


# (name, layer, input shape, reference(params, x) -> expected output)
LAYERS = [
    ("Dense", stax.Dense(5), (2, 3), np_dense),
    ("Dense on a batch of matrices", stax.Dense(2), (2, 3, 4), np_dense),
    ("Conv VALID", stax.Conv(2, (2, 2)), (2, 4, 5, 3),
     lambda p, x: np_conv(x, p[0], (1, 1), "VALID") + p[1]),
    ("Conv SAME strided", stax.Conv(4, (3, 2), (2, 1), "SAME"), (2, 5, 4, 3),
     lambda p, x: np_conv(x, p[0], (2, 1), "SAME") + p[1]),
    ("GeneralConv NCHW/OIHW", stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 2, (2, 2)),
     (2, 3, 4, 5), _nchw_conv),
    ("ConvTranspose VALID", stax.ConvTranspose(2, (3, 3), (2, 1)), (2, 3, 4, 3),
     lambda p, x: np_conv_transpose_valid(x, p[0], (2, 1)) + p[1]),
    ("ConvTranspose VALID stride over kernel", stax.ConvTranspose(1, (2, 1), (3, 2)),
     (1, 2, 3, 2), lambda p, x: np_conv_transpose_valid(x, p[0], (3, 2)) + p[1]),
    ("Conv1DTranspose VALID", stax.Conv1DTranspose(2, (3,), (2,)), (2, 4, 1),
     lambda p, x: np_conv_transpose_valid(x, p[0], (2,)) + p[1]),
    ("MaxPool VALID", stax.MaxPool((2, 2)), (2, 5, 4, 3), np_pool("max", (2, 2), None, "VALID")),
    ("MaxPool SAME strided", stax.MaxPool((3, 2), (2, 1), "SAME"), (2, 5, 4, 3),
     np_pool("max", (3, 2), (2, 1), "SAME")),
    ("SumPool SAME", stax.SumPool((2, 3), (1, 2), "SAME"), (2, 5, 4, 3),
     np_pool("sum", (2, 3), (1, 2), "SAME")),
    ("AvgPool SAME counts in-bounds elements", stax.AvgPool((3, 3), (2, 2), "SAME"),
     (2, 5, 4, 3), np_pool("avg", (3, 3), (2, 2), "SAME")),
    ("AvgPool NCHW spec", stax.AvgPool((2, 2), (1, 1), "SAME", spec="NCHW"), (2, 3, 5, 4),
     np_pool("avg", (2, 2), (1, 1), "SAME", channels_at=1)),
    ("BatchNorm", stax.BatchNorm(beta_init=normal(1.), gamma_init=normal(1.)), (2, 3, 2, 3),
     np_batch_norm((0, 1, 2))),
    ("BatchNorm axis 0, scale only", stax.BatchNorm(axis=(0,), center=False,
                                                     gamma_init=normal(1.)),
     (4, 3), np_batch_norm((0,), center=False)),
    ("BatchNorm int axis, center only", stax.BatchNorm(axis=1, scale=False,
                                                        beta_init=normal(1.)),
     (2, 3, 2), np_batch_norm((1,), scale=False)),
    ("Flatten", stax.Flatten, (2, 3, 2, 2), lambda p, x: x.reshape(2, -1)),
    ("Identity", stax.Identity, (2, 3), lambda p, x: x),
    ("Dropout outside training", stax.Dropout(0.3, mode="test"), (2, 3), lambda p, x: x),
    ("shape_dependent", stax.shape_dependent(lambda shape: stax.Dense(shape[-1] + 1)), (2, 3),
     np_dense),
    ("serial Dense-Relu-Dense", stax.serial(stax.Dense(4), stax.Relu, stax.Dense(2)), (3, 5),
     lambda p, x: np_dense(p[2], np.maximum(np_dense(p[0], x), 0))),
    ("FanOut/parallel/FanInConcat", stax.serial(
        stax.FanOut(2), stax.parallel(stax.Dense(3), stax.Identity), stax.FanInConcat()),
     (2, 4), lambda p, x: np.concatenate([np_dense(p[1][0], x), x], -1)),
    ("FanOut/parallel/FanInSum", stax.serial(
        stax.FanOut(2), stax.parallel(stax.Dense(3), stax.Dense(3)), stax.FanInSum),
     (2, 4), lambda p, x: np_dense(p[1][0], x) + np_dense(p[1][1], x)),
] + [(name, layer, (2, 5), lambda p, x, f=f: f(x)) for name, layer, f in ELEMENTWISE]


def _to_numpy(tree):
    return tree_util.tree_map(lambda a: np.asarray(a, np.float64), tree)


@pytest.mark.parametrize("name,layer,input_shape,reference", LAYERS, ids=[r[0] for r in LAYERS])
def test_layer_shapes_and_values(name, layer, input_shape, reference):
    init_fun, apply_fun = layer
    out_shape, params = init_fun(random.PRNGKey(0), input_shape)
    x = np.random.default_rng(1).uniform(-2, 2, input_shape).astype(np.float32)
    expected = reference(_to_numpy(params), x.astype(np.float64))
    out = apply_fun(params, jnp.asarray(x), rng=random.PRNGKey(2))  # every layer takes rng=
    assert tuple(out_shape) == expected.shape == out.shape
    close(out, expected)


@pytest.mark.parametrize("layer,input_shape,out_shape", [
    (stax.Dense(3), (-1, 4), (-1, 3)),
    (stax.Conv(2, (3, 3), (2, 2), "SAME"), (-1, 5, 5, 1), (-1, 3, 3, 2)),
    (stax.ConvTranspose(2, (3, 3), (2, 1)), (-1, 5, 4, 3), (-1, 11, 6, 2)),  # JAX's numbers
    (stax.GeneralConvTranspose(("NCHW", "IOHW", "NCHW"), 3, (2, 2), (2, 2), "SAME"),
     (-1, 5, 4, 3), (-1, 3, 8, 6)),
    (stax.Conv1DTranspose(1, (4,), (2,), [(1, 2)]), (-1, 5, 1), (-1, 9, 1)),
    (stax.Flatten, (-1, 2, 3), (-1, 6)),
    (stax.serial(stax.Dense(4), stax.Relu, stax.Dense(2)), (-1, 3), (-1, 2)),
])
def test_init_keeps_an_unknown_batch_size(layer, input_shape, out_shape):
    shape, _ = layer[0](random.PRNGKey(0), input_shape)
    assert tuple(shape) == out_shape


def test_fan_out_and_parallel_init_shapes():
    init_fun, _ = stax.serial(stax.FanOut(3), stax.parallel(stax.Dense(2), stax.Identity,
                                                            stax.Flatten))
    shapes, params = init_fun(random.PRNGKey(0), (4, 3))
    assert [tuple(s) for s in shapes] == [(4, 2), (4, 3), (4, 3)]
    assert params[0] == () and len(params[1]) == 3 and params[1][1] == ()
    init_concat, _ = stax.FanInConcat(axis=1)
    assert init_concat(None, [(2, 3, 5), (2, 4, 5)])[0] == (2, 7, 5)


def test_aliases():
    assert stax.glorot is stax.glorot_normal and stax.randn is stax.normal
    assert stax.logsoftmax is plax.nn.log_softmax and stax.relu is plax.nn.relu


# --- initial parameters and randomness: JAX's numbers -------------------------------------
DENSE_W = [[0.57203406, -0.5183409, -0.42999786], [-0.6620127, -0.49886984, 0.3396773],
           [0.4163307, -0.5837926, 0.90204865], [-0.99527, -0.7232944, 0.07747422]]
DENSE_B = [-0.024424557, -0.020356804, 0.0020554422]
CONV_W = [[[[0.18172868, -0.24599984], [0.30695567, -0.32105628], [-0.5987785, 0.46773365]],
           [[0.17381467, -0.09430008], [0.18241231, -0.10817561], [0.33733532, -0.20686491]]],
          [[[-0.2771608, 0.008873167], [-0.5636927, 0.2863533], [-0.17478824, -0.3588333]],
           [[-0.0049754274, 0.3368504], [-0.061458945, -0.55559266], [0.6953352, 0.028490609]]]]
CONV_B = [-2.4392003e-07, 1.2287012e-07]
CONV1D_TRANSPOSE_SAME = [-0.30671144, -0.99515945, -1.8379133, -1.9903169, -3.3691149,
                         -2.9854743]
SERIAL_DROPOUT = [[0.24276476, 0.0, -0.4581776], [0.24276476, 0.0, 0.0]]


def test_dense_and_conv_init_draw_jax_numbers():
    shape, (W, b) = stax.Dense(3)[0](random.PRNGKey(0), (2, 4))
    assert shape == (2, 3)
    close(W, DENSE_W, rtol=1e-6)
    close(b, DENSE_B, rtol=1e-6)
    shape, (W, b) = stax.Conv(2, (2, 2))[0](random.PRNGKey(1), (1, 4, 4, 3))
    assert tuple(shape) == (1, 3, 3, 2) and b.shape == (1, 1, 1, 2)
    close(W, CONV_W, rtol=1e-6)
    close(b.ravel(), CONV_B, rtol=1e-6, atol=0)


def test_conv1d_transpose_same_matches_jax():
    init_fun, apply_fun = stax.Conv1DTranspose(1, (3,), strides=(2,), padding="SAME")
    shape, params = init_fun(random.PRNGKey(3), (1, 3, 1))
    out = apply_fun(params, jnp.array([[[1.], [2.], [3.]]]))
    assert tuple(shape) == out.shape == (1, 6, 1)
    close(out.ravel(), CONV1D_TRANSPOSE_SAME)


def test_dropout_in_serial_uses_jax_keys():
    init_fun, apply_fun = stax.serial(stax.Dense(3), stax.Dropout(0.5))
    _, params = init_fun(random.PRNGKey(5), (2, 4))
    close(apply_fun(params, jnp.ones((2, 4)), rng=random.PRNGKey(6)), SERIAL_DROPOUT)


def test_dropout_keeps_with_probability_rate_and_rescales():
    _, apply_fun = stax.Dropout(0.25)
    x = jnp.full((4000,), 2.0)
    out = np.asarray(apply_fun((), x, rng=random.PRNGKey(0)))
    assert set(np.unique(out)) == {0.0, 8.0}
    assert abs((out > 0).mean() - 0.25) < 0.03


def test_dropout_needs_a_key():
    with pytest.raises(ValueError, match="requires apply_fun to be called with a PRNG key"):
        stax.Dropout(0.5)[1]((), jnp.ones(3))


# --- training an MLP: JAX's numbers -------------------------------------------------------
MLP_LOSSES = [1.0673754, 0.89401686, 0.7798253, 0.7164078]
MLP_W0 = [[-0.073990606, -0.24841234, -0.5204225, -0.041607574],
          [-0.57293135, 0.35899913, 0.40232348, 0.2712187],
          [-0.23805064, 0.45432445, -0.06516197, 0.13576607]]
MLP_B2 = [0.18540931, -0.20819196]


def test_serial_mlp_trained_with_adam_matches_jax():
    init_fun, apply_fun = stax.serial(stax.Dense(4), stax.Relu, stax.Dense(2), stax.LogSoftmax)
    _, params = init_fun(random.PRNGKey(0), (-1, 3))
    xs = jnp.array([[0.5, -1., 2.], [1., 0., -0.5], [-1.5, 1., 0.25], [0., 2., 1.]])
    ys = jnp.array([[1., 0.], [0., 1.], [1., 0.], [0., 1.]])

    def loss(p):
        return -jnp.mean(jnp.sum(apply_fun(p, xs) * ys, axis=1))
    opt_init, opt_update, get_params = optimizers.adam(0.05)

    @plax.jit  # the optimizer state is a pytree: it passes through jit
    def step(i, state):
        value, grads = plax.value_and_grad(loss)(get_params(state))
        return value, opt_update(i, grads, state)

    state, losses = opt_init(params), []
    for i in range(4):
        value, state = step(i, state)
        losses.append(value)
    assert isinstance(state, optimizers.OptimizerState)
    close(losses, MLP_LOSSES)
    close(get_params(state)[0][0], MLP_W0)
    close(get_params(state)[2][1], MLP_B2)


# --- optimizers: each one's first three steps on a quadratic, JAX's numbers ---------------
# Parameters {"w": [1, -2, 0.5], "v": [[0.3, -0.7], [1.2, 0.4]]}, loss
# 0.5 * sum([1, 3, 0.5] * w ** 2) + sum(v ** 2); each row is w then v raveled.
OPT_STEPS = {
    "sgd": [[0.9, -1.4, 0.475, 0.24000001, -0.56, 0.96000004, 0.32],
            [0.81, -0.98, 0.45125, 0.192, -0.448, 0.768, 0.25599998],
            [0.729, -0.686, 0.42868748, 0.1536, -0.35840002, 0.6144, 0.20479998]],
    "momentum": [[0.9, -1.4, 0.475, 0.24000001, -0.56, 0.96000004, 0.32],
                 [0.71999997, -0.44, 0.42875, 0.13800001, -0.32199997, 0.55200005, 0.184],
                 [0.48599997, 0.55599993, 0.36568752, 0.01860001, -0.04339999, 0.07440004,
                  0.024800003]],
    "nesterov": [[0.81, -0.86, 0.4525, 0.18599999, -0.434, 0.74399996, 0.24800001],
                 [0.5751, 0.11619991, 0.3892625, 0.06671999, -0.15567997, 0.26687995,
                  0.08896001],
                 [0.327321, 0.69634587, 0.31573132, -0.03250561, 0.075846404, -0.13002244,
                  -0.043340772]],
    "adagrad": [[0.99, -1.99, 0.49, 0.29000002, -0.69, 1.19, 0.39000002],
                [0.9739646, -1.9739467, 0.47400072, 0.2740498, -0.67398, 1.1739587, 0.37401903],
                [0.95384145, -1.953766, 0.45399484, 0.25420484, -0.65390676, 1.1538163,
                 0.35407287]],
    "rmsprop": [[0.68377227, -1.6837722, 0.18377247, -0.016227722, -0.38377222, 0.88377225,
                 0.08377224],
                [0.49887064, -1.4738753, 0.06953168, 0.001773838, -0.22554505, 0.689855,
                 0.015603378],
                [0.3691806, -1.3087178, 0.024435408, -0.00030029193, -0.13191867, 0.54740465,
                 0.0022314303]],
    "rmsprop_momentum": [[0.68377227, -1.6837722, 0.18377247, -0.016227722, -0.38377222,
                          0.88377225, 0.08377224],
                         [0.21426567, -1.1892703, -0.21507308, -0.28283113, 0.059059918,
                          0.40524998, -0.2690016],
                         [-0.2682567, -0.60411954, -0.4453082, -0.29421622, 0.43202573,
                          -0.115285486, -0.40010345]],
    "adam": [[0.90000063, -1.9000007, 0.40000066, 0.20000067, -0.6000007, 1.1000007, 0.30000067],
             [0.80041385, -1.8001682, 0.30118906, 0.1029664, -0.50069606, 1.0003226, 0.20174414],
             [0.7015892, -1.7006264, 0.20487416, 0.013291612, -0.40274644, 0.9012259,
              0.10739781]],
    "adamax": [[0.90000004, -1.9, 0.40000004, 0.20000005, -0.6, 1.1, 0.3],
               [0.8051684, -1.8025341, 0.31043682, 0.11746138, -0.50742626, 1.0042903, 0.213071],
               [0.7154996, -1.7076483, 0.23090985, 0.05085084, -0.42215163, 0.91289335,
                0.13846886]],
    "sm3": [[0.99, -1.99, 0.49, 0.29000002, -0.69, 1.19, 0.39000002],
            [0.9739646, -1.9739467, 0.47400072, 0.27717263, -0.67398, 1.1739587, 0.376133],
            [0.95384145, -1.953766, 0.45399484, 0.26291388, -0.65390676, 1.1538163, 0.36007866]],
}
OPTIMIZERS = {
    "sgd": lambda: optimizers.sgd(0.1),
    "momentum": lambda: optimizers.momentum(0.1, 0.9),
    "nesterov": lambda: optimizers.nesterov(0.1, 0.9),
    "adagrad": lambda: optimizers.adagrad(0.1),
    "rmsprop": lambda: optimizers.rmsprop(0.1),
    "rmsprop_momentum": lambda: optimizers.rmsprop_momentum(0.1),
    "adam": lambda: optimizers.adam(0.1),
    "adamax": lambda: optimizers.adamax(0.1),
    "sm3": lambda: optimizers.sm3(0.1),
}
QUAD_SCALE = jnp.array([1., 3., 0.5])


def quadratic(params):
    return 0.5 * jnp.sum(QUAD_SCALE * params["w"] ** 2) + jnp.sum(params["v"] ** 2)


def quadratic_start():
    return {"w": jnp.array([1., -2., 0.5]), "v": jnp.array([[0.3, -0.7], [1.2, 0.4]])}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_first_steps_match_jax(name):
    opt = OPTIMIZERS[name]()
    assert isinstance(opt, optimizers.Optimizer)
    state = opt.init_fn(quadratic_start())
    for i, expected in enumerate(OPT_STEPS[name]):
        state = opt.update_fn(i, plax.grad(quadratic)(opt.params_fn(state)), state)
        params = opt.params_fn(state)
        assert params["v"].shape == (2, 2)
        close(np.concatenate([params["w"], np.ravel(params["v"])]), expected)


def test_sm3_on_a_scalar_is_adagrad_with_momentum():
    init, update, get_params = optimizers.sm3(0.1, momentum=0.9)
    state = init(jnp.float32(2.0))
    x, g_sq, m = 2.0, 0.0, 0.0
    for i in range(3):
        state = update(i, 2 * get_params(state), state)
        g = 2 * x
        g_sq += g * g
        m = 0.1 * g / math.sqrt(g_sq) + 0.9 * m
        x -= 0.1 * m
        assert get_params(state).shape == ()
        close(get_params(state), x)


def test_the_optimizer_decorator_lifts_single_array_rules():
    @optimizers.optimizer
    def halve(scale):
        return (lambda x: (x, jnp.zeros(())), lambda i, g, s: (s[0] * scale - g, s[1] + 1),
                lambda s: s[0])
    init, update, get_params = halve(0.5)
    assert halve.__name__ == "halve"
    state = update(0, {"a": jnp.ones(2), "b": [jnp.float32(4.)]},
                   init({"a": jnp.full(2, 6.), "b": [jnp.float32(2.)]}))
    close(get_params(state)["a"], [2., 2.])
    close(get_params(state)["b"][0], -3.)
    close(state.packed_state[0][1], 1.)


def test_update_with_a_mismatched_gradient_tree_raises():
    init, update, _ = optimizers.sgd(0.1)
    state = init({"a": jnp.ones(2)})
    with pytest.raises(TypeError, match="did not match the parameter tree structure"):
        update(0, {"b": jnp.ones(2)}, state)


def test_update_changing_its_state_structure_raises():
    @optimizers.optimizer
    def grows():
        return lambda x: (x,), lambda i, g, s: (s[0], g), lambda s: s[0]
    init, update, _ = grows()
    with pytest.raises(TypeError, match="did not match its input structure"):
        update(0, jnp.ones(2), init(jnp.ones(2)))


def test_optimizer_state_is_a_pytree_of_the_states_leaves():
    init, _, get_params = optimizers.adam(0.1)
    state = init({"a": jnp.ones(2), "b": (jnp.zeros(3),)})
    leaves, treedef = tree_util.tree_flatten(state)
    assert len(leaves) == 6  # (x, m, v) for each of the two parameters
    rebuilt = tree_util.tree_unflatten(treedef, [leaf + 1 for leaf in leaves])
    assert isinstance(rebuilt, optimizers.OptimizerState)
    close(get_params(rebuilt)["b"][0], np.ones(3))


# --- schedules ----------------------------------------------------------------------------
SCHEDULES = [
    (optimizers.constant(0.3), lambda i: 0.3),
    (optimizers.exponential_decay(0.5, 3, 0.2), lambda i: 0.5 * 0.2 ** (i / 3)),
    (optimizers.inverse_time_decay(0.5, 3, 0.2), lambda i: 0.5 / (1 + 0.2 * i / 3)),
    (optimizers.inverse_time_decay(0.5, 3, 0.2, staircase=True),
     lambda i: 0.5 / (1 + 0.2 * (i // 3))),
    (optimizers.polynomial_decay(0.5, 4, 0.1, 2.0),
     lambda i: (1 - min(i, 4) / 4) ** 2 * 0.4 + 0.1),
    (optimizers.piecewise_constant([2, 5], [1., 0.5, 0.1]),
     lambda i: 1. if i <= 2 else 0.5 if i <= 5 else 0.1),
    (optimizers.make_schedule(0.25), lambda i: 0.25),
]


@pytest.mark.parametrize("schedule,closed_form", SCHEDULES)
def test_schedules_follow_their_closed_forms(schedule, closed_form):
    close([schedule(i) for i in range(8)], [closed_form(i) for i in range(8)])


def test_sgd_follows_a_schedule():
    init, update, get_params = optimizers.sgd(optimizers.exponential_decay(0.1, 2, 0.5))
    state, x = init(jnp.array([1., -2.])), np.array([1., -2.])
    for i in range(3):
        state = update(i, get_params(state), state)  # gradient of 0.5 * x ** 2
        x = x - 0.1 * 0.5 ** (i / 2) * x
    close(get_params(state), x)


def test_make_schedule_passes_callables_and_refuses_arrays():
    assert optimizers.make_schedule(abs) is abs
    with pytest.raises(TypeError, match="step size must be a scalar or a callable"):
        optimizers.make_schedule(np.ones(2))


@pytest.mark.parametrize("boundaries,values,message", [
    ([[1, 2]], [[1., 2., 3.]], "boundaries and values must be sequences"),
    ([1, 2], [1., 2.], "boundaries length must be one shorter than values length"),
])
def test_piecewise_constant_checks_its_arguments(boundaries, values, message):
    with pytest.raises(ValueError, match=message):
        optimizers.piecewise_constant(boundaries, values)


# --- utilities and serialization ----------------------------------------------------------
def test_l2_norm_and_clip_grads():
    grads = {"a": jnp.array([3., 4.]), "b": [jnp.array(12.)]}
    close(optimizers.l2_norm(grads), 13.)
    clipped = optimizers.clip_grads(grads, 6.5)
    close(clipped["a"], [1.5, 2.])
    close(clipped["b"][0], 6.)
    untouched = optimizers.clip_grads(grads, 20.)
    close(untouched["a"], [3., 4.])
    close(untouched["b"][0], 12.)


def test_pack_unpack_round_trip():
    init, update, get_params = optimizers.adam(0.1)
    params = {"dense": (jnp.ones((2, 2)), jnp.zeros(2)), "scale": [jnp.float32(3.)]}
    state = update(0, tree_util.tree_map(jnp.ones_like, params), init(params))
    marked = optimizers.unpack_optimizer_state(state)
    join_points = tree_util.tree_leaves(marked)
    assert len(join_points) == 3
    assert all(isinstance(p, optimizers.JoinPoint) for p in join_points)
    assert isinstance(marked["dense"][0].subtree, tuple) and len(marked["dense"][0].subtree) == 3
    assert list(marked["scale"][0]) == [marked["scale"][0].subtree]
    packed = optimizers.pack_optimizer_state(marked)
    assert packed.tree_def == state.tree_def and packed.subtree_defs == state.subtree_defs
    for before, after in zip(tree_util.tree_leaves(state), tree_util.tree_leaves(packed)):
        np.testing.assert_array_equal(np.asarray(before), np.asarray(after))
    close(get_params(packed)["dense"][0], np.full((2, 2), 0.9), rtol=1e-6)


def test_pack_refuses_leaves_that_are_not_join_points():
    with pytest.raises(TypeError, match="every leaf of marked_pytree must be a JoinPoint"):
        optimizers.pack_optimizer_state({"a": jnp.ones(2)})


# --- loading ------------------------------------------------------------------------------
def test_example_libraries_is_a_lazy_submodule():
    assert "example_libraries" in dir(plax)
    assert plax.example_libraries.stax is stax


def test_jax_example_libraries_resolve_to_plax(tmp_path):
    proc = run_script(tmp_path, program("example_libraries"))
    assert_ok(proc, "loaded at start False", "shape (-1, 2)",
              "OptimizerState plax.example_libraries.stax plax.example_libraries.optimizers")
