"""plax.experimental.jet: Taylor-mode propagation against repeated jvp (the derivatives of
f(x(t)) for a polynomial curve x(t)) and closed forms, for every rule family; under jit, vmap
and grad; the input checks."""
import math

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import jet as jet_module
from plax.experimental.jet import jet, jet2

ORDER = 3
X0 = np.array([0.3, 0.55, 0.8])
TERMS = [np.array([1.0, -0.5, 0.25]), np.array([0.2, 0.4, -0.3]),
         np.array([-0.1, 0.3, 0.2])]


def derivatives_by_jvp(f, x0, terms):
    """d^k/dt^k f(x(t)) at t = 0, k = 1..len(terms), for x(t) = x0 + sum_k terms[k-1] t^k / k!,
    by nesting jvp."""
    def g(t):
        return f(x0 + sum(term * t ** (k + 1) / math.factorial(k + 1)
                          for k, term in enumerate(terms)))
    out, h = [], g
    for _ in terms:
        h = (lambda h: lambda t: plax.jvp(h, (t,), (jnp.ones_like(t),))[1])(h)
        out.append(h(jnp.float64(0.)))
    return out


@plax.custom_jvp
def softish(x):  # a custom_jvp function: jet goes through its primal function
    return jnp.log1p(jnp.exp(x))


softish.defjvp(lambda p, t: (softish(p[0]), t[0] * jax_sigmoid(p[0])))


def jax_sigmoid(x):
    return 1 / (1 + jnp.exp(-x))


IDX = np.array([2, 0, 2])

# name -> function of one float64 vector of shape (3,) (points away from kinks and ties)
FUNCTIONS = {
    "exp": jnp.exp, "log": jnp.log, "log1p": jnp.log1p, "expm1": jnp.expm1,
    "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "square": jnp.square, "tanh": jnp.tanh,
    "logistic": lax.logistic, "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan,
    "sinh": jnp.sinh, "cosh": jnp.cosh, "asinh": jnp.arcsinh, "acosh": lambda x: jnp.arccosh(x + 1.5),
    "atanh": jnp.arctanh, "atan": jnp.arctan, "asin": jnp.arcsin, "acos": jnp.arccos,
    "erf": lax.erf, "erfc": lax.erfc, "erf_inv": lax.erf_inv, "exp2": jnp.exp2,
    "abs": lambda x: jnp.abs(x - 0.5), "sign_times": lambda x: jnp.sign(x - 0.5) * x,
    "integer_pow": lambda x: x ** 3 + x ** -2, "pow": lambda x: x ** (x + 1.0),
    "pow_const": lambda x: x ** 2.5, "div": lambda x: (x + 2.0) / (x * x + 1.0),
    "atan2": lambda x: jnp.arctan2(x, 1.0 - x), "rem": lambda x: lax.rem(x + 2.0, 0.9),
    "max_min": lambda x: jnp.maximum(x, 0.5) + jnp.minimum(x, 0.5),
    "where": lambda x: jnp.where(x > 0.5, jnp.sin(x), x ** 2),
    "clamp": lambda x: lax.clamp(0.4, x, 0.7),
    "custom_jvp": softish, "relu": plax.nn.relu, "softplus": plax.nn.softplus,
    "gelu": plax.nn.gelu,
    "reduce_sum": lambda x: jnp.sum(jnp.exp(x)), "reduce_max": lambda x: jnp.max(x * x),
    "reduce_min": lambda x: jnp.min(jnp.cos(x)), "argmax_zero": lambda x: x * jnp.argmax(x),
    "cumsum": jnp.cumsum, "cumprod": jnp.cumprod, "cummax": lambda x: lax.cummax(jnp.sin(4 * x)),
    "cummin": lambda x: lax.cummin(jnp.cos(3 * x)),
    "dot_general": lambda x: jnp.outer(x, x) @ jnp.sin(x),
    "structural": lambda x: jnp.concatenate([x[::-1], jnp.reshape(jnp.outer(x, x).T, (-1,))[2:5],
                                             jnp.pad(x[1:], (1, 0)), jnp.broadcast_to(x, (2, 3))[1]]),
    "gather": lambda x: x[IDX] * x, "dynamic_slice": lambda x: lax.dynamic_slice(x, (1,), (2,)),
    "dynamic_update_slice": lambda x: lax.dynamic_update_slice(x, x[:2] ** 2, (1,)),
    "scatter_add": lambda x: x.at[IDX].add(x ** 2), "split": lambda x: jnp.split(x, 3)[1] * x,
    "jit": lambda x: plax.jit(lambda y: jnp.exp(y) * jnp.sin(y))(x) + x,
    "checkpoint": plax.checkpoint(lambda x: jnp.sin(x) * x),
    "convert": lambda x: x.astype(np.float32).astype(np.float64) * 2,
    "stop_gradient": lambda x: x * lax.stop_gradient(x),
    "conv": lambda x: lax.conv_general_dilated(x.reshape(1, 1, 3), jnp.sin(x).reshape(1, 1, 3),
                                               (1,), [(2, 2)]).reshape(-1),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jet_matches_repeated_jvp(name):
    f = FUNCTIONS[name]
    with plax.enable_x64():
        x0, terms = jnp.asarray(X0), [jnp.asarray(t) for t in TERMS]
        def both(x0, *terms):  # one compiled program per function
            return jet(f, (x0,), (terms,)), f(x0), derivatives_by_jvp(f, x0, terms)
        (primal, series), value, expected = plax.jit(both)(x0, *terms)
        np.testing.assert_allclose(np.asarray(primal), np.asarray(value), rtol=1e-12, atol=1e-12)
        assert len(series) == ORDER
        for k, (got, want) in enumerate(zip(series, expected)):
            assert got.shape == want.shape
            tol = 1e-7 if name == "convert" else 1e-9  # float32 rounding of the terms
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol,
                                       err_msg=f"order {k + 1}")


