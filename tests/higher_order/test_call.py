"""closed_call_p and call_p (plax.extend.core.primitives): how they are bound, staged, printed,
lowered and checked. Values and derivatives under every transformation are rows of
tests/test_higher_order_table.py."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.api_util import debug_info
from plax.core.dce import dce_closed
from plax.core.errors import KeyReuseError
from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.experimental import checkify
from plax.extend import linear_util as lu
from plax.extend.core import primitives
from plax.extend.core.primitives import call_p, closed_call_p
from plax.higher_order import call as call_module


def _wrap(fn, *args):
    return lu.wrap_init(fn, debug_info=debug_info(fn.__name__, fn, args, {}))


def _sin_mul(x, y):
    return [jnp.sin(x) * y]


def test_jax_names_find_the_primitives():
    assert primitives.call_p is call_module.call_p and call_p.name == "call"
    assert primitives.closed_call_p is call_module.closed_call_p
    assert closed_call_p.name == "closed_call"
    assert call_p.call_primitive and closed_call_p.multiple_results
    assert {"call_p", "closed_call_p"} <= set(dir(primitives))


def test_staged_equations_print_as_jax_prints_them():
    closed = plax.make_jaxpr(_sin_mul)(1.0, 2.0)
    jaxpr = plax.make_jaxpr(lambda x, y: closed_call_p.bind(x, y, call_jaxpr=closed))(1.0, 2.0)
    assert str(jaxpr) == (
        "{ lambda ; a:f32[] b:f32[]. let\n"
        "    c:f32[] = closed_call[\n"
        "      call_jaxpr={ lambda ; a:f32[] b:f32[]. let\n"
        "          c:f32[] = sin a\n"
        "          d:f32[] = mul c b\n"
        "        in (d,) }\n"
        "    ] a b\n"
        "  in (c,) }")
    traced = plax.make_jaxpr(lambda x, y: call_p.bind(_wrap(_sin_mul, x, y), x, y))(1.0, 2.0)
    assert str(traced) == str(jaxpr).replace("closed_call[", "call[")


def test_call_holds_an_open_jaxpr_and_closed_call_a_closed_one():
    """As in JAX (interpreters such as numpyro's read ``call_jaxpr.invars`` for call)."""
    def both(x, y):
        a, = call_p.bind(x, y, subfuns=(_wrap(_sin_mul, x, y),))
        b, = closed_call_p.bind(x, y, subfuns=(_wrap(_sin_mul, x, y),))
        return a + b

    call_eqn, closed_eqn, _ = plax.make_jaxpr(both)(1.0, 2.0).eqns
    assert type(call_eqn.params["call_jaxpr"]) is Jaxpr
    assert not call_eqn.params["call_jaxpr"].constvars
    assert type(closed_eqn.params["call_jaxpr"]) is ClosedJaxpr


def test_eagerly_the_function_runs_in_python_and_under_jit_it_is_traced_once():
    seen = []

    def body(x):
        seen.append(type(x).__name__)
        return [x * 3.0]

    x = np.float32(0.5)
    assert float(call_p.bind(_wrap(body, x), x)[0]) == 1.5
    assert seen == ["float32"]  # called on the value itself, not a tracer
    jitted = plax.jit(lambda x: closed_call_p.bind(x, subfuns=(_wrap(body, x),))[0] + 1.0)
    assert float(jitted(x)) == 2.5 and float(jitted(x)) == 2.5
    assert len(seen) == 2


def test_closed_over_values_become_leading_operands():
    c = jnp.arange(3.0)

    def scaled(x):
        return [x * c]

    k = lambda x: closed_call_p.bind(x, subfuns=(_wrap(scaled, x),))[0]
    eqn, = plax.make_jaxpr(k)(2.0).eqns
    assert len(eqn.invars) == 2 and eqn.params["call_jaxpr"].consts == []
    np.testing.assert_allclose(plax.jit(k)(2.0), [0.0, 2.0, 4.0])
    np.testing.assert_allclose(plax.grad(lambda x: jnp.sum(k(x)))(2.0), 3.0)


def test_a_closed_jaxpr_with_consts_is_called_as_given():
    c = np.array([1.0, -2.0, 0.5], np.float32)
    closed = plax.make_jaxpr(lambda x: [jnp.exp(x) * c])(np.zeros(3, np.float32))
    assert len(closed.consts) == 1
    f = lambda x: closed_call_p.bind(x, call_jaxpr=closed)[0]
    x = np.array([0.1, 0.2, -0.3], np.float32)
    np.testing.assert_allclose(f(x), np.exp(x) * c, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(f)(x), np.exp(x) * c, rtol=1e-6)
    np.testing.assert_allclose(plax.grad(lambda x: jnp.sum(f(x)))(x), np.exp(x) * c, rtol=1e-6)
    np.testing.assert_allclose(plax.vmap(f)(np.stack([x, -x])),
                               np.exp(np.stack([x, -x])) * c, rtol=1e-6)


def test_closed_call_lowers_to_a_call_and_call_inlines():
    # closed_call is a private function @closed_call and a func.call of it, as JAX lowers it
    # (the boundary changes what XLA folds, and so the bits); call is inlined.
    f = plax.jit(lambda x, y: closed_call_p.bind(x, y, subfuns=(_wrap(_sin_mul, x, y),)))
    text = f.lower(1.0, 2.0).as_text()
    callee = text[text.index("func.func private @closed_call"):]  # (after @main)
    assert "stablehlo.sine" in callee and text.count("callee = @closed_call") == 1
    assert float(f(1.0, 2.0)[0]) == pytest.approx(np.sin(1.0) * 2.0, rel=1e-6)
    g = plax.jit(lambda x, y: call_p.bind(x, y, subfuns=(_wrap(_sin_mul, x, y),)))
    text = g.lower(1.0, 2.0).as_text()
    assert "stablehlo.sine" in text and "func.call" not in text


def test_effects_pass_through_and_keep_an_unused_call():
    seen = []

    def body(x):
        plax.debug.callback(lambda v: seen.append(float(v)), x)
        return [x * 2.0]

    def f(x):
        closed_call_p.bind(x, subfuns=(_wrap(body, x),))  # result unused
        return x + 1.0

    closed = plax.make_jaxpr(f)(1.0)
    assert closed.eqns[0].effects  # the callback's effect, seen on the call
    pruned, _ = dce_closed(closed, [True])
    assert [e.primitive.name for e in pruned.eqns] == ["closed_call", "add"]
    assert float(plax.jit(f)(1.5)) == 2.5
    assert seen == [1.5]


def test_checkify_checks_inside_the_body():
    def body(x):
        checkify.check(jnp.all(x > 0), "x must be positive")
        return [jnp.log(x) / x[0]]

    f = lambda x: closed_call_p.bind(x, subfuns=(_wrap(body, x),))[0]
    checked = checkify.checkify(plax.jit(f), errors=checkify.all_checks)
    err, out = checked(jnp.array([1.0, -2.0]))
    assert err.get().startswith("x must be positive (`check` failed)")
    err, out = checked(jnp.array([1.0, 2.0]))
    assert err.get() is None
    np.testing.assert_allclose(out, [0.0, np.log(2.0)], rtol=1e-6)
    err, _ = checkify.checkify(plax.jit(lambda x: call_p.bind(_wrap(body, x), x)[0]),
                               errors=checkify.float_checks)(jnp.array([0.0, 2.0]))
    assert "division by zero" in err.get()


def test_integer_outputs_have_float0_tangents():
    def body(x):
        return [x * 2.0, (x > 0).astype(jnp.int32)]

    h = lambda x: closed_call_p.bind(x, subfuns=(_wrap(body, x),))
    (y, i), (ty, ti) = plax.jvp(h, (1.0,), (1.0,))
    assert float(y) == 2.0 and int(i) == 1 and float(ty) == 2.0
    assert ti.dtype == plax.dtypes.float0


def test_key_reuse_is_followed_inside_the_call():
    def body(k):
        return [plax.random.bits(k)]

    def f(k):
        closed_call_p.bind(k, subfuns=(_wrap(body, k),))
        return plax.random.bits(k)

    with plax.debug_key_reuse(True):
        with pytest.raises(KeyReuseError, match="consumed"):
            plax.jit(f)(plax.random.key(0))


def test_a_provenance_interpreter_written_for_jax_walks_the_bodies():
    """numpyro's eval_provenance: call's call_jaxpr is a Jaxpr, closed_call's a ClosedJaxpr."""
    def deps(jaxpr, ins):
        env = dict(zip(jaxpr.invars, ins))
        for e in jaxpr.eqns:
            got = [env.get(v, frozenset()) for v in e.invars if not hasattr(v, "val")]
            if e.primitive is call_p:
                outs = deps(e.params["call_jaxpr"], got)
            elif e.primitive is closed_call_p:
                outs = deps(e.params["call_jaxpr"].jaxpr, got)
            else:
                outs = [frozenset().union(*got)] * len(e.outvars)
            env.update(zip(e.outvars, outs))
        return [env.get(v, frozenset()) for v in jaxpr.outvars]

    def body(x, y, z):
        return [x * 2.0, y + z]

    def f(x, y, z):
        a, b = call_p.bind(_wrap(body, x, y, z), x, y, z)
        c, d = closed_call_p.bind(a, b, z, subfuns=(_wrap(body, a, b, z),))
        return c, d

    closed = plax.make_jaxpr(f)(1.0, 2.0, 3.0)
    assert deps(closed.jaxpr, [{"x"}, {"y"}, {"z"}]) == [{"x"}, {"y", "z"}]


def test_bad_binds_name_the_problem():
    closed = plax.make_jaxpr(_sin_mul)(1.0, 2.0)
    with pytest.raises(TypeError, match="needs the function to call"):
        call_p.bind(1.0, 2.0)
    with pytest.raises(TypeError, match="either a function or call_jaxpr"):
        closed_call_p.bind(_wrap(_sin_mul, 1.0, 2.0), 1.0, 2.0, call_jaxpr=closed)
    with pytest.raises(TypeError, match=r"closed_call was traced for arguments \(f32\[\], "
                                        r"f32\[\]\) but called with \(f32\[3\]"):
        plax.make_jaxpr(lambda x: closed_call_p.bind(x, x, call_jaxpr=closed))(jnp.ones(3))
    c = np.arange(2.0, dtype=np.float32)
    open_with_consts = plax.make_jaxpr(lambda x: [x * c])(1.0).jaxpr
    with pytest.raises(TypeError, match="call_jaxpr has 1 constvars"):
        call_p.bind(1.0, call_jaxpr=open_with_consts)
