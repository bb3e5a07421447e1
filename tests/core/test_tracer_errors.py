"""Errors a user meets when a traced value is used as a concrete one."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import errors, lax


def test_bool_conversion_names_function_and_argument():
    def f(x, params):
        if lax.gt(params["w"], 0.0):
            return x
        return params["w"]
    with pytest.raises(errors.TracerBoolConversionError,
                       match="Attempted boolean conversion of traced array") as info:
        plax.make_jaxpr(f)(1.0, {"w": 2.0})
    msg = str(info.value)
    assert "Abstract tracer value encountered where concrete value is expected" in msg
    assert "tracing the function f" in msg
    assert "argument params['w']" in msg
    assert isinstance(info.value, errors.ConcretizationTypeError)


def test_integer_conversion():
    with pytest.raises(errors.TracerIntegerConversionError, match=r"__index__\(\) method was called"):
        plax.make_jaxpr(lambda i: [10, 20][i])(1)
    with pytest.raises(errors.TracerIntegerConversionError, match="argument i"):
        plax.make_jaxpr(lambda i: [10, 20][i])(1)
    # int() is a concretization error, as in JAX; only __index__ is an integer-conversion one.
    with pytest.raises(errors.ConcretizationTypeError, match="problem arose with the `int` function"):
        plax.make_jaxpr(lambda i: int(i))(1)


def test_array_conversion():
    with pytest.raises(errors.TracerArrayConversionError, match="numpy.ndarray conversion method"):
        plax.make_jaxpr(lambda x: np.sin(np.asarray(x)))(np.ones(3, np.float32))


def test_float_and_item_are_concretization_errors():
    with pytest.raises(errors.ConcretizationTypeError, match="`float` function"):
        plax.make_jaxpr(lambda x: float(x))(1.0)
    with pytest.raises(errors.ConcretizationTypeError, match="`item` method"):
        plax.make_jaxpr(lambda x: x.item())(1.0)


def test_error_says_when_value_does_not_depend_on_arguments():
    def f(x):
        c = lax.add(jnp.ones(()), 1.0)  # staged too, though it uses no argument
        return bool(lax.gt(c, 0.0))
    with pytest.raises(errors.TracerBoolConversionError, match="does not depend on the function's arguments"):
        plax.make_jaxpr(f)(1.0)


def test_leaked_tracer_used_eagerly():
    leaked = []

    def f(x):
        leaked.append(lax.mul(x, 2.0))
        return x
    plax.make_jaxpr(f)(1.0)
    with pytest.raises(errors.UnexpectedTracerError, match="Encountered an unexpected tracer") as info:
        lax.sin(leaked[0])
    msg = str(info.value)
    assert "Encountered an unexpected tracer" in msg
    assert "while tracing f" in msg and "argument x" in msg


def test_leaked_tracer_used_in_a_later_trace():
    leaked = []
    plax.make_jaxpr(lambda x: leaked.append(x) or x)(1.0)
    with pytest.raises(errors.UnexpectedTracerError,
                       match=r"let a traced value escape \(f32\[\], created while tracing <lambda>\)"):
        plax.make_jaxpr(lambda y: lax.add(y, leaked[0]))(1.0)


def test_tracers_are_unhashable_and_sized():
    def f(x):
        with pytest.raises(TypeError, match="unhashable"):
            hash(x)
        assert len(x) == 3 and x.shape == (3,) and x.ndim == 1 and x.dtype == np.float32
        return x
    plax.make_jaxpr(f)(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="len\\(\\) of unsized"):
        plax.make_jaxpr(lambda s: len(s))(1.0)


def test_tracer_repr():
    seen = []
    plax.make_jaxpr(lambda x: seen.append(repr(x)) or x)(np.ones(2, np.float32))
    assert seen == ["JitTracer(float32[2])"]


class _BareTracer(plax.core.Tracer):
    """A library's tracer made without an aval."""

    def __init__(self):
        super().__init__(None, None)


@pytest.mark.parametrize("name", [
    "ConcretizationTypeError", "TracerBoolConversionError", "TracerIntegerConversionError",
    "TracerArrayConversionError", "NonConcreteBooleanIndexError", "KeyReuseError",
    "UnexpectedTracerError", "JAXIndexError", "JAXTypeError"])
def test_errors_point_at_their_entry_on_the_errors_page(name):
    cls = getattr(errors, name)
    err = cls(_BareTracer())  # a tracer without an aval still gives a message
    assert str(err).endswith(f"errors.html#jax.errors.{name}")
    with pytest.raises(cls, match=r"See https://docs\.jax\.dev/en/latest/errors\.html#"):
        raise err
