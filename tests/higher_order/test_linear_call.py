"""plax.custom_derivatives.linear_call (a linear function with the user's transpose) and
custom_vjp_primal_tree_values."""
from functools import partial

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.custom_derivatives import (CustomVJPPrimal, custom_vjp_primal_tree_values,
                                     linear_call)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def div_add(x, denom):
    return x + linear_call(lambda r, x: x / r, lambda r, t: t / r, denom, x)


def transpose(f, example):
    return lambda y: plax.linear_transpose(f, example)(y)[0]


def custom_id(x):
    # the identity, with a transpose that is deliberately not: the transpose is the user's
    return linear_call(lambda _, x: x, lambda _, t: 7. * t, (), x)


def test_value_and_transpose():
    close(div_add(9., 3.), 12.)
    close(transpose(partial(div_add, denom=3.), 1.)(18.), 24.)
    close(custom_id(1.), 1.)
    close(transpose(custom_id, 1.)(1.), 7.)
    close(transpose(transpose(custom_id, 1.), 1.)(1.), 1.)  # the transpose's transpose is fun
    close(transpose(transpose(transpose(custom_id, 1.), 1.), 1.)(2.), 14.)
    assert "linear_call" in str(plax.make_jaxpr(div_add)(9., 3.))


def test_derivatives_jit_vmap():
    close(plax.jvp(lambda x: div_add(x, 3.), (9.,), (1.,))[1], 4. / 3.)
    close(plax.grad(div_add)(9., 3.), 4. / 3.)
    close(plax.jit(plax.grad(div_add))(9., 3.), 4. / 3.)
    close(plax.grad(custom_id)(1.), 7.)  # reverse mode uses the user's transpose
    d = jnp.arange(1., 4.)
    close(plax.vmap(div_add)(jnp.ones(3), d), 1. + 1. / np.arange(1., 4.))
    close(plax.vmap(plax.grad(div_add))(jnp.ones(3), d), 1. + 1. / np.arange(1., 4.))
    close(plax.grad(lambda x: plax.vmap(div_add, (0, None))(x, 2.).sum())(jnp.ones(3)),
          1.5 * np.ones(3))
    close(plax.vmap(plax.grad(custom_id))(jnp.ones(3)), 7. * np.ones(3))


def test_pytree_arguments():
    def f(r, xs):
        return {"s": xs[0] * r["a"] + xs[1]}

    def ft(r, ct):
        return (ct["s"] * r["a"], ct["s"])

    g = lambda xs: linear_call(f, ft, {"a": 2.}, xs)["s"]
    close(g((1., 3.)), 5.)
    gx = plax.grad(g)((1., 3.))
    close(gx[0], 2.)
    close(gx[1], 1.)


def test_errors():
    with pytest.raises(TypeError, match="residual arguments .* cannot be differentiated"):
        plax.grad(div_add, 1)(9., 3.)
    bad = lambda x: linear_call(lambda r, x: x, lambda r, t: (t, t), (), x)
    with pytest.raises(TypeError, match="linear_call: the transpose .* returns a pytree"):
        plax.grad(bad)(1.)


def test_custom_vjp_primal_tree_values():
    tree = {"a": CustomVJPPrimal(1., True), "b": [CustomVJPPrimal(2., False), 3.]}
    assert custom_vjp_primal_tree_values(tree) == {"a": 1., "b": [2., 3.]}

    @plax.custom_vjp
    def f(x, y):
        return x * y

    def fwd(x, y):
        x, y = custom_vjp_primal_tree_values((x, y))
        return x * y, (x, y)

    f.defvjp(fwd, lambda res, g: (g * res[1], g * res[0]), symbolic_zeros=True)
    close(plax.grad(f)(2., 5.), 5.)
