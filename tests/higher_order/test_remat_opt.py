"""custom_vjp with optimize_remat=True (remat_opt_p): a rematerialised forward pass whose
residuals go unused runs the primal function instead of the fwd rule."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.custom_derivatives import remat_opt_p
from plax.higher_order.call import closed_call_p


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@plax.custom_vjp
def sin(x):
    return jnp.sin(x)


def _fwd(x):
    return jnp.sin(x), (jnp.cos(x),)


sin.defvjp(_fwd, lambda res, g: (res[0] * g,), optimize_remat=True)
X = np.array([0.3, -1.2, 2.0], np.float32)


def primitives(closed):
    return [e.primitive for e in closed.jaxpr.eqns]


def test_values_and_derivatives():
    close(sin(X), np.sin(X))
    close(plax.grad(lambda x: sin(x).sum())(X), np.cos(X))
    close(plax.jit(plax.grad(lambda x: sin(x).sum()))(X), np.cos(X))
    close(plax.vmap(plax.grad(sin))(X), np.cos(X))
    close(plax.grad(lambda x: plax.vmap(sin)(x).sum())(X), np.cos(X))
    assert remat_opt_p in primitives(plax.make_jaxpr(plax.grad(sin))(1.))


def test_rematerialised_forward_pass_runs_the_function():
    f = plax.value_and_grad(plax.checkpoint(lambda x: sin(x) * 2.))
    value, grad = f(1.)
    close(value, 2 * np.sin(1.))
    close(grad, 2 * np.cos(1.))
    prims = primitives(plax.make_jaxpr(f)(1.))
    # forward: the primal function (a closed_call of sin); backward: fwd for its residual
    assert prims.index(closed_call_p) < prims.index(remat_opt_p)
    text = plax.jit(f).lower(1.).as_text()
    assert text.count("stablehlo.sine") == 1 and text.count("stablehlo.cosine") == 1


def test_refusals_as_in_jax():
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        plax.jvp(sin, (1.,), (1.,))
    with pytest.raises(NotImplementedError, match="does not support higher-order AD"):
        plax.grad(plax.grad(sin))(1.)
    g = plax.custom_vjp(lambda x: x)
    with pytest.raises(NotImplementedError, match="does not support symbolic zeros"):
        g.defvjp(lambda x: (x, None), lambda r, c: (c,), symbolic_zeros=True,
                 optimize_remat=True)
