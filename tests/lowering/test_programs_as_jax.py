"""Programs built as JAX builds them, so that XLA compiles them to JAX's bits (issue 45:
blackjax's NUTS warmup drifted from JAX's): scalars made while tracing are literals, logistic
is spelled out, a while loop keeps its unused carries."""
import re

import numpy as np
import scipy.special
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.jaxpr import Literal

bits = lambda a: np.asarray(a).view(np.uint32).tolist()


@plax.jit
def _less(x, p):
    return x < p


@pytest.mark.parametrize("make", [lambda: jnp.asarray(0.5, jnp.float32), lambda: jnp.array(0.5),
                                  lambda: jnp.float32(0.5), lambda: jnp.full((), 0.5)],
                         ids=["asarray", "array", "float32", "full"])
def test_scalar_made_while_tracing_is_a_literal(make):
    jaxpr = plax.make_jaxpr(lambda x: _less(x, make()))(1.0).jaxpr
    assert not jaxpr.constvars
    p = jaxpr.eqns[-1].invars[1]
    assert isinstance(p, Literal) and float(p.val) == 0.5


def test_a_literal_made_while_tracing_evaluates_to_its_array():
    # Evaluated again (as a transformation of the jaxpr does), the literal is the Array it
    # came from, as in JAX, not a Python scalar: diffrax's loops read its .shape.
    from plax.core.jaxpr import eval_jaxpr
    closed = plax.make_jaxpr(lambda x: lax.while_loop(lambda c: c[0] < 3,
                                                      lambda c: (c[0] + 1, c[1] * 2),
                                                      (jnp.asarray(0), x)))(1.0)
    (loop,) = closed.jaxpr.eqns
    start = loop.invars[-2]
    assert isinstance(start, Literal) and start.value().shape == ()
    outs = eval_jaxpr(closed.jaxpr, closed.consts, np.float32(1.0))
    assert [int(outs[0]), float(outs[1])] == [3, 8.0]
    _, tangents = plax.jvp(lambda x: eval_jaxpr(closed.jaxpr, closed.consts, x)[1],
                           (np.float32(1.0),), (np.float32(1.0),))
    assert float(tangents) == 8.0


def test_scalar_made_before_tracing_stays_a_constant():
    c = jnp.asarray(0.5, jnp.float32)
    closed = plax.make_jaxpr(lambda x: x * c)(1.0)
    assert len(closed.jaxpr.constvars) == 1 and float(closed.consts[0]) == 0.5
    # an array made while tracing is a constant too (only scalars are literals, as in JAX)
    closed = plax.make_jaxpr(lambda x: x * jnp.asarray([1.0, 2.0]))(1.0)
    assert [c.shape for c in closed.consts] == [(2,)]