def test_jet_docstring_example_and_closed_forms():
    # sin(h(z)) with h = z**3 at z = 0.5: Faa di Bruno
    h0, h1, h2 = 0.5 ** 3., 3. * 0.5 ** 2., 6. * 0.5
    f0, (f1, f2) = jet(jnp.sin, (h0,), ((h1, h2),))
    np.testing.assert_allclose(float(f0), np.sin(h0), rtol=1e-6)
    np.testing.assert_allclose(float(f1), np.cos(h0) * h1, rtol=1e-6)
    np.testing.assert_allclose(float(f2), -np.sin(h0) * h1 ** 2 + np.cos(h0) * h2, rtol=1e-6)
    # along x(t) = x + t every derivative of exp is exp(x)
    with plax.enable_x64():
        _, series = jet(jnp.exp, (0.7,), ([1.0] + [0.0] * 5,))
        np.testing.assert_allclose(np.asarray(series), np.full(6, np.exp(0.7)), rtol=1e-12)
        # jet2 takes and gives Taylor coefficients: 1/(1-x) at 0 along t has coefficients 1
        _, coeffs = jet2(lambda x: 1 / (1 - x), (0.0,), ([1.0, 0.0, 0.0, 0.0],))
        np.testing.assert_allclose(np.asarray(coeffs), np.ones(4), rtol=1e-12)


def test_jet_two_arguments_and_pytree_outputs():
    with plax.enable_x64():
        out, series = jet(lambda x, y: {"p": x * y, "q": [jnp.sin(x), 3.0]}, (1.0, 2.0),
                          ([1.0, 0.0], [0.0, 1.0]))
        # x(t) = 1 + t, y(t) = 2 + t^2/2: x y = 2 + 2t + t^2/2 + t^3/2
        np.testing.assert_allclose([float(s) for s in series["p"]], [2.0, 1.0])
        np.testing.assert_allclose([float(s) for s in series["q"][0]], [np.cos(1.0), -np.sin(1.0)])
        # an output that does not move gets zero terms, weakly typed like the constant
        assert out["q"][1] == 3.0 and [float(s) for s in series["q"][1]] == [0.0, 0.0]
        assert series["q"][1][0].weak_type


def test_jet_under_jit_vmap_and_grad():
    f = lambda x: jnp.sin(plax.jit(lambda y: jnp.exp(y) * y)(x))
    with plax.enable_x64():
        direct = jet(f, (0.3,), ([1.0, 0.5, 0.1],))[1]
        jitted = plax.jit(lambda x, a: jet(f, (x,), ([a, 0.5, 0.1],)))(0.3, 1.0)[1]
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(direct), rtol=1e-12)
        xs = jnp.array([0.1, 0.3])
        batched = plax.vmap(lambda x: jet(f, (x,), ([1.0, 0.0, 0.0],))[1][2])(xs)
        third = lambda x: derivatives_by_jvp(f, x, [1.0, 0.0, 0.0])[2]
        np.testing.assert_allclose(np.asarray(batched), [float(third(x)) for x in xs], rtol=1e-9)
        # d/dx of the second derivative is the third derivative
        g = plax.grad(lambda x: jet(f, (x,), ([1.0, 0.0, 0.0],))[1][1])(0.3)
        np.testing.assert_allclose(float(g), float(third(jnp.float64(0.3))), rtol=1e-9)


