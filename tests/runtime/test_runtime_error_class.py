"""plax.errors.JaxRuntimeError is jaxlib's XLA runtime error class itself (as
jax.errors.JaxRuntimeError is): XLA's own failures and plax's reports of them are caught by it."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import checkify
from plax.runtime import xla


def test_it_is_the_class_xla_raises():
    assert plax.errors.JaxRuntimeError is xla.XlaRuntimeError
    assert issubclass(plax.errors.JaxRuntimeError, RuntimeError)
    assert plax.errors.JaxRuntimeError.__module__ == "plax.errors"
    # checkify's failed check is one too (and a ValueError, as JAX's)
    assert issubclass(checkify.JaxRuntimeError, plax.errors.JaxRuntimeError)


@pytest.mark.parametrize("name,run,match", [
    ("an unregistered FFI target", lambda: plax.jit(lambda a: plax.ffi.ffi_call(
        "plax_no_such_target_xyz", plax.ShapeDtypeStruct((3,), np.float32))(a))(jnp.ones(3)),
     "No FFI handler registered for plax_no_such_target_xyz"),
    ("an unknown compile option", lambda: plax.jit(lambda a: a + 1).lower(1.).compile(
        compiler_options={"bogus": 1}), "No such compile option: 'bogus'"),
])
def test_xla_failures_are_caught_by_it(name, run, match):
    with pytest.raises(plax.errors.JaxRuntimeError, match=match):
        run()


def test_a_raising_host_callback_is_reported_through_it():
    def bad(x):
        raise ZeroDivisionError("callback failed")

    f = plax.jit(lambda x: plax.pure_callback(bad, plax.ShapeDtypeStruct((), np.float32), x))
    with pytest.raises(plax.errors.JaxRuntimeError, match="callback failed") as info:
        np.asarray(f(1.0))
    assert isinstance(info.value, ZeroDivisionError)  # (plax's is of the callback's type too)
    assert type(info.value.__cause__) is ZeroDivisionError


def test_a_failure_no_xla_error_names_does_not_stand_in_for_a_later_one():
    """A callback that failed outside XLA (called by hand) leaves its exception recorded; the
    next failing program still reports its own callback's exception."""
    from plax.core.errors import record_callback_failure
    record_callback_failure(ValueError("a stale failure nobody asked about"))

    def bad(x):
        raise KeyError("the program's own failure")

    f = plax.jit(lambda x: plax.pure_callback(bad, plax.ShapeDtypeStruct((), np.float32), x))
    with pytest.raises(plax.errors.JaxRuntimeError, match="the program's own failure"):
        np.asarray(f(1.0))
