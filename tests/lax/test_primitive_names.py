"""The primitives are public under JAX's names, so jaxpr interpreters written for JAX
(``eqn.primitive is lax.add_p``) work on plax's jaxprs."""
import numpy as np
import pytest

import plax
from plax import lax


@pytest.mark.parametrize("fn, prim", [
    (lambda x: lax.add(x, x), "add_p"), (lax.sin, "sin_p"), (lambda x: lax.cumsum(x), "cumsum_p"),
    (lambda x: lax.reduce_sum(x, (0,)), "reduce_sum_p"), (lambda x: lax.rev(x, (0,)), "rev_p"),
    (lambda x: lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID"), "reduce_window_sum_p"),
    (lambda x: lax.integer_pow(x, 3), "integer_pow_p"), (lax.stop_gradient, "stop_gradient_p")])
def test_equations_hold_the_exported_primitive(fn, prim):
    jaxpr = plax.make_jaxpr(fn)(np.arange(4.0, dtype=np.float32))
    assert [e.primitive for e in jaxpr.eqns] == [getattr(lax, prim)]


def test_a_small_interpreter_keyed_on_primitives():
    """An evaluator in the style of JAX's "writing a custom interpreter" guide."""
    table = {lax.mul_p: np.multiply, lax.add_p: np.add, lax.exp_p: np.exp}
    closed = plax.make_jaxpr(lambda x: lax.exp(x * 2.0) + x)(np.float32(0.5))
    env = dict(zip(closed.jaxpr.invars, [np.float32(0.5)]))
    read = lambda v: env[v] if v in env else v.val  # noqa: E731
    for eqn in closed.jaxpr.eqns:
        env[eqn.outvars[0]] = table[eqn.primitive](*map(read, eqn.invars))
    np.testing.assert_allclose(read(closed.jaxpr.outvars[0]), np.exp(1.0) + 0.5, rtol=1e-6)
