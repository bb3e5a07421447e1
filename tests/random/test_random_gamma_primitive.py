"""random_gamma_p, JAX's gamma sampler primitive: values, implicit-reparameterisation
derivatives, vmap over keys and shape parameters, its names, the key-reuse checker."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random as R
from plax.extend.core import primitives as P
from plax.random.gamma_family import random_gamma_grad

KEY = R.key(0)
A = np.array([0.5, 1.0, 3.0], np.float32)


def test_exported_under_jax_names_and_staged():
    assert P.random_gamma_p is R.random_gamma_p and R.random_gamma_p.name == "random_gamma"
    text = str(plax.make_jaxpr(lambda k, a: R.gamma(k, a))(KEY, A))
    assert "random_gamma[log_space=False]" in text


# values recorded from JAX 0.10.2 (jax.random.random_gamma_p.bind and jax.random.gamma)
@pytest.mark.parametrize("name,run,want", [
    ("bind", lambda: R.random_gamma_p.bind(KEY, jnp.asarray(A), log_space=False),
     [0.8845648, 0.7262849, 1.9683666]),
    ("vmap of bind over keys", lambda: plax.vmap(
        lambda k: R.random_gamma_p.bind(k, jnp.array([0.5, 3.]), log_space=True))(
            R.split(KEY, 2)), [[-0.09360394, 0.30923796], [-1.3300896, -0.32893395]]),
    ("vmap over keys and a", lambda: plax.vmap(lambda k, a: R.gamma(k, a, (2,)))(
        R.split(KEY, 2), jnp.array([0.5, 3.])), [[0.9106433, 0.00812707],
                                                 [5.0589304, 0.71969056]]),
    ("grad", lambda: plax.jit(plax.grad(lambda a: R.gamma(KEY, a, (4,)).sum()))(2.0),
     4.288652),
    ("grad loggamma", lambda: plax.jit(plax.grad(lambda a: R.loggamma(KEY, a, (4,)).sum()))(0.2),
     88.00759),
])
def test_matches_jax(name, run, want):
    np.testing.assert_allclose(np.asarray(run()), np.asarray(want, np.float32), rtol=2e-5)


def test_vmap_is_the_loop_of_single_draws():
    keys, a = R.split(KEY, 3), jnp.array([[0.7, 2.0], [1.5, 0.1], [4.0, 9.0]])
    got = plax.vmap(lambda k, x: R.random_gamma_p.bind(k, x, log_space=False))(keys, a)
    draw = plax.jit(lambda k, x: R.random_gamma_p.bind(k, x, log_space=False))
    want = [draw(keys[i], a[i]) for i in range(3)]
    np.testing.assert_array_equal(np.asarray(got), np.stack(want))
    # an unbatched key: every member draws with that same key
    got = plax.vmap(lambda x: R.random_gamma_p.bind(KEY, x, log_space=False))(a)
    want = [draw(KEY, a[i]) for i in range(3)]
    np.testing.assert_array_equal(np.asarray(got), np.stack(want))


def test_jvp_is_the_implicit_reparameterisation_derivative():
    a = jnp.array([0.3, 1.0, 6.0])
    for log_space in (False, True):
        draw = lambda x: R.random_gamma_p.bind(KEY, x, log_space=log_space)
        both = plax.jit(lambda x: (plax.jvp(draw, (x,), (jnp.ones(3),)),
                                   plax.grad(lambda y: draw(y).sum())(x)))
        (out, tangent), grad = both(a)
        s = np.exp(np.asarray(out)) if log_space else np.asarray(out)
        want = np.asarray(random_gamma_grad(a, s)) / (s if log_space else 1)
        np.testing.assert_allclose(np.asarray(tangent), want, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(grad), want, rtol=1e-5)


def test_the_key_is_consumed_and_bad_keys_are_refused():
    plax.config.update("jax_debug_key_reuse", True)
    try:
        def twice(k):
            return R.random_gamma_p.bind(k, jnp.ones(2), log_space=False) + \
                R.random_gamma_p.bind(k, jnp.ones(2), log_space=False)
        with pytest.raises(plax.errors.KeyReuseError, match="already consumed"):
            plax.jit(twice)(R.key(1))
    finally:
        plax.config.update("jax_debug_key_reuse", False)
    with pytest.raises(TypeError, match="random_gamma takes a typed key array"):
        R.random_gamma_p.bind(R.PRNGKey(0), jnp.ones(2), log_space=False)
