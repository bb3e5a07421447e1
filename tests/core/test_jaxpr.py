"""The jaxpr IR: staging, printing, checking, evaluation and dead-code elimination."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, JaxprTypeError, Literal, Var,
                             check_jaxpr, eval_jaxpr, _letters)
from plax.core.dce import dce_jaxpr
from plax.core.avals import ShapedArray
from plax.first_order.transcendental import sin_p


def test_print_one_equation_on_one_line():
    j = plax.make_jaxpr(lambda x: lax.sin(x))(np.ones(3, np.float32))
    assert str(j) == "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"


def test_print_multi_line_with_literals():
    j = plax.make_jaxpr(lambda x: lax.add(lax.mul(lax.sin(x), 2.0), x))(np.ones(3, np.float32))
    assert str(j) == ("{ lambda ; a:f32[3]. let\n"
                      "    b:f32[3] = sin a\n"
                      "    c:f32[3] = mul b 2.0:f32[]\n"
                      "    d:f32[3] = add c a\n"
                      "  in (d,) }")


def test_print_identity_and_multiple_outputs():
    assert str(plax.make_jaxpr(lambda x: x)(1.0)) == "{ lambda ; a:f32[]. let  in (a,) }"
    j = plax.make_jaxpr(lambda x, y: (y, x))(1.0, np.int32(2))
    assert str(j) == "{ lambda ; a:f32[] b:i32[]. let  in (b, a) }"


def test_params_printed_sorted():
    j = plax.make_jaxpr(lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN))(1.0)
    assert "round[rounding_method=" in str(j)
    j = plax.make_jaxpr(lambda x: lax.convert_element_type(x, np.int32))(np.ones(2, np.float32))
    assert "convert_element_type[new_dtype=int32 weak_type=False] a" in str(j)


def test_unused_outputs_print_as_underscore():
    def f(x):
        lax.sin(x)
        return lax.cos(x)
    j = plax.make_jaxpr(f)(1.0)
    assert "_:f32[] = sin a" in str(j)
    assert "b:f32[] = cos a" in str(j)


def test_variable_names_run_past_z():
    assert [_letters(i) for i in (0, 25, 26, 27, 51, 52)] == ["a", "z", "ba", "bb", "bz", "ca"]
    j = plax.make_jaxpr(lambda x: [lax.mul(x, float(i)) for i in range(28)])(1.0)
    assert "ba:f32[] = mul a 25.0:f32[]" in str(j)


def test_constants_are_hoisted_and_scalars_inlined():
    c = jnp.arange(3.0)
    j = plax.make_jaxpr(lambda x: lax.add(lax.add(x, c), 1.0))(np.ones(3, np.float32))
    assert str(j).startswith("{ lambda a:f32[3]; b:f32[3]. let")
    assert len(j.consts) == 1
    np.testing.assert_array_equal(np.asarray(j.consts[0]), [0, 1, 2])
    assert "1.0:f32[]" in str(j)
    # the same constant used twice is one constvar
    j2 = plax.make_jaxpr(lambda x: lax.add(lax.add(x, c), c))(np.ones(3, np.float32))
    assert len(j2.jaxpr.constvars) == 1


def test_make_jaxpr_pytrees_static_argnums_and_return_shape():
    def f(n, tree):
        return {"s": lax.mul(tree["a"], float(n)), "t": (tree["b"],)}
    j, shapes = plax.make_jaxpr(f, static_argnums=0, return_shape=True)(
        3, {"a": np.ones(2, np.float32), "b": np.int32(1)})
    assert "mul a 3.0:f32[]" in str(j)
    assert shapes["s"].shape == (2,) and shapes["s"].dtype == np.float32
    assert shapes["t"][0].shape == () and shapes["t"][0].dtype == np.int32


def test_make_jaxpr_accepts_shape_dtype_structs():
    j = plax.make_jaxpr(lax.sin)(plax.ShapeDtypeStruct((2, 5), np.float32))
    assert j.in_avals == [ShapedArray((2, 5), np.float32)]


def test_make_jaxpr_bad_static_argnums():
    with pytest.raises(ValueError, match="static_argnums 3 is out of range"):
        plax.make_jaxpr(lambda x: x, static_argnums=3)(1.0)


def test_weak_types_in_jaxpr():
    j = plax.make_jaxpr(lambda x: lax.add(x, 1.0))(1.0)
    assert j.out_avals[0].weak_type
    j = plax.make_jaxpr(lambda x: lax.add(x, 1.0))(np.float32(1.0))
    assert not j.out_avals[0].weak_type


def test_eval_jaxpr_matches_eager():
    x = np.linspace(-1, 1, 5).astype(np.float32)
    f = lambda x: lax.mul(lax.exp(x), lax.cos(x))  # noqa: E731
    j = plax.make_jaxpr(f)(x)
    out, = eval_jaxpr(j.jaxpr, j.consts, x)
    np.testing.assert_allclose(np.asarray(out), np.exp(x) * np.cos(x), rtol=1e-6)


def test_eval_jaxpr_wrong_arity():
    j = plax.make_jaxpr(lax.sin)(1.0)
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        eval_jaxpr(j.jaxpr, j.consts, 1.0, 2.0)


def test_nested_staging_closes_over_outer_tracers():
    # An inner trace hoists the outer tracer as a constant; evaluating the
    # inner jaxpr in the outer trace passes it back in.
    def outer(x):
        inner = plax.make_jaxpr(lambda y: lax.mul(y, x))(1.0)
        assert len(inner.consts) == 1
        return eval_jaxpr(inner.jaxpr, inner.consts, 2.0)[0]
    j = plax.make_jaxpr(outer)(3.0)
    assert "mul 2.0:f32[] a" in str(j)


def test_check_jaxpr_accepts_staged_and_rejects_broken():
    j = plax.make_jaxpr(lambda x: lax.add(lax.sin(x), x))(np.ones(2, np.float32))
    check_jaxpr(j.jaxpr)
    a = Var(ShapedArray((2,), np.float32))
    b = Var(ShapedArray((3,), np.float32))  # wrong output type
    bad = Jaxpr([], [a], [b], [JaxprEqn([a], [b], sin_p, {})])
    with pytest.raises(JaxprTypeError, match="output typed f32\\[3\\] but the primitive produces f32\\[2\\]"):
        check_jaxpr(bad)
    c = Var(ShapedArray((2,), np.float32))
    undefined = Jaxpr([], [a], [b], [JaxprEqn([c], [b], sin_p, {})])
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        check_jaxpr(undefined)


def test_dce_removes_dead_equations():
    def f(x, y):
        dead = lax.cos(y)  # noqa: F841
        return lax.sin(x), lax.exp(y)
    j = plax.make_jaxpr(f)(1.0, 2.0)
    new, used = dce_jaxpr(j.jaxpr, [True, False])
    assert [e.primitive.name for e in new.eqns] == ["sin"]
    assert used == [True, False]
    out, = eval_jaxpr(new, [], 0.5)  # the unused input is gone
    np.testing.assert_allclose(float(out), np.sin(0.5), rtol=1e-6)
    kept, used = dce_jaxpr(j.jaxpr, [True, False], instantiate=True)
    assert used == [True, False] and len(kept.invars) == 2
    out, = eval_jaxpr(kept, [], 0.5, 2.0)
    np.testing.assert_allclose(float(out), np.sin(0.5), rtol=1e-6)


def test_closed_jaxpr_requires_matching_consts():
    j = plax.make_jaxpr(lax.sin)(1.0)
    with pytest.raises(ValueError, match="needs 0 consts, got 1"):
        ClosedJaxpr(j.jaxpr, [1.0])


def test_literal_pretty():
    assert Literal(2, ShapedArray((), np.int32)).pretty() == "2:i32[]"
    assert Literal(True, ShapedArray((), np.bool_)).pretty() == "True:bool[]"


def test_make_jaxpr_axis_env_is_in_scope_while_tracing():
    from plax.core.trace import axis_env
    seen = []
    plax.make_jaxpr(lambda x: seen.append(axis_env()) or x, axis_env=[("i", 4), ("j", 2)])(1.0)
    assert seen == [(("i", 4), ("j", 2))]
    assert axis_env() == ()
    with pytest.raises(TypeError, match="axis_env entries must be"):
        plax.make_jaxpr(lambda x: x, axis_env=[("i", "four")])(1.0)


def test_sub_jaxprs_are_indented_inside_params():
    from plax.core.primitive import Primitive
    inner = plax.make_jaxpr(lambda y: lax.mul(lax.sin(y), 2.0))(1.0)
    call_p = Primitive("my_call")
    a, b = Var(ShapedArray((), np.float32)), Var(ShapedArray((), np.float32))
    outer = Jaxpr([], [a], [b], [JaxprEqn([a], [b], call_p, {"name": "f", "jaxpr": inner})])
    assert str(outer) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = my_call[\n"
        "      jaxpr={ lambda ; a:f32[]. let\n"
        "          b:f32[] = sin a\n"
        "          c:f32[] = mul b 2.0:f32[]\n"
        "        in (c,) }\n"
        "      name=f\n"
        "    ] a\n"
        "  in (b,) }")


def test_long_params_print_one_per_line_as_jax():
    """JAX breaks an equation's params onto separate lines when ``lhs = prim[params]`` is
    wider than 80 columns (the arguments after ``]`` do not count)."""
    from plax import lax
    x = np.ones((2,), np.float32)
    j = str(plax.make_jaxpr(lambda v: lax.dot_general(
        v, v, (((0,), (0,)), ((), ())), preferred_element_type=np.float32))(x))
    assert "dot_general[\n      dimension_numbers=(([0], [0]), ([], []))\n" in j
    assert "      preferred_element_type=float32\n    ] a a" in j
    for k, broken in ((20, False), (21, True)):
        j = str(plax.make_jaxpr(lambda v: lax.cumsum(np.ones((2,) * k, np.float32), axis=0,
                                                     reverse=True))(x))
        assert ("cumsum[\n      axis=0\n      reverse=True\n    ] " in j) == broken, j


# --- pretty_print options (expected texts printed by JAX 0.10.2 for the same function) -------
def _scoped(x, y):
    with plax.named_scope("outer"):
        z = jnp.sin(x) * 2.0
        with plax.named_scope("inner"):
            w = z + y
    return jnp.sum(w * jnp.cos(y), axis=0)


_SCOPED_LINES = ["c = sin a", "d = mul c 2.0:f32[]", "e = add d b", "f = cos b", "g = mul e f",
                 "h = reduce_sum[axes=(0,) out_sharding=None] g"]


def _typed(line):
    """``c = sin a`` with the binder's type, as print_shapes=True shows it."""
    name, rest = line.split(" = ", 1)
    return f"{name}:{'f32[4]' if name == 'h' else 'f32[3,4]'} = {rest}"


