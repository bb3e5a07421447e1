"""plax.nn's functions against NumPy references (computed in float64) and JAX 0.10.2 (dtypes,
derivatives at the kinks, masked softmax, one_hot's named axes, errors)."""
import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import plax
import plax.nn as nn
import plax.numpy as jnp
from plax.errors import ConcretizationTypeError
from plax.runtime.array import Array
from plax.scipy import special
from plax.test_util import check_grads

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
TOL = {F32: 3e-6, F16: 2e-3, BF16: 2e-2}


def check(got, want, dtype=F32, tol=None):
    assert isinstance(got, Array), type(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    tol = tol or TOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol,
                               equal_nan=True)


# --- NumPy references (float64) -----------------------------------------------------------------
def _softplus(x):
    return np.logaddexp(x, 0.)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

REFERENCES = {
    "identity": lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "sigmoid": sp.expit,
    "log_sigmoid": lambda x: -_softplus(-x),
    "softplus": _softplus,
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "silu": lambda x: x * sp.expit(x),
    "swish": lambda x: x * sp.expit(x),
    "gelu": _gelu_tanh,
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "selu": lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(np.minimum(x, 0))),
    "celu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip((x + 1) / 2, 0, 1),
    "tanh": np.tanh,
    "log1mexp": lambda x: np.log(-np.expm1(-x)),
}
ELEMENTWISE = sorted(REFERENCES)


def _domain(name, x, xnp=np):
    return xnp.abs(x) + 0.05 if name == "log1mexp" else x


def test_public_names():
    for name in ELEMENTWISE + ["glu", "softmax", "log_softmax", "logsumexp", "logmeanexp",
                               "standardize", "one_hot"]:
        assert callable(getattr(nn, name)), name
    assert nn.swish is nn.silu and nn.hard_swish is nn.hard_silu
    assert nn.tanh is jnp.tanh
    assert nn.logsumexp is special.logsumexp  # jax.nn.logsumexp is jax.scipy.special's


def test_elementwise_match_numpy():
    x = np.concatenate([np.random.default_rng(0).uniform(-8, 8, 40),
                        [-6., -3., -1., -0.5, 0., 0.5, 1., 3., 6., 30., -30.]])

    @plax.jit
    def everything(xs):
        return [{n: getattr(nn, n)(_domain(n, x, jnp)) for n in ELEMENTWISE} for x in xs]

    # float16 away from squareplus' cancellation at -30; bfloat16 in test_dtypes_follow_jax
    xs = [x.astype(F32), x[:-2].astype(F16)]
    for xd, outs in zip(xs, everything(xs)):
        for name in ELEMENTWISE:
            check(outs[name], REFERENCES[name](_domain(name, xd.astype(np.float64))), xd.dtype)
    for name in ("relu", "gelu", "silu", "log1mexp"):  # eagerly too
        check(getattr(nn, name)(_domain(name, xs[0])),
              REFERENCES[name](_domain(name, xs[0].astype(np.float64))))


def test_parameters_and_gelu_exact():
    x = np.linspace(-4, 4, 17).astype(np.float32)
    w = x.astype(np.float64)
    alphas = np.array([2., 3.], np.float32)

    @plax.jit
    def outputs(x):
        return [nn.elu(x, 2.5), nn.celu(x, 0.5), nn.leaky_relu(x, 0.2),
                nn.leaky_relu(x, negative_slope=-1.), nn.squareplus(x, b=0.),
                nn.squareplus(x, 9), nn.elu(x[:2], alpha=alphas),
                nn.gelu(x, approximate=False), nn.gelu(x, False), nn.gelu(x, approximate=True)]

    exact = 0.5 * w * sp.erfc(-w / np.sqrt(2))
    wants = [np.where(w > 0, w, 2.5 * np.expm1(np.minimum(w, 0))),
             np.where(w > 0, w, 0.5 * np.expm1(np.minimum(w, 0) / 0.5)),
             np.where(w >= 0, w, 0.2 * w), np.abs(w), np.maximum(w, 0),
             (w + np.sqrt(w * w + 9)) / 2, alphas * np.expm1(w[:2]), exact, exact, _gelu_tanh(w)]
    for got, want in zip(outputs(x), wants):
        check(got, want)
    # JAX 0.10.2: the two forms differ at 1 (0.841192 vs 0.8413447)
    check(nn.gelu(np.float32(1.)), 0.841192)
    check(nn.gelu(np.float32(1.), approximate=False), 0.8413447)