def test_bernoulli_probability_is_a_literal_in_a_loop_body():
    """JAX's NUTS loop passes no 0.5 into its loops (blackjax draws a direction bernoulli)."""
    def body(c, k):
        return c + plax.random.bernoulli(k).astype(jnp.float32), None
    keys = plax.random.split(plax.random.key(0), 3)
    closed = plax.make_jaxpr(lambda ks: lax.scan(body, jnp.float32(0), ks))(keys)
    (scan,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert scan.params["num_consts"] == 0


X = np.float32([-3.5, -0.7, 0.0, 1.0058417, 4.25, 20.0])
JAX_EXPIT = [1022369844, 1051321163, 1056964608, 1060860371, 1065117268, 1065353216]
JAX_EXPIT_GRAD = [1021908560, 1046677683, 1048576000, 1044957529, 1013132654, 0]


def test_logistic_lowers_as_jax():
    text = plax.jit(plax.scipy.special.expit).lower(X).as_text()
    assert "stablehlo.logistic" not in text
    assert re.search(r"stablehlo\.exponential", text) and re.search(r"stablehlo\.divide", text)
    assert bits(plax.jit(plax.scipy.special.expit)(X)) == JAX_EXPIT
    grad = plax.jit(plax.vmap(plax.grad(plax.nn.sigmoid)))(X)
    assert bits(grad) == JAX_EXPIT_GRAD
    np.testing.assert_allclose(plax.scipy.special.expit(X), 1 / (1 + np.exp(-X.astype(float))),
                               rtol=1e-6)


@pytest.mark.parametrize("fun, op, reference", [
    (lambda x: plax.lax.zeta(x + 1.5, x + 0.5), "chlo.zeta",
     lambda x: scipy.special.zeta(x + 1.5, x + 0.5)),
    (lambda x: plax.lax.polygamma(np.float32(2), x + 0.5), "chlo.polygamma",
     lambda x: scipy.special.polygamma(2, x + 0.5)),
    (lambda x: plax.lax.bessel_i1e(x - 1), "chlo.bessel_i1e", lambda x: scipy.special.i1e(x - 1)),
], ids=["zeta", "polygamma", "bessel_i1e"])
def test_special_functions_are_chlo_ops_as_jax(fun, op, reference):
    # XLA expands them the same way for plax's program as for JAX's
    x = np.abs(X)
    assert f'"{op}"' in plax.jit(fun).lower(x).as_text()
    np.testing.assert_allclose(plax.jit(fun)(x), reference(x.astype(np.float64)), rtol=2e-6)


def test_cumlogsumexp_combines_as_jax():
    x = np.float32([[0.0, 1.0, -np.inf, np.inf, np.nan], [-np.inf, -np.inf, 2.0, 5.0, 1.0]])
    text = plax.jit(lambda a: lax.cumlogsumexp(a, 1)).lower(x).as_text()
    assert "stablehlo.is_finite" not in text and "comparison_direction NE" in text
    got = np.asarray(lax.cumlogsumexp(x, 1))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(got, np.logaddexp.accumulate(x.astype(np.float64), 1),
                                   rtol=1e-6)


def _while_operands(text):
    (line,) = [ln for ln in text.split("\n") if "stablehlo.while" in ln]
    return len(re.search(r'"stablehlo\.while"\(([^)]*)\)', line).group(1).split(","))


def test_while_keeps_unused_carries_as_jax():
    def f(x):
        _, a, _ = lax.while_loop(lambda c: c[0] < 3,
                                 lambda c: (c[0] + 1, c[1] * 2.0, c[2] + 1.0), (0, x, x))
        return a
    text = plax.jit(f).lower(np.float32(1.0)).as_text()
    assert _while_operands(text) == 3  # JAX's loop carries all three
    assert float(plax.jit(f)(np.float32(1.0))) == 8.0


def test_unused_while_is_dropped():
    def f(x):
        lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0)
        return x * 2
    assert "stablehlo.while" not in plax.jit(f).lower(np.float32(1.0)).as_text()


def test_scan_body_is_a_call_of_its_own_function_as_jax():
    """JAX runs a scan's body through ``closed_call``, a private function of the program.
    XLA folds less across the call: a constant mask that reaches a loop nested in the body
    as an argument stays a select, as in JAX's program (numpyro's NUTS under fori_collect
    got JAX's bits only so)."""
    mask = np.array([True, True, False, True])
    sig = np.float32([15.0, 10.0, 16.0, 11.0])

    def inner(v):
        def body(c):
            i, w = c
            return i + 1, jnp.where(mask, ((w - 1.0) / sig) ** 2 * -0.5, -jnp.inf)
        return lax.while_loop(lambda c: c[0] < 3, body, (0, v))[1]

    f = plax.jit(lambda v: lax.fori_loop(0, 2, lambda i, w: inner(w), v))
    x = np.linspace(0.5, 3.0, 4, dtype=np.float32)
    lowered = f.lower(x)
    assert len(re.findall(r"callee = @closed_call\b", lowered.as_text())) == 1
    assert len(re.findall(r" select\(", lowered.compile().as_text())) == 1
    want = x.astype(np.float64)
    for _ in range(2 * 3):  # two outer steps of three inner ones
        want = np.where(mask, ((want - 1.0) / sig) ** 2 * -0.5, -np.inf)
    np.testing.assert_allclose(f(x), want, rtol=1e-6)


def test_cholesky_derivative_is_jax_rule():
    """numpyro's GP example: the gradient of a Cholesky factor through its kernel's
    parameters, jitted, has JAX 0.10.2's bits once the JVP rule is JAX's (no symmetrising of
    the tangent, the half diagonal as a division); before, two of them were 1-2 ulp off."""
    x = jnp.linspace(-1.0, 1.0, 25)
    rs = np.random.RandomState(0)  # the example's data, as it makes it
    y = x + 0.2 * x ** 3 + 0.5 * (0.5 + x) ** 2 * jnp.sin(4.0 * x) + 0.15 * rs.randn(25)
    y = (y - jnp.mean(y)) / jnp.std(y - jnp.mean(y))

    def loss(p):
        var, noise, length = p
        k = var * jnp.exp(-0.5 * jnp.power((x[:, None] - x) / length, 2.0))
        k = k + (noise + 1e-6) * jnp.eye(25)
        return jnp.sum(jnp.linalg.cholesky(k) * y[:, None])

    grads = plax.jit(plax.grad(loss))((jnp.float32(1.0),) * 3)
    assert [bits(g) for g in grads] == [1097903916, 3221412728, 1089180089]
    num = [(loss(tuple(jnp.float32(1.0 + (i == j) * 1e-2) for j in range(3))) -
            loss(tuple(jnp.float32(1.0 - (i == j) * 1e-2) for j in range(3)))) / 2e-2
           for i in range(3)]
    np.testing.assert_allclose(grads, num, rtol=2e-2)


