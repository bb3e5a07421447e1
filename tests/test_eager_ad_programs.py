"""plax.numpy's functions under eager transformations run as JAX's jitted jax.numpy functions
do (issue 45, numpyro's eight schools): under an eager grad, jvp or vmap each call is one
compiled program (for a linearize, its known part with the residuals), whose bits XLA's
rewrites may change; under a staging trace they are inlined, so jaxprs show primitives."""
import logging

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.config import config

bits = lambda a: np.asarray(a).view(np.uint32).tolist()
f32 = lambda hexes: np.asarray(hexes, np.uint32).view(np.float32)


def _compiled(caplog, run):
    """The names of the programs compiled while ``run()`` runs (fresh shapes: nothing cached)."""
    caplog.clear()
    with config.override("log_compiles", True), caplog.at_level(logging.WARNING, logger="plax"):
        run()
    return [r.getMessage().split(" for ")[0].removeprefix("Compiling ")
            for r in caplog.records if r.getMessage().startswith("Compiling ")]


# (transformation, shape of x nobody else uses, expected program names)
CASES = [
    ("linearize", (11,), ["true_divide"]),  # (JAX 0.10.2 names the program jit(true_divide))
    ("jvp", (12,), ["true_divide"]),
    ("vmap", (3, 13), ["true_divide"]),
]


@pytest.mark.parametrize("how, shape, programs", CASES, ids=[c[0] for c in CASES])
def test_numpy_function_is_one_program_under_an_eager_transformation(caplog, how, shape,
                                                                      programs):
    x = jnp.asarray(np.linspace(1.0, 2.0, int(np.prod(shape)), dtype=np.float32).reshape(shape))
    y = jnp.float32(1.7)
    box = []
    run = {"linearize": lambda: box.append(plax.linearize(jnp.true_divide, x, y)[0]),
           "jvp": lambda: box.append(plax.jvp(jnp.true_divide, (x, y), (x, y))[0]),
           "vmap": lambda: box.append(plax.vmap(jnp.true_divide, (0, None))(x, y))}[how]
    # one program for the whole function (its promotion, broadcast and division), not one
    # per primitive
    assert _compiled(caplog, run) == programs
    # (within an ulp: XLA may divide by a broadcast scalar as a product with its reciprocal)
    np.testing.assert_allclose(box[0], np.asarray(x) / np.float32(1.7), rtol=2.4e-7)


def test_linear_part_of_a_numpy_function_is_inlined():
    x, y = jnp.arange(1.0, 5.0), jnp.float32(2.0)
    _, f_lin = plax.linearize(jnp.true_divide, x, y)
    prims = [e.primitive.name for e in plax.make_jaxpr(f_lin)(x, y).jaxpr.eqns]
    assert "jit" not in prims and "div" in prims
    np.testing.assert_allclose(f_lin(x, y), x / 2.0 - x * 2.0 / 4.0, rtol=1e-6)


def test_numpy_functions_are_inlined_when_staged():
    f = lambda a, b: jnp.sum(jnp.true_divide(a, b) ** 2)
    for jaxpr in (plax.make_jaxpr(plax.grad(f))(jnp.ones(3), 2.0),
                  plax.make_jaxpr(plax.vmap(f, (0, None)))(jnp.ones((2, 3)), 2.0)):
        assert "jit" not in [e.primitive.name for e in jaxpr.jaxpr.eqns]


def test_eager_grad_has_jax_bits():
    # numpyro's eight schools at its initial point: the gradient of -sum(((theta - mu) /
    # exp(log_tau)) ** 2) (its theta prior's main term), computed eagerly. The expected bits
    # are JAX 0.10.2's eager ones; op by op (plax before, or JAX under disable_jit) elements
    # 0, 4 and 7 came out one ulp lower, because each jnp function ran as one program there.
    mu, log_tau = f32(3218177524), f32(1062759096)
    theta = f32([3191764736, 3214055576, 1070906876, 1051395456, 3200115728, 3216379840,
                 1071256780, 1059237704])

    def energy(z):
        m, lt, th = z
        return -jnp.sum(((th - m) / jnp.exp(lt)) ** 2)

    g_mu, g_log_tau, g_theta = plax.grad(energy)((mu, log_tau, theta))
    assert bits(g_theta) == [3205034511, 3191442504, 3214652408, 3208251796, 3203333152,
                             3181500443, 3214781438, 3210116863]
    assert [bits(g_mu), bits(g_log_tau)] == [1084803798, 1095694918]
    # and the values are right (to float32 rounding)
    tau = np.exp(np.float64(log_tau))
    want = -2.0 * (theta.astype(np.float64) - np.float64(mu)) / tau ** 2
    np.testing.assert_allclose(g_theta, want, rtol=2e-6)