def test_edge_values():
    check(nn.relu(np.array([np.nan, -0.0, -np.inf, np.inf], np.float32)), [np.nan, 0., 0., np.inf])
    assert not np.signbit(np.asarray(nn.relu(np.array([-0.0], np.float32)))[0])
    assert np.signbit(np.asarray(nn.leaky_relu(np.array([-0.0], np.float32)))[0])
    check(nn.relu6(np.array([np.nan, np.inf], np.float32)), [np.nan, 6.])
    check(nn.hard_tanh(np.array([np.nan, np.inf, -np.inf], np.float32)), [np.nan, 1., -1.])
    check(nn.softplus(np.array([-100., 100., np.inf, -np.inf], np.float32)),
          [0., 100., np.inf, 0.])
    check(nn.log_sigmoid(np.array([-100., 100.], np.float32)), [-100., 0.])
    check(nn.silu(np.float32(-100.)), 0.)
    check(nn.mish(np.float32(-100.)), 0.)
    # JAX 0.10.2 values of log1mexp on both sides of log(2), at 0, at 30 and below the domain
    check(nn.log1mexp(np.array([0., 0.1, np.log(2), 1., 30., -1.], np.float32)),
          [-np.inf, -2.3521686, -0.69314718, -0.45867515, -9.3576229e-14, np.nan])


# --- dtypes (JAX 0.10.2: dtype and weak type per input kind) -------------------------------------
# inputs: int32 array, bool array, Python int, Python float; "w" marks a weak type; "T" TypeError
DTYPES = {
    "relu": ("int32", "int32w", "int32w", "float32w"),
    "relu6": ("float32w", "float32w", "float32w", "float32w"),
    "sigmoid": ("T", "T", "T", "float32w"),
    "silu": ("T", "T", "T", "float32w"),
    "log_sigmoid": ("float32", "T", "float32w", "float32w"),
    "softplus": ("float32", "float32w", "float32w", "float32w"),
    "gelu": ("float32", "float32", "float32", "float32"),
    "elu": ("float32w", "float32w", "float32w", "float32w"),
    "hard_tanh": ("int32", "int32w", "int32w", "float32w"),
    "hard_silu": ("float32w", "float32w", "float32w", "float32w"),
    "mish": ("float32", "float32w", "float32w", "float32w"),
    "squareplus": ("float32", "float32", "float32w", "float32w"),
    "sparse_plus": ("float32w", "float32w", "float32w", "float32w"),
    "identity": ("int32", "bool", "int32w", "float32w"),
    "log1mexp": ("float32", "T", "float32w", "float32w"),
}


def test_dtypes_follow_jax():
    inputs = (np.array([1, -2], np.int32), np.array([True, False]), 2, 2.0)
    for name, expected in DTYPES.items():
        fn = getattr(nn, name)
        for x, want in zip(inputs, expected):
            if want == "T":
                with pytest.raises(TypeError, match="does not accept dtype|not supported"):
                    plax.eval_shape(fn, x)
                continue
            out = plax.eval_shape(fn, x)
            assert (str(out.dtype) + ("w" if out.weak_type else "")) == want, (name, x, want)
        out = fn(inputs[3])  # eagerly too
        assert (str(out.dtype) + ("w" if out.weak_type else "")) == expected[3], name
    for name in ELEMENTWISE:  # low-precision floats keep their dtype
        for dt in (F16, BF16):
            out = plax.eval_shape(getattr(nn, name), np.array([1., 2.], dt))
            assert out.dtype == dt and not out.weak_type, (name, dt)
    check(nn.gelu(np.array([1., 2.], BF16)), _gelu_tanh(np.array([1., 2.])), BF16)


