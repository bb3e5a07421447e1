"""The jaxpr toolkit (jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr, batch_jaxpr,
dce_jaxpr) on small jaxprs, the one DCE, sub-jaxpr walking and the cache registry."""
import gc
import weakref

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core import caches
from plax.core.avals import ShapedArray
from plax.core.dce import dce_jaxpr
from plax.core.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, JaxprTypeError, Var, check_jaxpr,
                             consts_as_inputs, eval_closed_jaxpr, subjaxprs)
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, all_primitives, effectful_primitives
from plax.transforms.toolkit import (batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr,
                                     transpose_jaxpr)
from plax.transforms.vmap import AxisData

F = np.float32


def closed_of(f, *args):
    return plax.make_jaxpr(f)(*args)


def run(closed, *args):
    return [np.asarray(v) for v in eval_closed_jaxpr(closed, *args)]


# --- jvp_jaxpr -----------------------------------------------------------------------------
def test_jvp_jaxpr_values_and_nonzero_pattern():
    closed = closed_of(lambda x, y: (jnp.sin(x) * y, y * 2.0), F(0.3), F(1.5))
    jvp, out_nz = jvp_jaxpr(closed, [True, False], instantiate=False)
    assert out_nz == [True, False]  # the second output does not depend on x
    p0, p1, t0 = run(jvp, F(0.3), F(1.5), F(1.0))
    np.testing.assert_allclose([p0, p1], [np.sin(0.3) * 1.5, 3.0], rtol=1e-6)
    np.testing.assert_allclose(t0, np.cos(0.3) * 1.5, rtol=1e-6)


def test_jvp_jaxpr_instantiate_returns_zero_tangents():
    closed = closed_of(lambda x, y: (jnp.sin(x) * y, y * 2.0), F(0.3), F(1.5))
    jvp, out_nz = jvp_jaxpr(closed, [True, False], instantiate=[False, True])
    assert out_nz == [True, True]
    *_, t0, t1 = run(jvp, F(0.3), F(1.5), F(2.0))
    np.testing.assert_allclose(t0, 2 * np.cos(0.3) * 1.5, rtol=1e-6)
    assert t1 == 0.0


def test_jvp_jaxpr_is_cached_per_body_and_pattern():
    closed = closed_of(lambda x: jnp.exp(x), F(1.0))
    a = jvp_jaxpr(closed, [True], False)
    assert jvp_jaxpr(closed, [True], False) is a
    assert jvp_jaxpr(closed, [True], True) is not a


# --- partial_eval_jaxpr ------------------------------------------------------------------------
def test_partial_eval_splits_known_and_unknown():
    closed = closed_of(lambda x, y: (jnp.sin(x) * y, jnp.cos(x)), F(0.4), F(2.0))
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [False, True], False)
    assert out_unknowns == [True, False]
    assert "cos" in str(known) and "sin" in str(known) and "sin" not in str(unknown)
    known_out = run(known, F(0.4))
    assert len(known_out) == 1 + num_res and num_res >= 1
    np.testing.assert_allclose(known_out[0], np.cos(0.4), rtol=1e-6)
    out, = run(unknown, *known_out[1:], F(2.0))
    np.testing.assert_allclose(out, np.sin(0.4) * 2.0, rtol=1e-6)


def test_partial_eval_instantiate_makes_known_outputs_unknown():
    closed = closed_of(lambda x, y: (jnp.sin(x) * y, jnp.cos(x)), F(0.4), F(2.0))
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [False, True],
                                                               [False, True])
    assert out_unknowns == [True, True]
    res = run(known, F(0.4))
    assert len(res) == num_res  # every output now comes from the unknown side
    a, b = run(unknown, *res, F(2.0))
    np.testing.assert_allclose([a, b], [np.sin(0.4) * 2.0, np.cos(0.4)], rtol=1e-6)


def _carry_fixed_point(body, xs_unknown):
    """Iterate the unknown-ness of a loop carry to its fixed point, as scan will."""
    carry_unknown = False
    for _ in range(3):
        _, _, out_unknowns, _ = partial_eval_jaxpr(body, [carry_unknown, xs_unknown],
                                                   [carry_unknown, False])
        if out_unknowns[0] == carry_unknown:
            return carry_unknown, out_unknowns
        carry_unknown = out_unknowns[0]
    raise AssertionError("no fixed point")


