"""debug.print and debug.callback: printed values and order under every transformation."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import NamedSharding, PartitionSpec as P


def printed(capfd) -> list:
    plax.effects_barrier()
    return capfd.readouterr().out.splitlines()


def test_eager_prints_now(capfd):
    plax.debug.print("x={x} y={}", 2.5, x=jnp.arange(3.0))
    assert capfd.readouterr().out == "x=[0. 1. 2.] y=2.5\n"


def test_jit_prints_runtime_values_each_call(capfd):
    f = plax.jit(lambda x: (plax.debug.print("got {}", x * 2), x + 1)[1])
    for v in (1.0, 5.0):
        np.testing.assert_allclose(f(np.float32(v)), v + 1)
    assert printed(capfd) == ["got 2.0", "got 10.0"]


def test_pytree_arguments_print_like_arrays(capfd):
    plax.jit(lambda x: plax.debug.print("{a}", a={"k": x}))(np.float32(1.0))
    assert printed(capfd) == ["{'k': Array(1., dtype=float32)}"]


def test_ordered_prints_keep_program_order_across_calls(capfd):
    f = plax.jit(lambda x: plax.debug.print("i={}", x, ordered=True))
    for i in range(20):
        f(np.int32(i))
    assert printed(capfd) == [f"i={i}" for i in range(20)]


def test_vmap_prints_once_per_member_in_order(capfd):
    plax.vmap(lambda x, y: plax.debug.print("{} {}", x, y), in_axes=(0, None))(
        jnp.arange(3.0), 7.0)
    plax.jit(plax.vmap(lambda x: plax.debug.print("j{}", x)))(jnp.arange(3))
    assert printed(capfd) == ["0.0 7.0", "1.0 7.0", "2.0 7.0", "j0", "j1", "j2"]


def test_nested_vmap_prints_every_member(capfd):
    plax.vmap(plax.vmap(lambda x: plax.debug.print("{}", x)))(jnp.arange(4).reshape(2, 2))
    assert printed(capfd) == ["0", "1", "2", "3"]


def test_grad_prints_primal_in_forward_pass(capfd):
    g = plax.grad(lambda x: (plax.debug.print("fwd {}", x), x ** 2)[1])
    assert float(g(3.0)) == 6.0
    assert float(plax.jit(g)(2.0)) == 4.0
    assert printed(capfd) == ["fwd 3.0", "fwd 2.0"]


def test_custom_vjp_bwd_prints_in_backward_pass(capfd):
    @plax.custom_vjp
    def h(x):
        return x * 2

    def bwd(_, g):
        plax.debug.print("bwd {}", g)
        return (g * 2,)

    h.defvjp(lambda x: (h(x), None), bwd)
    out = plax.jit(plax.grad(lambda x: h(x).sum()))(jnp.ones(2))
    np.testing.assert_allclose(out, [2.0, 2.0])
    assert printed(capfd) == ["bwd [1. 1.]"]


def test_scan_prints_once_per_iteration(capfd):
    def body(c, x):
        plax.debug.print("c={} x={}", c, x, ordered=True)
        return c + x, c

    c, _ = plax.jit(lambda xs: lax.scan(body, 0.0, xs))(jnp.arange(3.0))
    assert float(c) == 3.0
    assert printed(capfd) == ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0"]


def test_while_and_fori_print_each_iteration(capfd):
    def w(n):
        def body(i):
            plax.debug.print("w{}", i, ordered=True)
            return i + 1
        return lax.while_loop(lambda i: i < n, body, 0)

    assert int(plax.jit(w)(3)) == 3
    lax.fori_loop(0, 2, lambda i, c: (plax.debug.print("f{}", i), c + i)[1], 0)
    assert printed(capfd) == ["w0", "w1", "w2", "f0", "f1"]


def test_cond_prints_only_taken_branch(capfd):
    def g(x):
        return lax.cond(x > 0, lambda x: (plax.debug.print("pos {}", x, ordered=True), x)[1],
                        lambda x: (plax.debug.print("neg {}", x), -x)[1], x)

    f = plax.jit(g)
    assert float(f(1.0)) == 1.0 and float(f(-2.0)) == 2.0
    assert printed(capfd) == ["pos 1.0", "neg -2.0"]


def test_nested_jit_with_ordered_prints(capfd):
    inner = plax.jit(lambda x: (plax.debug.print("in {}", x, ordered=True), x * 2)[1])
    out = plax.jit(lambda x: inner(x) + inner(x + 1))(1.0)
    assert float(out) == 6.0
    assert printed(capfd) == ["in 1.0", "in 2.0"]


def test_shard_map_prints_one_line_per_device(capfd):
    mesh = plax.make_mesh((8,), ("x",))
    x = plax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("x")))
    out = plax.shard_map(lambda b: (plax.debug.print("blk {}", b), b * 2)[1], mesh=mesh,
                         in_specs=P("x"), out_specs=P("x"))(x)
    np.testing.assert_allclose(out, np.arange(16.0) * 2)
    lines = printed(capfd)
    assert sorted(lines) == sorted(f"blk [{2 * i}. {2 * i + 1}.]" for i in range(8))


def test_pmap_prints_once_per_device(capfd):
    n = plax.device_count()  # (8 in the suite, 1 in its one-device run)
    out = plax.pmap(lambda x: (plax.debug.print("pm {}", x), x + 1)[1])(jnp.arange(float(n)))
    np.testing.assert_allclose(out, np.arange(float(n)) + 1)
    assert sorted(printed(capfd)) == sorted(f"pm {float(i)}" for i in range(n))


def test_sharded_jit_prints_whole_value_once(capfd):
    mesh = plax.make_mesh((8,), ("x",))
    x = plax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("x")))
    out = plax.jit(lambda x: (plax.debug.print("sum {}", x.sum()), x * 2)[1])(x)
    np.testing.assert_allclose(out, np.arange(16.0) * 2)
    assert printed(capfd) == ["sum 120.0"]


def test_ordered_effects_over_several_devices_raise():
    mesh = plax.make_mesh((8,), ("x",))
    x = plax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("x")))
    f = plax.jit(lambda x: plax.debug.print("{}", x.sum(), ordered=True))
    with pytest.raises(ValueError, match="ordered effects are not supported for more than 1"):
        f(x)


def test_format_errors():
    with pytest.raises(ValueError, match="Unused positional arguments"):
        plax.debug.print("{}", 1, 2)
    with pytest.raises(ValueError, match="Unused keyword arguments.*f-string"):
        plax.debug.print("no placeholders", x=2)


def test_two_call_forms(capfd):
    plax.jit(lambda x: plax.debug.print(ordered=True)("t {}", x))(1)
    plax.jit(lambda x: plax.debug.callback(ordered=True)(lambda v: print("cb", v), x))(2)
    assert printed(capfd) == ["t 1", "cb 2"]


def test_debug_callback_gets_arrays_and_static_args():
    seen = []
    f = plax.jit(lambda x: plax.debug.callback(lambda v, tag: seen.append((v, tag)),
                                               x, "tag"))
    f(jnp.ones((2, 3)))
    plax.effects_barrier()
    (v, tag), = seen
    assert isinstance(v, plax.Array) and v.shape == (2, 3) and v.dtype == np.float32
    assert tag == "tag"
    np.testing.assert_array_equal(v, np.ones((2, 3)))


def test_debug_callback_under_jit_stages_a_concrete_array_as_a_host_value():
    # A concrete array meeting a traced one under jit (a cotangent a custom_vjp's bwd made
    # from a Python float) is an operand: the callback gets it as a non-weak host value.
    seen, weak = [], plax.device_put(3.0)
    assert weak.weak_type
    f = plax.jit(lambda x: plax.debug.callback(lambda *v: seen.extend(v), x, weak,
                                               ordered=True))
    f(jnp.float32(1))
    plax.effects_barrier()
    assert [(repr(v), v.weak_type) for v in seen] == [
        ("Array(1., dtype=float32)", False), ("Array(3., dtype=float32)", False)]


def test_effects_on_jaxprs_and_dce_keeps_them():
    def f(x):
        plax.debug.print("{}", x)
        plax.debug.print("{}", x, ordered=True)
        return x + 1

    closed = plax.make_jaxpr(f)(1.0)
    assert {repr(e) for e in closed.effects} == {"Debug", "OrderedDebug"}
    assert [repr(e) for e in closed.eqns[0].effects] == ["Debug"]
    assert not closed.eqns[-1].effects
    outer = plax.make_jaxpr(plax.jit(f))(1.0)
    assert {repr(e) for e in outer.eqns[0].effects} == {"Debug", "OrderedDebug"}
    from plax.core.dce import dce_jaxpr
    pruned, _ = dce_jaxpr(closed.jaxpr, [False])
    assert [e.primitive.name for e in pruned.eqns] == ["debug_callback", "debug_callback"]
    text = str(closed)
    assert "debug_callback[" in text and "effect=OrderedDebug" in text


def _shows(x):
    plax.debug.print("{}", x)
    return x * 2


# Where an equation holds the jaxpr that prints: a jaxpr parameter (jit), a tuple of them
# (cond's branches), one body inside another (scan in cond), none (tuple-valued parameters).
HOLDERS = {
    "jit": (lambda x: plax.jit(_shows)(x), {"Debug"}),
    "cond branches": (lambda x: lax.cond(x > 0, _shows, lambda y: y, x), {"Debug"}),
    "scan in cond": (lambda x: lax.cond(x > 0, lambda y: lax.scan(
        lambda c, _: (_shows(c), None), y, None, length=2)[0], lambda y: y, x), {"Debug"}),
    "no jaxprs": (lambda x: jnp.reshape(jnp.broadcast_to(x, (2, 3)), (3, 2)).sum(), set()),
}


@pytest.mark.parametrize("name", HOLDERS)
def test_effects_of_an_equation_include_those_of_the_jaxprs_it_holds(name):
    f, want = HOLDERS[name]
    closed = plax.make_jaxpr(f)(1.0)
    assert {repr(e) for e in closed.effects} == want
    assert {repr(e) for eqn in closed.eqns for e in eqn.effects} == want


def test_print_only_function_finishes_before_barrier_returns(capfd):
    f = plax.jit(lambda x: plax.debug.print("only {}", x))
    assert f(3) is None
    assert printed(capfd) == ["only 3"]


def test_debug_log_sends_a_record_naming_the_callers_line(caplog):
    import logging
    with caplog.at_level(logging.INFO, logger="plax.debug"):
        plax.jit(lambda x: plax.debug.log("v={}", x))(3.0)
        plax.effects_barrier()
    (record,) = [r for r in caplog.records if r.name == "plax.debug"]
    assert record.getMessage() == "v=3.0" and record.levelno == logging.INFO
    assert record.pathname == __file__


def test_effect_classes_are_exported():
    closed = plax.make_jaxpr(lambda x: plax.debug.print("{}", x, ordered=True))(1.0)
    (effect,) = closed.effects
    assert isinstance(effect, plax.debug.OrderedDebugEffect)
    assert isinstance(effect, plax.debug.DebugEffect) and effect.ordered