def test_errors():
    for name in ("relu", "softplus", "silu", "gelu", "elu", "leaky_relu", "identity",
                 "log1mexp", "glu", "standardize", "softmax", "log_softmax"):
        with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
            getattr(nn, name)([1., 2.])
    with pytest.raises(TypeError, match="logistic does not accept dtype int32"):
        nn.sigmoid(np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="does not accept dtype bool"):
        nn.softmax(np.array([True, False]))
    with pytest.raises(TypeError, match="unexpected keyword argument 'initial'"):
        nn.softmax(np.ones(3, np.float32), initial=0.)  # JAX 0.10 dropped `initial`
    with pytest.raises(AssertionError, match="axis size must be divisible by 2"):
        nn.glu(np.ones(3, np.float32))  # JAX raises AssertionError here too
    with pytest.raises(ValueError, match="Unknown algorithm 'foo'"):
        nn.standardize(np.ones(3, np.float32), algorithm="foo")
    with pytest.raises(TypeError, match="requires ndarray, scalar, or None arguments"):
        nn.standardize(np.ones(3, np.float32), mean=[1.])


# --- derivatives ---------------------------------------------------------------------------------
# JAX 0.10.2: grad (== jacfwd) at the kinks and other points where the choice matters
KINK_GRADS = {
    "relu": ([-1.0, 0.0, 1.0], [0.0, 0.0, 1.0]),
    "relu6": ([0.0, 3.0, 6.0], [0.0, 1.0, 0.0]),
    "leaky_relu": ([-1.0, 0.0, 1.0], [0.009999999776482582, 1.0, 1.0]),
    "hard_tanh": ([-1.0, 0.0, 1.0], [1.0, 1.0, 1.0]),
    "elu": ([-1.0, 0.0, 1.0], [0.3678794503211975, 1.0, 1.0]),
    "celu": ([-1.0, 0.0, 1.0], [0.3678794503211975, 1.0, 1.0]),
    "selu": ([-1.0, 0.0, 1.0], [0.6467686295509338, 1.7580993175506592, 1.0507010221481323]),
    "hard_sigmoid": ([-3.0, 0.0, 3.0], [0.0, 0.1666666716337204, 0.0]),
    "hard_silu": ([-3.0, 0.0, 3.0], [0.0, 0.5, 1.0]),
    "sparse_plus": ([-1.0, 0.0, 1.0], [0.0, 0.5, 1.0]),
    "sparse_sigmoid": ([-1.0, 0.0, 1.0], [0.25, 0.5, 0.25]),
    "softplus": ([0.0, np.inf, -np.inf], [0.5, 1.0, 0.0]),
    "log_sigmoid": ([0.0, np.inf, -np.inf], [0.5, 0.0, 1.0]),
    "log1mexp": ([0.0, 0.6931471805599453, 1.0], [np.inf, 1.0, 0.5819767117500305]),
    "relu6_outside": ([-1.0, 7.0, np.nan], [0.0, 0.0, 0.0]),
    "relu_nan": ([np.nan], [0.0]),
}
# JAX 0.10.2: second derivatives at 0
SECOND_AT_0 = {"relu": 0.0, "softplus": 0.25, "silu": 0.5, "gelu": 0.7978845834732056,
               "elu": 1.0, "celu": 0.25, "mish": 0.6399999856948853}


def test_derivatives_at_kinks_match_jax():
    fns = {k: getattr(nn, k.split("_outside")[0].split("_nan")[0]) for k in KINK_GRADS}

    @plax.jit
    def derivatives(points):
        rev = {k: plax.vmap(plax.grad(fns[k]))(points[k]) for k in KINK_GRADS}
        fwd = {k: plax.vmap(plax.jacfwd(fns[k]))(points[k]) for k in KINK_GRADS}
        second = {k: plax.grad(plax.grad(getattr(nn, k)))(0.) for k in SECOND_AT_0}
        return rev, fwd, second

    points = {k: np.array(p, np.float32) for k, (p, _) in KINK_GRADS.items()}
    rev, fwd, second = derivatives(points)
    for k, (_, want) in KINK_GRADS.items():
        check(rev[k], want, tol=1e-6)
        check(fwd[k], want, tol=1e-6)
    for k, want in SECOND_AT_0.items():
        check(second[k], want, tol=1e-6)
    # eagerly, the facts the brief names: relu'(0) = 0
    assert float(plax.grad(nn.relu)(0.)) == 0.0
    assert float(plax.grad(nn.relu6)(6.)) == 0.0