def test_partial_eval_instantiate_reaches_a_carry_fixed_point():
    # The carry absorbs the unknown x: it becomes unknown on the second pass and stays so.
    body = closed_of(lambda c, x: (c + x, c * 2.0), F(1.0), F(1.0))
    carry_unknown, out_unknowns = _carry_fixed_point(body, True)
    assert carry_unknown and out_unknowns == [True, True]
    # A carry that never touches the unknown x stays known.
    body = closed_of(lambda c, x: (c * 2.0, c + x), F(1.0), F(1.0))
    carry_unknown, out_unknowns = _carry_fixed_point(body, True)
    assert not carry_unknown and out_unknowns == [False, True]


# --- transpose_jaxpr ---------------------------------------------------------------------------
def test_transpose_jaxpr_of_a_linear_body():
    closed = closed_of(lambda r, t: (r * t, t * 2.0), F(3.0), F(1.0))
    t_all = transpose_jaxpr(closed, [False, True], [True, True])
    ct_t, = run(t_all, F(3.0), F(1.5), F(0.25))
    np.testing.assert_allclose(ct_t, 3.0 * 1.5 + 2.0 * 0.25, rtol=1e-6)
    t_first = transpose_jaxpr(closed, [False, True], [True, False])
    ct_t, = run(t_first, F(3.0), F(1.5))
    np.testing.assert_allclose(ct_t, 3.0 * 1.5, rtol=1e-6)
    assert transpose_jaxpr(closed, [False, True], [True, False]) is t_first


def test_transpose_jaxpr_instantiates_zero_cotangents():
    closed = closed_of(lambda r, t: r * 2.0, F(3.0), F(1.0))  # t does not reach the output
    body = transpose_jaxpr(closed, [False, True], [True])
    ct_t, = run(body, F(3.0), F(5.0))
    assert ct_t.shape == () and ct_t == 0.0


# --- batch_jaxpr -------------------------------------------------------------------------------
def test_batch_jaxpr_dims_and_fixed_out_dims():
    closed = closed_of(lambda x, w: (jnp.sin(x) * w, w + 1.0), np.ones(3, F), np.ones(3, F))
    axis = AxisData(None, 4)
    jaxpr, consts, out_dims = batch_jaxpr(closed, axis, [0, None])
    assert out_dims[1] is None  # w is not batched, so neither is w + 1
    x = np.arange(12, dtype=F).reshape(4, 3)
    w = np.array([1.0, 2.0, 3.0], F)
    a, b = [np.asarray(v) for v in eval_closed_jaxpr(ClosedJaxpr(jaxpr, consts), x, w)]
    np.testing.assert_allclose(a, np.sin(x) * w, rtol=1e-6)
    np.testing.assert_allclose(b, w + 1.0)
    jaxpr2, consts2, out_dims2 = batch_jaxpr(closed, axis, [0, None], out_dims=[1, 0])
    a, b = [np.asarray(v) for v in eval_closed_jaxpr(ClosedJaxpr(jaxpr2, consts2), x, w)]
    assert out_dims2 == [1, 0]
    np.testing.assert_allclose(a, (np.sin(x) * w).T, rtol=1e-6)
    np.testing.assert_allclose(b, np.broadcast_to(w + 1.0, (4, 3)))
    assert batch_jaxpr(closed, axis, [0, None])[0] is jaxpr  # cached


# --- dce_jaxpr ---------------------------------------------------------------------------------
def _two_output_inner():
    return plax.jit(lambda x: (jnp.sin(x), jnp.cos(x)))


def test_dce_of_a_two_output_nested_jit_lowers_no_dead_op():
    inner = _two_output_inner()
    text = plax.jit(lambda x: inner(x)[0]).lower(F(1.0)).as_text()
    assert "stablehlo.sine" in text and "stablehlo.cosine" not in text
    text = plax.jit(lambda x: inner(x)[1]).lower(F(1.0)).as_text()
    assert "stablehlo.cosine" in text and "stablehlo.sine" not in text
    np.testing.assert_allclose(plax.jit(lambda x: inner(x)[1])(F(0.5)), np.cos(0.5), rtol=1e-6)


