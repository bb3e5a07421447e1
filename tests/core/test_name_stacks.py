"""Name stacks record scopes and the transformations applied (``jvp(foo)``), relative to
the body they are traced in; lowering scopes bodies under their equation (``while/body``)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.source_info import Transform, scope_path


@pytest.mark.parametrize("entries,path", [
    ((), ""), (("a", "b"), "a/b"), (("foo", Transform("vmap"), "bar", "baz"), "foo/vmap(bar)/baz"),
    ((Transform("vmap"), Transform("jvp"), "foo"), "vmap(jvp(foo))"),
    (("foo", Transform("jvp")), "foo/jvp()"),
    ((Transform("transpose"), Transform("jvp"), "foo"), "transpose(jvp(foo))")])
def test_scope_path(entries, path):
    assert scope_path(entries) == path


def test_a_transform_never_equals_a_scope_of_its_name():
    assert Transform("jvp") != "jvp" and Transform("jvp") == Transform("jvp")
    assert len({Transform("jvp"), "jvp"}) == 2


def _stacks(closed):
    return [str(e.source_info.name_stack) for e in closed.eqns]


def _scoped(x):
    with plax.named_scope("foo"):
        return 2.0 * jnp.sin(x)


def test_transformations_wrap_the_scopes_traced_under_them():
    assert set(_stacks(plax.make_jaxpr(plax.vmap(_scoped))(np.ones(2, np.float32)))) == \
        {"vmap(foo)"}
    assert set(_stacks(plax.make_jaxpr(lambda x, t: plax.jvp(_scoped, (x,), (t,)))(1.0, 1.0))) \
        == {"jvp(foo)"}
    stacks = _stacks(plax.make_jaxpr(plax.value_and_grad(_scoped))(1.0))
    assert "jvp(foo)" in stacks and "transpose(jvp(foo))" in stacks


def test_bodies_are_relative_and_scoped_under_their_equation_when_lowered():
    @plax.named_scope("foo")
    def f(x):
        @plax.named_scope("bar")
        def body(v):
            return v + 1.0
        return lax.while_loop(lambda v: v < 5.0, body, x)

    closed = plax.make_jaxpr(f)(0.0)
    loop = closed.eqns[0]
    assert str(loop.source_info.name_stack) == "foo"
    assert [str(e.source_info.name_stack) for e in loop.params["body_jaxpr"].eqns] == ["bar"]
    text = plax.jit(f).lower(0.0).as_text(debug_info=True)
    assert "foo/while/body/bar/add" in text and "foo/while/cond/lt" in text

    jitted = plax.jit(plax.named_scope("inner")(lambda x: jnp.cos(x)))
    text = plax.jit(lambda x: plax.jvp(jitted, (x,), (x,))).lower(1.0).as_text(
        debug_info=True)
    assert "jvp(jit(<lambda>))/inner/cos" in text


@pytest.mark.parametrize("entries,prim,path", [
    ((), "sin", "sin"), (("foo",), "sin", "foo/sin"),
    ((Transform("jvp"),), "sin", "jvp()/sin"),
    ((Transform("transpose"), Transform("jvp"), "foo"), "mul", "transpose(jvp(foo))/mul")])
def test_op_path_puts_the_primitive_after_the_scopes(entries, prim, path):
    from plax.core.source_info import op_path
    assert op_path(entries, prim) == path