def test_parameter_derivatives_match_jax():
    # JAX 0.10.2
    check(plax.grad(nn.celu)(-1., 2.), 0.6065306663513184, tol=1e-6)
    check(plax.grad(nn.celu, 1)(-1., 2.), -0.09020400047302246, tol=1e-6)
    check(plax.grad(nn.elu, 1)(-1., 2.), -0.6321205496788025, tol=1e-6)
    check(plax.grad(nn.elu, 1)(1., 2.), 0.0)
    check(plax.grad(nn.leaky_relu, 1)(-2., .1), -2.0)
    check(plax.grad(nn.leaky_relu)(0., .1), 1.0)
    check(plax.grad(lambda x: nn.gelu(x, approximate=False))(np.float32(0.7)), 0.97661406,
          tol=1e-6)
    check(plax.grad(nn.gelu)(np.float32(0.7)), 0.97635716, tol=1e-6)


def test_check_grads_away_from_kinks():
    x = np.array([-4.3, -2.2, -0.6, 0.4, 1.7, 2.6, 4.1, 7.2])
    smooth = [n for n in ELEMENTWISE if n not in ("identity", "swish", "hard_swish", "tanh")]

    def stacked(x):
        outs = [getattr(nn, n)(jnp.abs(x) + 0.3 if n == "log1mexp" else x) for n in smooth]
        outs += [nn.elu(x, 1.7), nn.celu(x, 0.6), nn.leaky_relu(x, 0.3), nn.squareplus(x, 2.),
                 nn.gelu(x, approximate=False), nn.glu(x)]
        return jnp.concatenate(outs)

    def parameters(x, a):
        return jnp.concatenate([nn.elu(x, a), nn.celu(x, a), nn.leaky_relu(x, a),
                                nn.squareplus(x, a)])

    # op by op (disable_jit): much faster here than compiling each function's derivatives
    with plax.enable_x64(), plax.disable_jit():
        check_grads(stacked, (x,), order=2, modes=("fwd", "rev"))
        check_grads(parameters, (x, 1.7), order=1, modes=("fwd", "rev"))
        m = np.array([[True, False, True, True], [True, True, False, True]])
        xs = x.reshape(2, 4)
        check_grads(lambda x: nn.softmax(x, axis=(0, 1), where=m), (xs,), order=2,
                    modes=("fwd", "rev"))
        check_grads(lambda x: jnp.where(m, nn.log_softmax(x, where=m), 0.), (xs,), order=2,
                    modes=("fwd", "rev"))
        check_grads(lambda x: nn.standardize(x, where=m, algorithm="stable"), (xs,), order=2,
                    modes=("fwd", "rev"))
        check_grads(lambda x: nn.logmeanexp(x, axis=0), (xs,), order=2, modes=("fwd", "rev"))


# --- an optax-style loss: its jitted Hessian far into the tails ------------------------------------
def _focal_loss(logits, labels, gamma, alpha=None):
    """optax's sigmoid_focal_loss, written from its formula: binary cross-entropy times
    (1 - p_t) ** gamma, with log(1 - p_t) taken as a logsumexp weighted by the labels."""
    log_p, log_q = nn.log_sigmoid(logits), nn.log_sigmoid(-logits)
    ce = -labels * log_p - (1.0 - labels) * log_q
    log_1mpt = special.logsumexp(jnp.stack([log_p, log_q], axis=-1), axis=-1,
                                 b=jnp.stack([1.0 - labels, labels], axis=-1))
    loss = ce * jnp.exp(gamma * log_1mpt)
    return loss if alpha is None else (alpha * labels + (1 - alpha) * (1 - labels)) * loss


