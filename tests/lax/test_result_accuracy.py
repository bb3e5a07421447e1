"""accuracy= on lax's unary transcendental ops (lax.Tolerance, lax.AccuracyMode): values
against NumPy under every setting, the result_accuracy attribute in the lowered text, the
parameter in jaxprs and through jvp, vmap and jit, and JAX's errors for bad values."""
import copy
import math
import pickle

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads

from helpers import C64, F32, grad_check_defaults, sample

H, D = lax.AccuracyMode.HIGHEST, lax.AccuracyMode.DEFAULT
TOL = lax.Tolerance(atol=1e-5, rtol=1e-5)

# (lax name, NumPy reference, derivative, input domain, StableHLO op). logistic has no op: it
# lowers to 1 / (1 + exp(-x)), dropping the accuracy, as JAX's does.
ROWS = [
    ("exp", np.exp, np.exp, "real", "stablehlo.exponential"),
    ("exp2", np.exp2, lambda x: np.exp2(x) * np.log(2), "real", "stablehlo.exponential"),
    ("expm1", np.expm1, np.exp, "real", "stablehlo.exponential_minus_one"),
    ("log", np.log, lambda x: 1 / x, "pos", "stablehlo.log"),
    ("log1p", np.log1p, lambda x: 1 / (1 + x), "pos", "stablehlo.log_plus_one"),
    ("logistic", lambda x: 1 / (1 + np.exp(-x)),
     lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2, "real", None),  # spelled out (below)
    ("sin", np.sin, np.cos, "real", "stablehlo.sine"),
    ("cos", np.cos, lambda x: -np.sin(x), "real", "stablehlo.cosine"),
    ("tan", np.tan, lambda x: 1 / np.cos(x) ** 2, "unit", "stablehlo.tan"),
    ("tanh", np.tanh, lambda x: 1 - np.tanh(x) ** 2, "real", "stablehlo.tanh"),
    ("sqrt", np.sqrt, lambda x: 0.5 / np.sqrt(x), "pos", "stablehlo.sqrt"),
    ("rsqrt", lambda x: 1 / np.sqrt(x), lambda x: -0.5 * x ** -1.5, "pos", "stablehlo.rsqrt"),
    ("cbrt", np.cbrt, lambda x: np.cbrt(x) ** -2 / 3, "pos", "stablehlo.cbrt"),
]
IDS = [r[0] for r in ROWS]
ACCURACIES = [None, H, D, TOL, lax.Tolerance(ulps=2)]

HIGHEST_ATTR = ("result_accuracy = #stablehlo.result_accuracy<mode = "
                "#stablehlo.result_accuracy_mode<HIGHEST>>")
TOL_ATTR = ("result_accuracy = #stablehlo.result_accuracy<atol = 1.000000e-05, rtol = "
            "1.000000e-05, mode = #stablehlo.result_accuracy_mode<TOLERANCE>>")


def lowered(f, x):
    return plax.jit(f).lower(x).as_text()


@pytest.mark.parametrize("name, ref, _d, domain, _op", ROWS, ids=IDS)
def test_values_match_numpy_under_every_accuracy(name, ref, _d, domain, _op):
    x = sample((5,), F32, domain)
    f = getattr(lax, name)
    want = ref(x.astype(np.float64))
    for acc in ACCURACIES:
        np.testing.assert_allclose(f(x, accuracy=acc), want, rtol=2e-6, atol=1e-6, err_msg=str(acc))
        jitted = plax.jit(lambda x: f(x, accuracy=acc))(x)
        np.testing.assert_allclose(jitted, want, rtol=2e-6, atol=1e-6, err_msg=str(acc))


@pytest.mark.parametrize("name, _r, _d, domain, op", ROWS, ids=IDS)
def test_lowered_op_carries_result_accuracy(name, _r, _d, domain, op):
    x = sample((3,), F32, domain)
    f = getattr(lax, name)
    if op is None:
        text = lowered(lambda x: f(x, accuracy=H), x)
        assert "result_accuracy" not in text and "stablehlo.exponential" in text, text
        return
    op_lines = lambda acc: [l for l in lowered(lambda x: f(x, accuracy=acc), x).splitlines()
                            if f'"{op}"' in l]
    for acc, attr in ((H, HIGHEST_ATTR), (TOL, TOL_ATTR)):
        lines = op_lines(acc)
        assert len(lines) == 1 and attr in lines[0], lines
    # None and DEFAULT (the attribute's default) write no attribute.
    for acc in (None, D):
        lines = op_lines(acc)
        assert len(lines) == 1 and "result_accuracy" not in lines[0], lines