def test_jet_of_a_jit_stays_one_jit():
    f = lambda x: plax.jit(jnp.exp)(x) * 2
    jaxpr = plax.make_jaxpr(lambda x: jet(f, (x,), ([1.0, 0.0],)))(0.3)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("jit") == 1


@pytest.mark.parametrize("primals, series, match", [
    ((1.0, 2.0), ([1.0], [1.0, 2.0]), "jet terms have inconsistent lengths"),
    (((1.0, 2.0),), ([1.0],), "primal value at position 0 is not an array"),
    ((1.0,), ([(1.0, 2.0)],), "term 0 for argument 0 is not an array"),
    ((1.0,), ([1.0], [2.0]), "got 1 primals but series for 2 arguments"),
])
def test_jet_bad_input(primals, series, match):
    with pytest.raises(ValueError, match=match):
        jet(lambda *a: a[0], primals, series)


def test_jet_without_a_rule_raises():
    with pytest.raises(NotImplementedError, match=r"Taylor-mode \(jet\) rule for 'sort'"):
        jet(jnp.sort, (jnp.array([2., 1.]),), ([jnp.ones(2)],))
    with pytest.raises(KeyError, match=r"rule for 'while' not implemented"):  # JAX: a KeyError
        jet(lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x),
                                     (0, x))[1], (0.5,), ([1.0],))


def test_rule_table_helpers():
    assert jet_module.jet_rules[lax.exp_p] is not None
    assert float(jet_module.fact(4)) == pytest.approx(24.0, rel=1e-5)
    # the zero markers are pytrees without leaves
    assert plax.tree_util.tree_leaves([jet_module.zero_series, jet_module.zero_term]) == []
    # def_comp / def_deriv / deflinear / defzero register working rules
    p, s = jet_module.zero_prop(lax.floor_p, [1.5], [[1.0]])
    assert float(p) == 1.0 and s is jet_module.zero_series
    p, s = jet_module.linear_prop(lax.neg_p, [1.5], [[1.0, 2.0]])
    assert float(p) == -1.5 and [float(t) for t in s] == [-1.0, -2.0]
    with plax.enable_x64():
        p, s = jet_module.deriv_prop(lax.sin_p, jnp.cos, [0.4], [[1.0, 0.0]])
        np.testing.assert_allclose([float(t) for t in s], [np.cos(0.4), -np.sin(0.4) / 2])
    cached_calls = []

    @jet_module.weakref_lru_cache
    def body_size(owner, k):
        cached_calls.append(k)
        return len(owner) * k
    owner = [1, 2, 3]
    with pytest.raises(TypeError):  # lists cannot be held weakly
        body_size(owner, 2)
    holder = type("Holder", (), {"__len__": lambda self: 3})()
    assert body_size(holder, 2) == 6 and body_size(holder, 2) == 6 and cached_calls == [2]


def test_linear_util_pieces_compose_as_in_jax():
    """jet_subtrace, jet_fun and traceable compose into a flat function of (primals, series)
    leaves, the way a call rule builds a Taylor body."""
    from plax.extend import linear_util as lu
    fun = lu.wrap_init(lambda x: [jnp.sin(x)],
                       debug_info=plax.api_util.debug_info("jet", jnp.sin, (0.5,), {}))
    flat, in_tree = plax.tree_util.tree_flatten(([0.5], [[1.0, 0.0]]))
    flat_fun, out_tree = jet_module.traceable(
        jet_module.jet_fun(jet_module.jet_subtrace(fun), 2), in_tree)
    leaves = flat_fun.call_wrapped(*flat)
    (primal,), ((c1, c2),) = plax.tree_util.tree_unflatten(out_tree(), leaves)
    # Taylor coefficients of sin(0.5 + t)
    np.testing.assert_allclose([float(primal), float(c1), float(c2)],
                               [np.sin(0.5), np.cos(0.5), -np.sin(0.5) / 2], rtol=1e-6)
