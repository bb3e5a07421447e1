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
from plax.lax.transcendental import sin_p


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