def test_dce_rule_shrinks_the_nested_body_and_reports_used_inputs():
    inner = plax.jit(lambda x, y: (jnp.sin(x), jnp.cos(y)))
    closed = closed_of(lambda x, y: inner(x, y), F(1.0), F(2.0))
    new, used = dce_jaxpr(closed.jaxpr, [True, False])
    assert used == [True, False]
    eqn, = new.eqns
    assert len(eqn.outvars) == 1 and len(eqn.invars) == 1
    body = eqn.params["jaxpr"]
    assert [e.primitive.name for e in body.eqns] == ["sin"] and len(body.jaxpr.invars) == 1
    out, = eval_closed_jaxpr(ClosedJaxpr(new, []), F(0.25))
    np.testing.assert_allclose(out, np.sin(0.25), rtol=1e-6)


def test_dce_keep_unused_jit_keeps_its_inputs():
    inner = plax.jit(lambda x, y: (jnp.sin(x), jnp.cos(y)), keep_unused=True)
    closed = closed_of(lambda x, y: inner(x, y), F(1.0), F(2.0))
    new, used = dce_jaxpr(closed.jaxpr, [True, False])
    eqn, = new.eqns
    assert len(eqn.invars) == 2 and len(eqn.outvars) == 1 and used == [True, True]


@pytest.fixture
def effect_primitive():
    prim = Primitive("test_effect")
    abstract_eval_rules[prim] = lambda x: x
    effectful_primitives.add(prim)
    yield prim
    effectful_primitives.discard(prim)
    del abstract_eval_rules[prim]
    all_primitives.remove(prim)


def test_dce_never_removes_effectful_equations(effect_primitive):
    a = ShapedArray((), np.dtype(F))
    x, dead, out = Var(a), Var(a), Var(a)
    sin_p = next(p for p in all_primitives if p.name == "sin")
    eqns = [JaxprEqn([x], [dead], effect_primitive, {}), JaxprEqn([x], [out], sin_p, {})]
    new, used = dce_jaxpr(Jaxpr([], [x], [out], eqns))
    assert [e.primitive.name for e in new.eqns] == ["test_effect", "sin"]
    # Inside a nested jit, too: the call survives with no used output.
    call = next(p for p in all_primitives if p.name == "jit")
    body = ClosedJaxpr(Jaxpr([], [x], [out], eqns), [])
    y, r = Var(a), Var(a)
    outer = Jaxpr([], [y], [y], [JaxprEqn([y], [r], call, dict(
        jaxpr=body, name="f", donated_invars=(False,), keep_unused=False, inline=False,
        device=None, compiler_options=None))])
    new, _ = dce_jaxpr(outer)
    assert [e.primitive.name for e in new.eqns] == ["jit"]
    with pytest.raises(ValueError, match="used_outputs has 2 entries for 1 outputs"):
        dce_jaxpr(outer, [True, False])


def test_grad_under_jit_drops_the_primal_value():
    closed = closed_of(plax.grad(lambda x: jnp.sin(x) * 3.0), F(1.0))
    assert [e.primitive.name for e in closed.eqns] == ["cos", "mul", "mul"], str(closed)


# --- sub-jaxprs, checking, consts -------------------------------------------------------------
def test_subjaxprs_sees_tuples_and_lists():
    j1 = closed_of(jnp.sin, F(1.0))
    j2 = closed_of(jnp.cos, F(1.0))
    found = list(subjaxprs({"branches": (j1, j2), "other": [j2.jaxpr], "n": 3}))
    assert found == [j1, j2, j2.jaxpr]


def test_check_jaxpr_recurses_into_nested_jaxprs():
    a = ShapedArray((), np.dtype(F))
    x, undefined, out = Var(a), Var(a), Var(a)
    sin_p = next(p for p in all_primitives if p.name == "sin")
    bad = ClosedJaxpr(Jaxpr([], [x], [out], [JaxprEqn([undefined], [out], sin_p, {})]), [])
    call = next(p for p in all_primitives if p.name == "jit")
    y, r = Var(a), Var(a)
    outer = Jaxpr([], [y], [r], [JaxprEqn([y], [r], call, dict(
        jaxpr=bad, name="f", donated_invars=(False,), keep_unused=False, inline=False,
        device=None, compiler_options=None))])
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        check_jaxpr(outer)