def _focal_loss_np(x, y, gamma, alpha=None):
    ls = lambda v: -np.logaddexp(0.0, -v)  # noqa: E731
    with np.errstate(divide="ignore"):
        log_1mpt = np.logaddexp(np.log(1 - y) + ls(x), np.log(y) + ls(-x))
    loss = (-y * ls(x) - (1 - y) * ls(-x)) * np.exp(gamma * log_1mpt)
    return loss if alpha is None else (alpha * y + (1 - alpha) * (1 - y)) * loss


FOCAL_LOGITS = np.array([100., -100., 75., -75., 50., -50., 10., -10., 0.], np.float32)
FOCAL_LABELS = np.array([0.9, 0.1, 0.8, 0.2, 1.0, 0.0, 1.0, 0.0, 0.3], np.float32)


@pytest.mark.parametrize("gamma, alpha", [(0.5, None), (2.0, 0.25)])
def test_focal_loss_hessian_is_finite_at_extreme_logits(gamma, alpha):
    # optax's test suite: the Hessian of the summed loss, jitted inside, at logits +-50..100.
    # The loss is elementwise, so the Hessian is diagonal: each entry against a float64
    # central second difference of the same formula.
    def total(x):
        return jnp.sum(plax.jit(_focal_loss, static_argnums=(2, 3))(x, FOCAL_LABELS, gamma,
                                                                     alpha))
    hess = np.asarray(plax.jit(plax.hessian(total))(FOCAL_LOGITS))
    assert np.all(np.isfinite(hess)), np.diag(hess)
    np.testing.assert_array_equal(hess - np.diag(np.diag(hess)), 0.0)
    x, y, h = FOCAL_LOGITS.astype(np.float64), FOCAL_LABELS.astype(np.float64), 1e-3
    want = (_focal_loss_np(x + h, y, gamma, alpha) - 2 * _focal_loss_np(x, y, gamma, alpha)
            + _focal_loss_np(x - h, y, gamma, alpha)) / h ** 2
    np.testing.assert_allclose(np.diag(hess), want, rtol=2e-3, atol=1e-6)
    # The hard-label tails (~e^(-(1 + gamma) 50)) hold their value where float32 can.
    tiny = np.abs(want[4:6]) > 1e-36
    np.testing.assert_allclose(np.diag(hess)[4:6][tiny], want[4:6][tiny], rtol=1e-2)


# --- glu -----------------------------------------------------------------------------------------
def test_glu():
    x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    w = x.astype(np.float64)
    check(nn.glu(x), w[:, :3] * sp.expit(w[:, 3:]))
    check(nn.glu(x, axis=0), w[:2] * sp.expit(w[2:]))
    check(nn.glu(x, -2), w[:2] * sp.expit(w[2:]))
    check(nn.glu(np.arange(4.).astype(np.float32)), [0., 0.95257413])  # JAX 0.10.2