@pytest.fixture(scope="module")
def scoped_jaxpr():
    x = np.ones((3, 4), np.float32)
    return plax.make_jaxpr(_scoped)(x, x)


def test_pretty_print_defaults_equal_str(scoped_jaxpr):
    head = "{ lambda ; a:f32[3,4] b:f32[3,4]. let\n"
    want = head + "".join(f"    {_typed(l)}\n" for l in _SCOPED_LINES) + "  in (h,) }"
    assert scoped_jaxpr.pretty_print() == str(scoped_jaxpr) == want
    assert scoped_jaxpr.jaxpr.pretty_print() == want


def test_pretty_print_without_shapes_and_width(scoped_jaxpr):
    want = "{ lambda ; a b. let\n" + "".join(f"    {l}\n" for l in _SCOPED_LINES) + "  in (h,) }"
    assert scoped_jaxpr.pretty_print(print_shapes=False) == want
    assert scoped_jaxpr.jaxpr.pretty_print(print_shapes=False) == want
    # wide enough, the whole jaxpr fits on one line
    assert scoped_jaxpr.pretty_print(print_shapes=False, width=200) == (
        "{ lambda ; a b. let " + "; ".join(_SCOPED_LINES) + " in (h,) }")
    narrow = scoped_jaxpr.pretty_print(width=40)
    assert narrow.endswith("    h:f32[4] = reduce_sum[\n      axes=(0,)\n      out_sharding=None\n"
                           "    ] g\n  in (h,) }")
    assert scoped_jaxpr.pretty_print(width=200) == str(scoped_jaxpr)  # types too long for 200


