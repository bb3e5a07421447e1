"""plax.experimental.scheduling_groups: a function's call carrying XLA metadata, kept one
equation through every transformation and lowered as a call with frontend attributes."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental.scheduling_groups import (attr_get, dce_jaxpr_xla_metadata_rule,
                                                 scheduling_group, xla_metadata_call)
from plax.lowering.mlir_bindings import ir, make_ir_context


@scheduling_group("group1")
def _f(x, y):
    return jnp.sin(x) * y, {"c": x + 1}


X = np.arange(3.0, dtype=np.float32)


def _metadata_calls(jaxpr):
    return [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "xla_metadata_call"]


@pytest.mark.parametrize("jitted", [False, True])
def test_values_and_pytrees(jitted):
    out, extra = (plax.jit(_f) if jitted else _f)(X, 2.0)
    np.testing.assert_allclose(out, np.sin(X) * 2, rtol=1e-6)
    np.testing.assert_array_equal(extra["c"], X + 1)


def test_one_equation_with_the_metadata_through_grad_jvp_and_vmap():
    g = lambda x: _f(x, 3.0)[0].sum()
    np.testing.assert_allclose(plax.grad(g)(X), 3 * np.cos(X), rtol=1e-6)
    calls = _metadata_calls(plax.make_jaxpr(plax.grad(g))(X))
    assert len(calls) == 2 and all(e.params["scheduling_group"] == "group1" for e in calls)
    primal, tangent = plax.jvp(lambda x: _f(x, 2.0)[0], (X,), (np.ones(3, np.float32),))
    np.testing.assert_allclose(tangent, 2 * np.cos(X), rtol=1e-6)
    batched = plax.vmap(lambda x: _f(x, 2.0)[0])(np.stack([X, X + 1]))
    np.testing.assert_allclose(batched, np.sin(np.stack([X, X + 1])) * 2, rtol=1e-6)
    (call,) = _metadata_calls(plax.make_jaxpr(plax.vmap(lambda x: _f(x, 2.0)[0]))(
        np.stack([X, X])))
    assert call.params["scheduling_group"] == "group1"


def test_lowered_call_carries_the_metadata_as_frontend_attributes():
    h = xla_metadata_call(lambda x: x * 2, scheduling_group="a", stage="b")
    text = plax.jit(h).lower(1.0).as_text()
    assert 'mhlo.frontend_attributes = {scheduling_group = "a", stage = "b"}' in text
    assert float(plax.jit(h)(1.5)) == 3.0
    with pytest.raises(NotImplementedError, match="mlir attr handler for type"):
        plax.jit(xla_metadata_call(lambda x: x, n=3)).lower(1.0)


def test_dead_code_rule_prunes_unused_outputs():
    jaxpr = plax.make_jaxpr(_f)(X, 2.0)
    (eqn,) = _metadata_calls(jaxpr)
    used_inputs, pruned = dce_jaxpr_xla_metadata_rule([False, True], eqn)
    assert used_inputs == [True, False] and len(pruned.outvars) == 1
    assert pruned.params["scheduling_group"] == "group1"
    assert [e.primitive.name for e in pruned.params["jaxpr"].jaxpr.eqns] == ["add"]
    assert dce_jaxpr_xla_metadata_rule([False, False], eqn) == ([False, False], None)


def test_attr_get_makes_a_string_attribute():
    with make_ir_context():
        attr = attr_get("group1")
        assert isinstance(attr, ir.StringAttr) and attr.value == "group1"
    with pytest.raises(NotImplementedError, match="mlir attr handler"):
        attr_get(1.0)