def test_consts_as_inputs_and_nested_lowering_keep_consts():
    table = np.array([1.0, 2.0, 3.0], F)
    closed = closed_of(lambda x: x * table, np.ones(3, F))
    callee, consts = consts_as_inputs(closed)
    assert not callee.consts and len(callee.jaxpr.invars) == 2 and len(consts) == 1
    assert consts_as_inputs(closed)[0] is callee  # the same body gives the same callee,
    assert consts_as_inputs(ClosedJaxpr(closed.jaxpr, consts))[0] is callee  # however wrapped
    out, = eval_closed_jaxpr(callee, *consts, np.full(3, 2.0, F))
    np.testing.assert_allclose(out, 2 * table)
    # A checkpointed body holding a constant lowers with it.
    f = plax.jit(plax.checkpoint(lambda x: jnp.sin(x) * table))
    np.testing.assert_allclose(f(np.ones(3, F)), np.sin(1.0) * table, rtol=1e-6)


# --- caches ------------------------------------------------------------------------------------
def _toolkit_caches():
    names = {"jvp_jaxpr", "partial_eval_jaxpr", "transpose_jaxpr", "batch_jaxpr"}
    found = [c for c in caches.registered_caches() if getattr(c, "name", None) in names]
    assert {c.name for c in found} == names
    return found


def _fresh_closures(n):
    def make(k):
        return plax.jit(lambda x: jnp.sin(x * k) * x)
    return [make(float(k)) for k in range(n)]


def test_clear_caches_empties_the_callee_caches():
    fs = _fresh_closures(50)
    for f in fs:  # tracing fills the caches: eval_shape spares 50 compiles
        g = plax.eval_shape(plax.vmap(plax.grad(f)), np.linspace(0.1, 1.0, 3).astype(F))
        assert g.shape == (3,)
    assert sum(len(c) for c in _toolkit_caches()) >= 50
    plax.clear_caches()
    assert [len(c) for c in _toolkit_caches()] == [0, 0, 0, 0]


def test_caches_hold_no_strong_reference_to_dead_functions():
    fs = _fresh_closures(50)
    refs = [weakref.ref(f) for f in fs]
    for f in fs:
        plax.eval_shape(plax.vmap(plax.grad(f)), np.linspace(0.1, 1.0, 3).astype(F))
    before = sum(len(c) for c in _toolkit_caches())
    del f, fs
    gc.collect()
    assert [r() for r in refs] == [None] * 50
    assert sum(len(c) for c in _toolkit_caches()) < before


def test_named_axes_are_found_in_jaxprs_held_in_tuples():
    from plax.transforms.vmap import uses_axis_name
    body = plax.make_jaxpr(lambda x: plax.lax.psum(x, "i"), axis_env=[("i", 4)])(F(1.0))
    sin_p = next(p for p in all_primitives if p.name == "sin")
    assert uses_axis_name(sin_p, {"branches": (closed_of(jnp.sin, F(1.0)), body)}, "i")
    assert not uses_axis_name(sin_p, {"branches": (body,)}, "j")
    assert not uses_axis_name(sin_p, {"branches": (closed_of(jnp.sin, F(1.0)),)}, "i")


def test_effectful_abstract_eval_gives_avals_and_the_equations_effects():
    from plax.core.effects import Effect, eqn_effects
    from plax.core.rules import aval_effect_rules
    mine = Effect("Mine")
    prim = Primitive("test_effectful_eval")
    prim.def_effectful_abstract_eval(
        lambda x, *, tag: (x.update(shape=(x.shape[0] * 2,)), {mine} if tag else set()))
    try:
        a = ShapedArray((3,), np.dtype(F))
        assert prim.abstract_eval(a, tag=True) == (ShapedArray((6,), np.dtype(F)),
                                                  frozenset({mine}))
        x, y = Var(a), Var(ShapedArray((6,), np.dtype(F)))
        assert eqn_effects(JaxprEqn([x], [y], prim, {"tag": True})) == {mine}
        assert eqn_effects(JaxprEqn([x], [y], prim, {"tag": False})) == frozenset()
        new, _ = dce_jaxpr(Jaxpr([], [x], [x], [JaxprEqn([x], [y], prim, {"tag": True})]))
        assert [e.primitive.name for e in new.eqns] == ["test_effectful_eval"]
    finally:
        del abstract_eval_rules[prim], aval_effect_rules[prim]
        all_primitives.remove(prim)