@pytest.mark.parametrize("tol, text", [
    (lax.Tolerance(ulps=2), "ulps = 2, mode"),
    (lax.Tolerance(atol=2), "atol = 2.000000e+00, mode"),
    (lax.Tolerance(rtol=0.1), "rtol = 1.000000e-01, mode"),
    (lax.Tolerance(1e-3, 1e-3, 3), "atol = 1.000000e-03, rtol = 1.000000e-03, ulps = 3, mode"),
    (lax.Tolerance(atol=1 / 3), "atol = 3.3333333333333331e-01, mode"),  # exact: 17 digits
    (lax.Tolerance(atol=math.inf), "atol = 0x7FF0000000000000, mode"),
    (lax.Tolerance(ulps=2 ** 40), "ulps = 1099511627776, mode"),
])
def test_tolerance_attribute_text_and_xla_accepts_it(tol, text):
    x = np.array([0.5, 1.0], np.float32)
    assert text in lowered(lambda x: lax.exp(x, accuracy=tol), x)
    np.testing.assert_allclose(lax.exp(x, accuracy=tol), np.exp(x), rtol=2e-6)


def test_complex_sin_cos_drop_the_attribute_others_keep_it():
    # As JAX: complex sin and cos are expanded there, so the accuracy is not asked of XLA.
    z = sample((3,), C64)
    for name, ref, has_attr in (("sin", np.sin, False), ("cos", np.cos, False),
                                ("exp", np.exp, True)):
        f = getattr(lax, name)
        assert ("result_accuracy" in lowered(lambda z: f(z, accuracy=H), z)) == has_attr, name
        np.testing.assert_allclose(f(z, accuracy=H), ref(z.astype(np.complex128)), rtol=1e-5)


def test_jaxpr_shows_accuracy_only_when_set():
    x = np.ones(2, np.float32)
    assert "exp[accuracy=AccuracyMode.HIGHEST] a" in str(
        plax.make_jaxpr(lambda x: lax.exp(x, accuracy=H))(x))
    assert "sin[accuracy=Tolerance(atol=1e-05, rtol=1e-05, ulps=0)] a" in str(
        plax.make_jaxpr(lambda x: lax.sin(x, accuracy=TOL))(x))
    plain = plax.make_jaxpr(lambda x: lax.exp(x))(x)
    assert plain.eqns[0].params == {} and "exp a" in str(plain)
    # Bound directly with accuracy=None (as JAX's own code binds it): hidden when printed.
    direct = plax.make_jaxpr(lambda x: lax.exp_p.bind(x, accuracy=None))(x)
    assert direct.eqns[0].params == {"accuracy": None} and "b:f32[2] = exp a" in str(direct)
    np.testing.assert_allclose(lax.exp_p.bind(x, accuracy=None), np.exp(x), rtol=1e-6)


# (lax name, accuracy, the derivative's op in the jvp's jaxpr (None: none asks an accuracy),
# how many equations of the jaxpr carry one)
JVP_OPS = [
    ("sin", H, "cos[accuracy=AccuracyMode.HIGHEST]", 2),
    ("sin", TOL, "cos[accuracy=Tolerance(", 2),
    ("cos", D, "sin[accuracy=AccuracyMode.DEFAULT]", 2),
    ("expm1", H, "exp[accuracy=AccuracyMode.HIGHEST]", 2),
    ("expm1", TOL, None, 1),
    ("tanh", H, "logistic[accuracy=AccuracyMode.HIGHEST]", 3),  # 4 logistic(2x) logistic(-2x)
    ("tanh", TOL, None, 1),
    ("logistic", H, None, 1),  # its HIGHEST derivative uses logistic(-x), without the accuracy
    ("exp", H, None, 1),
    ("sqrt", H, None, 1),
]