def test_pretty_print_name_stack_notes(scoped_jaxpr):
    scopes = ["outer", "outer", "outer/inner", "", "", ""]
    lines = [f"    {_typed(l)}" for l in _SCOPED_LINES]
    column = max(len(l) for l in lines)
    want = ("{ lambda ; a:f32[3,4] b:f32[3,4]. let\n"
            + "".join(f"{l.ljust(column)} # [{s}]\n" for l, s in zip(lines, scopes)) + "  in (h,) }")
    assert scoped_jaxpr.pretty_print(name_stack=True) == want
    text = scoped_jaxpr.pretty_print(name_stack=True, print_shapes=False, width=50)
    assert text.splitlines()[1] == "    c = sin a" + " " * 36 + " # [outer]"


def test_pretty_print_source_info_notes():
    def f(x):
        y = jnp.sin(x)
        return y * 2.0
    line = f.__code__.co_firstlineno + 1
    j = plax.make_jaxpr(f)(1.0)
    # on one line, the line carries every equation's notes (JAX's layout)
    # (file:line:column, as JAX 0.10.2 prints them)
    at, at2 = f"{__file__}:{line}:12 (f)", f"{__file__}:{line + 1}:15 (f)"
    assert j.pretty_print(source_info=True).splitlines() == [
        f"{j} # {at}", " " * len(str(j)) + f" # {at2}"]
    text = j.pretty_print(source_info=True, name_stack=True, width=60)
    assert text.splitlines()[1:5] == [
        f"    b:f32[] = sin a           # {at}", " " * 29 + " # []",
        f"    c:f32[] = mul b 2.0:f32[] # {at2}", " " * 29 + " # []"]


