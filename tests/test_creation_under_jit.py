"""Arrays made from host data inside a staged function are tracers of that trace, as JAX's
(omnistaging): ``jnp.ones(())``, ``jnp.asarray(np_array)``, ``jnp.float32(1)`` and
``device_put`` under jit are traced values, still folded into literals and constants in the
jaxpr; eagerly, and under transformations that evaluate (vmap, jvp, grad, linearize,
ensure_compile_time_eval), they stay concrete. Libraries rely on this to tell whether they
run under jit (Keras's ``isinstance(jnp.ones(()), jax.core.Tracer)``)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import errors
from plax.core.trace import Tracer

MAKERS = {
    "ones(())": (lambda: jnp.ones(()), 1.0),
    "full((),2)": (lambda: jnp.full((), 2.0), 2.0),
    "zeros((2,))": (lambda: jnp.zeros((2,)), [0.0, 0.0]),
    "asarray(1.5)": (lambda: jnp.asarray(1.5), 1.5),
    "asarray(numpy)": (lambda: jnp.asarray(np.arange(3.0)), [0.0, 1.0, 2.0]),
    "array(list)": (lambda: jnp.array([1, 2]), [1, 2]),
    "array(numpy, copy=False)": (lambda: jnp.array(np.ones(2), copy=False), [1.0, 1.0]),
    "float32(1)": (lambda: jnp.float32(1), 1.0),
    "int32(numpy)": (lambda: jnp.int32(np.arange(2.0)), [0, 1]),
    "device_put(numpy)": (lambda: plax.device_put(np.full(2, 3.0)), [3.0, 3.0]),
}


@pytest.mark.parametrize("name", MAKERS)
def test_made_under_jit_is_a_tracer_with_the_value(name):
    make, want = MAKERS[name]
    seen = []

    def f(x):
        value = make()
        seen.append(isinstance(value, Tracer))
        return value + 0 * x

    np.testing.assert_allclose(plax.jit(f)(1.0), want)
    assert seen == [True]


@pytest.mark.parametrize("transform", ["eager", "vmap", "jvp", "grad", "linearize",
                                       "ensure_compile_time_eval"])
def test_made_outside_staging_is_concrete(transform):
    seen = []

    def f(x):
        seen.append(isinstance(jnp.ones(()), Tracer) or isinstance(jnp.asarray(np.ones(2)), Tracer))
        return x * 2.0

    if transform == "eager":
        f(1.0)
    elif transform == "vmap":
        plax.vmap(f)(jnp.arange(3.0))
    elif transform == "jvp":
        plax.jvp(f, (1.0,), (1.0,))
    elif transform == "grad":
        assert plax.grad(f)(1.0) == 2.0
    elif transform == "linearize":
        plax.linearize(f, 1.0)
    else:
        def g(x):
            with plax.ensure_compile_time_eval():
                return f(x)
        plax.jit(g)(1.0)
    assert seen == [False]


@pytest.mark.parametrize("outer", ["vmap", "jvp", "grad"])
def test_transformations_under_jit_give_the_jit_tracer(outer):
    seen = []

    def f(x):
        seen.append(type(jnp.ones(())).__name__)
        return x * 3.0

    inner = {"vmap": plax.vmap(f), "jvp": lambda x: plax.jvp(f, (x,), (x,))[1],
             "grad": plax.grad(f)}[outer]
    x = jnp.arange(2.0) if outer == "vmap" else 2.0
    np.testing.assert_allclose(plax.jit(inner)(x), np.asarray(x) * 3.0 if outer != "grad" else 3.0)
    assert seen == ["StagingTracer"]


def test_constants_stay_literals_and_constvars_in_the_jaxpr():
    text = str(plax.make_jaxpr(lambda x: (x + jnp.asarray(2.0), jnp.ones(()),
                                          jnp.asarray(np.arange(3))))(1.0))
    assert text == ("{ lambda a:i32[3]; b:f32[]. let c:f32[] = add b 2.0:f32[] in "
                    "(c, 1.0:f32[], a) }")


def test_using_them_as_concrete_values_is_a_concretization_error():
    with pytest.raises(errors.ConcretizationTypeError, match="`float` function"):
        plax.jit(lambda x: float(jnp.ones(())) + x)(1.0)
    with pytest.raises(errors.TracerArrayConversionError, match="numpy.ndarray conversion"):
        plax.jit(lambda x: np.asarray(jnp.asarray(np.ones(2))) + x)(1.0)


@pytest.mark.parametrize("name,kind", [("block_until_ready", "method"),
                                       ("copy_to_host_async", "method"),
                                       ("sharding", "attribute")])
def test_array_runtime_attributes_of_a_tracer_say_why_they_are_missing(name, kind):
    def f(x):
        getattr(x, name)
        return x
    with pytest.raises(AttributeError,
                       match=f"The '{name}' {kind} is not available on traced array with shape f32"):
        plax.jit(f)(jnp.ones(2))
    seen = []  # (hasattr still answers: the error is an AttributeError, as in JAX)
    plax.jit(lambda x: seen.append(hasattr(x, name)) or x)(jnp.ones(2))
    assert seen == [False]