_SIG = np.float32([15.0, 10.0, 16.0])


def test_nested_jit_keeps_its_constants_as_jax():
    """A jit staged inside another keeps its concrete closed-over constants in its own jaxpr,
    and they are constants of its function in the program, as JAX 0.10's: passed in as
    arguments (through a loop's carries), XLA could not fold them, and numpyro's
    fori_collect, whose step is such a jit, drifted from JAX's bits."""
    inner = plax.jit(lambda v: (v - 1.0) / _SIG)
    f = lambda x: lax.fori_loop(0, 2, lambda i, v: inner(v), x)
    closed = plax.make_jaxpr(f)(np.ones(3, np.float32))
    assert not closed.jaxpr.constvars
    (scan,) = closed.jaxpr.eqns
    assert scan.params["num_consts"] == 0
    (call,) = [e for e in scan.params["jaxpr"].jaxpr.eqns if e.primitive.name == "jit"]
    assert len(call.invars) == 1 and [c.tolist() for c in call.params["jaxpr"].consts] == \
        [_SIG.tolist()]
    text = plax.jit(f).lower(np.ones(3, np.float32)).as_text()
    callee = text[text.index("func.func private @_lambda_"):]
    callee = callee[:callee.index("\n  }")]
    assert "stablehlo.constant" in callee and "tensor<3xf32>" in callee
    x = np.float32([2.0, 3.0, 4.0])
    np.testing.assert_allclose(plax.jit(f)(x), ((x - 1) / _SIG - 1) / _SIG, rtol=1e-6)


@pytest.mark.parametrize("how", ["eval_jaxpr", "grad", "vmap", "jit_grad", "jvp"])
def test_nested_jit_with_constants_under_transformations(how):
    from plax.core.jaxpr import eval_jaxpr
    inner = plax.jit(lambda v: jnp.sum((v * _SIG) ** 2))
    outer = lambda v: inner(v) * 2.0
    x = np.float32([0.5, -1.0, 2.0])
    want_val = 2.0 * np.sum((x * _SIG) ** 2)
    want_grad = 4.0 * x * _SIG ** 2
    if how == "eval_jaxpr":
        closed = plax.make_jaxpr(outer)(x)
        np.testing.assert_allclose(eval_jaxpr(closed.jaxpr, closed.consts, x)[0], want_val,
                                   rtol=1e-6)
    elif how == "grad":
        np.testing.assert_allclose(plax.grad(lambda v: plax.jit(outer)(v))(x), want_grad,
                                   rtol=1e-6)
    elif how == "jit_grad":
        np.testing.assert_allclose(plax.jit(plax.grad(plax.jit(outer)))(x), want_grad,
                                   rtol=1e-6)
    elif how == "vmap":
        xs = np.stack([x, 2 * x])
        np.testing.assert_allclose(plax.vmap(plax.jit(outer))(xs),
                                   [want_val, 4 * want_val], rtol=1e-6)
    else:
        _, t = plax.jvp(plax.jit(outer), (x,), (np.ones(3, np.float32),))
        np.testing.assert_allclose(t, np.sum(want_grad), rtol=1e-6)


def test_nested_jit_keeps_a_large_constant_as_an_operand():
    big = np.arange(300_000, dtype=np.float32)  # over the 1 MiB compiled into programs
    inner = plax.jit(lambda v: v + jnp.asarray(big)[:3])
    closed = plax.make_jaxpr(lambda x: inner(x) * 2.0)(np.ones(3, np.float32))
    (call,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "jit"]
    assert len(call.invars) == 2 and not call.params["jaxpr"].consts
    np.testing.assert_allclose(plax.jit(lambda x: inner(x) * 2.0)(np.ones(3, np.float32)),
                               [2.0, 4.0, 6.0])