def test_pretty_print_colours_and_effects(scoped_jaxpr):
    kw, end, ty, ty_end = "\x1b[34;1m", "\x1b[39;22m", "\x1b[35m", "\x1b[39m"
    text = scoped_jaxpr.pretty_print(use_color=True)
    assert text.startswith(f"{{ {kw}lambda {end}; a{ty}:f32[3,4]{ty_end} b{ty}:f32[3,4]{ty_end}. "
                           f"{kw}let\n    {end}c{ty}:f32[3,4]{ty_end} = sin a\n")
    assert text.endswith(f"\n  {kw}in {end}(h,) }}")
    identity = plax.make_jaxpr(lambda x: x)(1.0)
    assert identity.pretty_print(use_color=True) == (
        f"{{ {kw}lambda {end}; a{ty}:f32[]{ty_end}. {kw}let{end}  {kw}in {end}(a,) }}")
    assert identity.pretty_print(print_effects=True) == "{ lambda ; a:f32[]. let  in (a,) : {  } }"

    def printing(x):
        plax.debug.print("x={x}", x=x)
        return x
    assert plax.make_jaxpr(printing)(1.0).pretty_print(print_effects=True).endswith(
        "in (a,) : { Debug } }")


def test_short_jaxprs_print_on_one_line_as_jax():
    j = plax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0)
    assert str(j) == "{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b 2.0:f32[] in (c,) }"
    j = plax.make_jaxpr(lambda p, x: lax.cond(p, lambda x: jnp.sin(x), lambda x: -x, x))(True, 1.0)
    wide = j.pretty_print(width=300)
    assert "\n" not in wide and "cond[branches=({ lambda ; a:f32[]. let" in wide
    assert "    d:f32[] = cond[\n      branches=(\n        { lambda ;" in str(j)


def test_pretty_print_generic_params_and_bad_options():
    j = plax.make_jaxpr(lambda x: lax.convert_element_type(x, np.int32))(1.0)
    assert "sharding=" not in str(j)
    assert "sharding=None" in j.pretty_print(custom_pp_eqn_rules=False)
    assert j.pretty_print(separable_lines=True, annotation_prefix=" # ") == str(j)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['colour'\]"):
        j.pretty_print(colour=True)
    with pytest.raises(ValueError, match="width must be a positive int"):
        j.pretty_print(width=0)
