"""Explicitly requesting a 64-bit dtype with x64 off warns and truncates, as in JAX."""
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.config import config

X = np.ones(3, np.float32)

# (function named in the warning, call, requested dtype, dtype it becomes)
REQUESTS = [
    ("zeros", lambda: jnp.zeros(3, jnp.float64), "float64", np.float32),
    ("zeros", lambda: jnp.zeros(3, "int64"), "int64", np.int32),
    ("zeros", lambda: jnp.zeros(3, np.complex128), "complex128", np.complex64),
    ("zeros", lambda: jnp.zeros(3, np.uint64), "uint64", np.uint32),
    ("ones", lambda: jnp.ones(3, np.float64), "float64", np.float32),
    ("full", lambda: jnp.full(3, 1.0, np.float64), "float64", np.float32),
    ("empty", lambda: jnp.empty(3, np.float64), "float64", np.float32),
    ("zeros_like", lambda: jnp.zeros_like(X, np.float64), "float64", np.float32),
    ("ones_like", lambda: jnp.ones_like(X, dtype="int64"), "int64", np.int32),
    ("full_like", lambda: jnp.full_like(X, 1, np.float64), "float64", np.float32),
    ("eye", lambda: jnp.eye(2, dtype=np.float64), "float64", np.float32),
    ("identity", lambda: jnp.identity(2, dtype=np.float64), "float64", np.float32),
    ("tri", lambda: jnp.tri(2, dtype=np.float64), "float64", np.float32),
    ("array", lambda: jnp.array([1], dtype="int64"), "int64", np.int32),
    ("asarray", lambda: jnp.asarray([1.0], dtype=np.float64), "float64", np.float32),
    ("astype", lambda: jnp.asarray(X).astype(jnp.float64), "float64", np.float32),
    ("astype", lambda: jnp.astype(X, jnp.float64), "float64", np.float32),
    ("arange", lambda: jnp.arange(3, dtype=jnp.int64), "int64", np.int32),
    ("linspace", lambda: jnp.linspace(0, 1, 3, dtype=np.float64), "float64", np.float32),
    ("sum", lambda: jnp.sum(X, dtype=np.float64), "float64", np.float32),
    ("sum", lambda: jnp.asarray(X).sum(dtype=np.int64), "int64", np.int32),
    ("cumsum", lambda: jnp.cumsum(X, dtype=np.float64), "float64", np.float32),
    ("mean", lambda: jnp.mean(X, dtype=np.float64), "float64", np.float32),
    ("dot", lambda: jnp.dot(X, X, preferred_element_type=np.float64), "float64", np.float32),
    ("convert_element_type", lambda: lax.convert_element_type(X, np.float64), "float64",
     np.float32),
    ("full", lambda: lax.full((2,), 1.0, np.float64), "float64", np.float32),
    ("full_like", lambda: lax.full_like(X, 1.0, np.int64), "int64", np.int32),
    ("broadcasted_iota", lambda: lax.iota(np.int64, 3), "int64", np.int32),
    ("broadcasted_iota", lambda: lax.broadcasted_iota(np.int64, (3,), 0), "int64", np.int32),
    ("argmax", lambda: lax.argmax(X, 0, np.int64), "int64", np.int32),
    ("zeros", lambda: plax.jit(lambda: jnp.zeros(3, np.float64))(), "float64", np.float32),
]


@pytest.mark.parametrize("fun,call,requested,result", REQUESTS,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(REQUESTS)])
def test_explicit_64_bit_request_warns_and_truncates(fun, call, requested, result):
    assert not config.read("enable_x64")
    with pytest.warns(UserWarning, match=f"Explicitly requested dtype {requested} requested in "
                                         f"{fun} is not available, and will be truncated to dtype "
                                         f"{np.dtype(result).name}") as record:
        out = call()
    assert out.dtype == result
    # the warning points at this file, the user's code
    assert any(w.filename == __file__ for w in record)
    assert "jax_enable_x64" in str(record[0].message)


@pytest.mark.parametrize("call", [
    lambda: jnp.zeros(3, float),          # Python types ask for the default type
    lambda: jnp.zeros(3, int),
    lambda: jnp.zeros(3, complex),
    lambda: jnp.asarray(X).astype(float),
    lambda: jnp.array(np.ones(2)),        # no dtype requested: host float64 data
    lambda: jnp.zeros(3, np.float32),
    lambda: plax.device_put(np.ones(2)),
    lambda: jnp.full(3, np.float64(1)),
    lambda: jnp.sum(X),
    lambda: jnp.argmax(X),
])
def test_no_warning_without_an_explicit_64_bit_request(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call()


def test_no_warning_with_x64_enabled():
    with plax.enable_x64(True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert jnp.zeros(3, np.float64).dtype == np.float64
            assert lax.convert_element_type(X, np.int64).dtype == np.int64


def test_warns_once_per_request():
    with pytest.warns(UserWarning) as record:
        jnp.zeros(3, np.float64)  # zeros -> full: only zeros warns
    assert len([w for w in record if "Explicitly requested" in str(w.message)]) == 1
