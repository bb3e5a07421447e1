"""Caches let go of what dies: after many fresh jitted closures have run under grad/vmap and
been dropped, the jaxprs traced for them are collected (no cache keeps them, as in JAX, whose
caches hold functions and jaxprs weakly)."""
import gc

import numpy as np
import pytest

import plax
import plax.numpy as jnp

_probe = plax.make_jaxpr(lambda x: x + 1)(1.0)
JAXPR_TYPES = (type(_probe), type(_probe.jaxpr))  # ClosedJaxpr, Jaxpr
del _probe
# Enough that a leak (2-11 jaxprs per closure; even one) shows above the margin of 10, few
# enough to be fast (each closure compiles).
N_CLOSURES = 12


def live_jaxprs() -> int:
    gc.collect()
    return sum(isinstance(o, JAXPR_TYPES) for o in gc.get_objects())


def grad_of_vmap_of_jit(c, x):
    g = plax.jit(lambda v: jnp.sin(v * c))
    return plax.grad(lambda v: plax.vmap(g)(v).sum())(x), np.cos(np.asarray(x) * c) * c


def jit_of_grad_of_vmap_of_jit(c, x):
    g = plax.jit(lambda v: jnp.sin(v * c))
    return plax.jit(plax.grad(lambda v: plax.vmap(g)(v).sum()))(x), np.cos(np.asarray(x) * c) * c


def grad_of_jit_of_custom_vjp(c, x):
    # The rules do not refer to f: nothing but plax's caches could keep f's trace alive.
    @plax.custom_vjp
    def f(v):
        return jnp.sin(v * c)

    f.defvjp(lambda v: (jnp.sin(v * c), v), lambda v, ct: (jnp.cos(v * c) * c * ct,))
    return plax.grad(lambda v: plax.vmap(plax.jit(f))(v).sum())(x), np.cos(np.asarray(x) * c) * c


def eager_jit(c, x):
    return plax.jit(lambda v: jnp.sin(v * c))(x), np.sin(np.asarray(x) * c)


@pytest.mark.parametrize("run", [grad_of_vmap_of_jit, jit_of_grad_of_vmap_of_jit,
                                 grad_of_jit_of_custom_vjp, eager_jit])
def test_dead_closures_leave_no_jaxprs_behind(run):
    x = jnp.ones(3)
    for i in range(3):  # first uses may fill module-level caches once
        run(0.5 + i, x)
    before = live_jaxprs()
    for i in range(N_CLOSURES):
        got, want = run(1.0 + 0.01 * i, x)
        np.testing.assert_allclose(got, want, rtol=1e-5)
    del got
    after = live_jaxprs()
    assert after <= before + 10, (
        f"{after - before} jaxprs outlived {N_CLOSURES} dead closures run by {run.__name__}")