@pytest.mark.parametrize("name, acc, derivative_op, count", JVP_OPS)
def test_jvp_derivative_ops_ask_jax_s_accuracy(name, acc, derivative_op, count):
    x = sample((4,), F32)
    f = lambda x: getattr(lax, name)(x, accuracy=acc)
    text = str(plax.make_jaxpr(lambda x, t: plax.jvp(f, (x,), (t,)))(x, x))
    assert text.count("accuracy=") == count, text
    assert f"{name}[accuracy=" in text and (derivative_op is None or derivative_op in text), text


@pytest.mark.parametrize("acc", [H, TOL], ids=["HIGHEST", "tolerance"])
@pytest.mark.parametrize("name, ref, deriv, domain, _op", ROWS, ids=IDS)
def test_jvp_values_and_gradients(name, ref, deriv, domain, _op, acc):
    x = sample((4,), F32, domain, seed=1)
    t = sample((4,), F32, seed=2)
    f = lambda x: getattr(lax, name)(x, accuracy=acc)
    y, dy = plax.jvp(f, (x,), (t,))
    wide = x.astype(np.float64)
    np.testing.assert_allclose(y, ref(wide), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(dy, deriv(wide) * t, rtol=2e-5, atol=1e-6)
    check_grads(f, (x,), 2, modes=("fwd", "rev"), **grad_check_defaults(F32))


@pytest.mark.parametrize("name, ref, _d, domain, op", ROWS, ids=IDS)
def test_vmap_keeps_accuracy(name, ref, _d, domain, op):
    xs = sample((3, 4), F32, domain)
    f = plax.vmap(lambda x: getattr(lax, name)(x, accuracy=TOL))
    np.testing.assert_allclose(f(xs), ref(xs.astype(np.float64)), rtol=2e-6, atol=1e-6)
    assert f"{name}[accuracy=Tolerance(" in str(plax.make_jaxpr(f)(xs))
    assert (TOL_ATTR in lowered(f, xs)) is (op is not None)


def test_equal_tolerances_are_one_parameter():
    a, b = lax.Tolerance(1e-3, 0.0, 2), lax.Tolerance(atol=1e-3, ulps=2)
    assert a == b and hash(a) == hash(b) and a != lax.Tolerance(atol=1e-3)
    assert (a.atol, a.rtol, a.ulps) == (1e-3, 0.0, 2)
    with pytest.raises(AttributeError, match="Tolerance is immutable"):
        a.atol = 1.0
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    assert [m.name for m in lax.AccuracyMode] == ["HIGHEST", "DEFAULT"]
    assert (lax.AccuracyMode.HIGHEST.value, lax.AccuracyMode.DEFAULT.value) == (1, 2)


@pytest.mark.parametrize("make, err, match", [
    (lambda: lax.Tolerance(atol=-1.0), ValueError, "Tolerances must be non-negative"),
    (lambda: lax.Tolerance(rtol=-1e-3), ValueError, "Tolerances must be non-negative"),
    (lambda: lax.Tolerance(ulps=-1), ValueError, "Tolerances must be non-negative"),
    (lambda: lax.Tolerance(atol=math.nan), ValueError, "Tolerances must be non-negative"),
    (lambda: lax.Tolerance(), ValueError, "At least one of atol, rtol, or ulps must be set"),
    (lambda: lax.Tolerance(0.0, 0.0, 0), ValueError,
     "At least one of atol, rtol, or ulps must be set"),
    (lambda: lax.Tolerance(ulps=2.5), TypeError, "ulps must be an integer"),
])
def test_bad_tolerances(make, err, match):
    with pytest.raises(err, match=match):
        make()


@pytest.mark.parametrize("bad, shown", [("HIGHEST", "HIGHEST"), (1e-3, "0.001"), (True, "True"),
                                        (lax.AccuracyMode, "<enum 'AccuracyMode'>")])
def test_bad_accuracy_values(bad, shown):
    x = np.ones(2, np.float32)
    match = f"Accuracy {shown} not supported"
    with pytest.raises(NotImplementedError, match=match):
        lax.exp(x, accuracy=bad)
    with pytest.raises(NotImplementedError, match=match):
        plax.jit(lambda x: lax.sin(x, accuracy=bad))(x)
    with pytest.raises(NotImplementedError, match=match):  # bound directly: caught when lowered
        plax.jit(lambda x: lax.sqrt_p.bind(x, accuracy=bad)).lower(x)
    with pytest.raises(TypeError, match="positional"):  # keyword-only, as in JAX
        lax.exp(x, H)