# --- softmax, log_softmax, logmeanexp ------------------------------------------------------------
def _np_softmax(x, axis, mask=None):
    x = np.asarray(x, np.float64)
    mask = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
    xs = np.where(mask, x, -np.inf)
    e = np.where(mask, np.exp(xs - np.max(xs, axis=axis, keepdims=True)), 0)
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_matches_numpy():
    x = np.random.default_rng(2).normal(size=(3, 4, 5)).astype(np.float32) * 3
    mask = np.random.default_rng(3).random((3, 4, 5)) < 0.7
    mask[..., 0] = True
    axes = (-1, 0, 1, (0, 2), (1, 2), None)

    row = np.array([True, False, True, True, False])
    ints = np.array([1, 2, 3])

    @plax.jit
    def all_axes(x, mask):
        per_axis = [(nn.softmax(x, axis=a), nn.log_softmax(x, axis=a),
                     nn.softmax(x, axis=a, where=mask), nn.log_softmax(x, axis=a, where=mask))
                    for a in axes]
        # a list axis, a broadcasting mask, integer input (promoted to float32, as in JAX)
        return per_axis, (nn.softmax(x, axis=[0, 1]), nn.softmax(x, where=row),
                          nn.softmax(ints), nn.log_softmax(ints))

    per_axis, others = all_axes(x, mask)
    for ax, (sm, lsm, sm_m, lsm_m) in zip(axes, per_axis):
        ref = _np_softmax(x, ax)
        check(sm, ref)
        np.testing.assert_allclose(np.sum(np.asarray(sm, np.float64), axis=ax), 1, rtol=1e-6)
        check(lsm, np.log(ref))
        masked = _np_softmax(x, ax, mask)
        check(sm_m, masked)
        with np.errstate(divide="ignore"):
            check(lsm_m, np.where(mask, np.log(masked), -np.inf))
    check(others[0], _np_softmax(x, (0, 1)))
    check(others[1], _np_softmax(x, -1, row))
    check(others[2], _np_softmax(ints, -1))
    check(others[3], np.log(_np_softmax(ints, -1)))
    # eagerly
    check(nn.softmax(x), _np_softmax(x, -1))
    check(nn.softmax(np.array([1., 2.], np.float16)), _np_softmax([1., 2.], -1), F16)


def test_softmax_edge_values_match_jax():
    x = np.array([[1., 2., -np.inf, 0.5], [-np.inf] * 4], np.float32)
    x2 = np.array([[1., 2., 3., 0.5], [1, 2, 3, 4]], np.float32)
    m = np.array([[True, False, True, True], [False] * 4])
    weights = np.arange(4.).astype(np.float32)

    @plax.jit
    def edges(x, x2):
        return [nn.softmax(x), nn.log_softmax(x),
                plax.grad(lambda x: nn.softmax(x)[0, 1])(x),
                plax.grad(lambda x: nn.log_softmax(x)[0, 1])(x),
                nn.softmax(jnp.array([1., np.inf], np.float32)),
                nn.softmax(x2, where=m), nn.log_softmax(x2, where=m),
                plax.grad(lambda x: jnp.sum(nn.softmax(x, where=m) * weights))(x2),
                plax.grad(lambda x: jnp.sum(jnp.where(m, nn.log_softmax(x, where=m), 0)))(x2),
                plax.hessian(lambda x: nn.softmax(x)[0])(x2[0, :3])[0]]

    # JAX 0.10.2: -inf entries get 0 (log: -inf); an all -inf row is NaN; +inf gives NaN;
    # a row with every element masked out: softmax 0, log_softmax -inf, zero gradients
    wants = [[[0.2312239, 0.6285317, 0., 0.14024438], [np.nan] * 4],
             [[-1.4643688, -0.4643688, -np.inf, -1.9643688], [np.nan] * 4],
             [[-0.14533156, 0.23347956, 0., -0.08814805], [np.nan] * 4],
             [[-0.2312239, 0.3714683, 0., -0.14024438], [np.nan] * 4],
             [np.nan, np.nan],
             [[0.11116561, 0., 0.821409, 0.06742536], [0.] * 4],
             [[-2.1967342, -np.inf, -0.19673415, -2.6967342], [-np.inf] * 4],
             [[-0.20511101, 0., 0.12724113, 0.07786994], [0.] * 4],
             [[0.66650313, 0., -1.464227, 0.79772395], [0.] * 4],
             [0.06717355, -0.01806575, -0.0491078]]
    for got, want in zip(edges(x, x2), wants):
        check(got, want)
    check(nn.log_softmax(x2, where=m), wants[6])  # eagerly too


def test_softmax_jvp_rule():
    x = np.array([[0.3, -1.2, 2.0], [0.1, 0.2, 0.3]], np.float32)
    t = np.array([[1., 0.5, -2.], [0., 1., 0.]], np.float32)
    y, ty = plax.jvp(lambda x: nn.softmax(x, axis=0), (x,), (t,))
    ref = _np_softmax(x, 0)
    check(y, ref)
    check(ty, ref * (t - np.sum(ref * t, axis=0, keepdims=True)), tol=1e-6)
    # the stabilising max is not differentiated: a large common shift changes nothing
    # (inputs exactly representable after the shift)
    x0 = np.array([0.25, -1.25, 2.0], np.float32)
    check(plax.grad(lambda x: nn.softmax(x)[1])(x0 + 4096),
          plax.grad(lambda x: nn.softmax(x)[1])(x0), tol=1e-6)


def test_logmeanexp():
    x = np.array([[1., 2., 4., 0.5], [3, 3, 3, 3]], np.float32)
    m = np.array([[True, False, True, True], [False] * 4])
    w = x.astype(np.float64)
    check(nn.logmeanexp(x), np.log(np.mean(np.exp(w))))
    check(nn.logmeanexp(x, axis=0, keepdims=True), np.log(np.mean(np.exp(w), 0, keepdims=True)))
    # JAX 0.10.2: an all-masked row is NaN (-inf - log 0)
    check(nn.logmeanexp(x, axis=1, where=m), [np.log(np.mean(np.exp(w[0, [0, 2, 3]]))), np.nan])
    check(nn.logmeanexp(x, axis=1, where=m), [2.9783344, np.nan])
    assert nn.logmeanexp(np.array([1, 2])).dtype == F32


# --- standardize ---------------------------------------------------------------------------------
def test_standardize():
    x = np.random.default_rng(4).normal(size=(3, 6)).astype(np.float32)
    w = x.astype(np.float64)
    for axis in (-1, 0, None, (0, 1)):
        mu = w.mean(axis=axis, keepdims=True)
        ref = (w - mu) / np.sqrt(w.var(axis=axis, keepdims=True) + 1e-5)
        check(nn.standardize(x, axis=axis), ref, tol=2e-5)
        check(nn.standardize(x, axis, algorithm="stable"), ref, tol=2e-5)
    check(nn.standardize(x, mean=1., variance=4.), (w - 1) / np.sqrt(4 + 1e-5))
    check(nn.standardize(x, epsilon=0.5), (w - w.mean(-1, keepdims=True))
          / np.sqrt(w.var(-1, keepdims=True) + 0.5), tol=2e-5)
    m = np.random.default_rng(5).random((3, 6)) < 0.6
    m[:, 0] = True
    for r in range(3):
        sel = w[r][m[r]]
        want = (w[r] - sel.mean()) / np.sqrt(sel.var() + 1e-5)
        check(nn.standardize(x, where=m)[r], want, tol=2e-5)
    # JAX 0.10.2: constant rows give 0; an all-masked row is NaN; integers give float32
    x2 = np.array([[1., 2., 4., 0.5], [3, 3, 3, 3]], np.float32)
    check(nn.standardize(x2), [[-0.65275156, 0.09325022, 1.5852538, -1.0257524], [0.] * 4])
    m2 = np.array([[True, False, True, True], [False] * 4])
    check(nn.standardize(x2, where=m2), [[-0.53916276, 0.10783253, 1.401823, -0.8626604],
                                         [np.nan] * 4])
    assert nn.standardize(np.array([1, 2, 3])).dtype == F32


# --- one_hot -------------------------------------------------------------------------------------
def test_one_hot():
    idx = np.array([[0, 2], [-1, 3]])
    eye = np.eye(3)
    ref = np.stack([np.stack([eye[i] if 0 <= i < 3 else np.zeros(3) for i in r]) for r in idx])
    check(nn.one_hot(idx, 3), ref)
    check(nn.one_hot(idx, 3, axis=-1), ref)
    check(nn.one_hot(idx, 3, axis=2), ref)
    check(nn.one_hot(idx, 3, axis=0), np.moveaxis(ref, -1, 0))
    check(nn.one_hot(idx, 3, axis=1), np.moveaxis(ref, -1, 1))
    check(nn.one_hot(idx, 3, axis=-2), np.moveaxis(ref, -1, 1))
    out = nn.one_hot(idx, 3, dtype=jnp.int32)
    assert out.dtype == np.int32 and np.array_equal(np.asarray(out), ref.astype(np.int32))
    assert nn.one_hot(idx, 3, dtype=bool).dtype == np.bool_
    assert nn.one_hot(idx, 3, dtype=jnp.bfloat16).dtype == BF16
    with plax.enable_x64():  # the default float type
        assert nn.one_hot(idx, 3).dtype == np.float64
    check(nn.one_hot(2, 3), [0., 0., 1.])
    check(nn.one_hot(np.array([0, 1], np.uint8), 3), eye[:2])
    check(nn.one_hot([1, 0], 2), [[0., 1.], [1., 0.]])
    check(nn.one_hot(np.zeros((0,), np.int32), 4), np.zeros((0, 4)))
    with pytest.warns(DeprecationWarning, match="one_hot input should be integer-typed"):
        check(nn.one_hot(np.array([1.5, 1.0], np.float32), 3), [[0., 0., 0.], [0., 1., 0.]])
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        nn.one_hot(np.array([0]), 3, axis=2)
    with pytest.raises(ConcretizationTypeError, match="one_hot argument `num_classes`"):
        plax.jit(nn.one_hot)(np.array([0]), 3)


def test_one_hot_named_axis_jit_vmap():
    # a mapped axis name as `axis`: each example compares with its own position (JAX 0.10.2)
    out = plax.vmap(lambda i: nn.one_hot(i, 4, axis="b"), axis_name="b")(np.array([0, 1, 3, 2]))
    check(out, [1., 1., 0., 0.])
    with pytest.raises(ValueError, match="Expected num_classes to match the size of axis b, "
                                         "but 3 != 4"):
        plax.vmap(lambda i: nn.one_hot(i, 3, axis="b"), axis_name="b")(np.array([0, 1, 3, 2]))
    idx = np.array([[0, 1, 2], [2, 2, 0]])
    check(plax.jit(lambda i: nn.one_hot(i, 3, axis=0))(idx), np.moveaxis(np.eye(3)[idx], -1, 0))
    check(plax.vmap(lambda i: nn.one_hot(i, 3), in_axes=1)(idx),
          np.moveaxis(np.eye(3)[idx], 1, 0))


# --- jit and vmap --------------------------------------------------------------------------------
def test_vmap_and_jit():
    x = np.random.default_rng(6).normal(size=(4, 3, 6)).astype(np.float32)
    m = np.random.default_rng(7).random((4, 3, 6)) < 0.7
    m[..., 0] = True
    w = x.astype(np.float64)

    def per_example(x, m):
        return {"softmax": nn.softmax(x, axis=-1, where=m), "log_softmax": nn.log_softmax(x, 0),
                "standardize": nn.standardize(x, axis=None), "glu": nn.glu(x),
                "lme": nn.logmeanexp(x, axis=1, where=m), "relu6": nn.relu6(x * 4),
                "grad_relu": plax.vmap(plax.grad(nn.relu))(x[0])}

    for fn in (plax.vmap(per_example), plax.jit(plax.vmap(per_example))):
        outs = fn(x, m)
        check(outs["softmax"], _np_softmax(w, -1, m))
        check(outs["log_softmax"], np.log(_np_softmax(w, 1)))
        mu = w.mean(axis=(1, 2), keepdims=True)
        check(outs["standardize"], (w - mu) / np.sqrt(w.var(axis=(1, 2), keepdims=True) + 1e-5),
              tol=2e-5)
        check(outs["glu"], w[..., :3] * sp.expit(w[..., 3:]))
        e = np.where(m, np.exp(w), 0)
        check(outs["lme"], np.log(e.sum(2) / m.sum(2)), tol=1e-5)
        check(outs["relu6"], np.clip(4 * w, 0, 6))
        check(outs["grad_relu"], (w[:, 0] > 0).astype(np.float64))
    shared = plax.vmap(per_example, in_axes=(0, None))(x, m[0])
    check(shared["softmax"], _np_softmax(w, -1, m[0]))
