"""The flag context managers plax has at top level (as JAX does), the flags as plain config
options, and jitted functions retracing when a flag that changes tracing changes."""
import functools
import logging
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core import staging
from plax.core.config import config
from plax.core.dtypes import TypePromotionError

A23, A3 = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)


def counted(fun):
    @functools.wraps(fun)
    def wrapper(*args):
        wrapper.n += 1
        return fun(*args)
    wrapper.n = 0
    return wrapper


@pytest.mark.parametrize("name, value", [
    ("debug_nans", True), ("debug_infs", True), ("log_compiles", True), ("enable_checks", True),
    ("numpy_rank_promotion", "raise"), ("numpy_dtype_promotion", "strict"),
    ("default_matmul_precision", "float32"),
])
def test_context_managers_set_the_flag_for_a_block(name, value):
    before = config.read(name)
    with getattr(plax, name)(value):
        assert config.read(name) == value and config.read("jax_" + name) == value
    assert config.read(name) == before
    config.update("jax_" + name, value)  # and each is a plain config option
    assert getattr(config, "jax_" + name) == value


@pytest.mark.parametrize("name", ["debug_nans", "debug_infs", "log_compiles", "enable_checks"])
def test_boolean_contexts_default_to_true(name):
    with getattr(plax, name)():
        assert config.read(name) is True


@pytest.mark.parametrize("name, bad", [("numpy_rank_promotion", "bogus"),
                                       ("numpy_dtype_promotion", "loose"),
                                       ("default_matmul_precision", "quadruple")])
def test_invalid_values_are_rejected(name, bad):
    with pytest.raises(ValueError, match="must be one of"):
        with getattr(plax, name)(bad):
            pass
    with pytest.raises(ValueError, match="must be one of"):
        config.update("jax_" + name, bad)


# --- debug_nans / debug_infs / log_compiles / enable_checks -------------------------------
def test_debug_nans_and_infs_contexts():
    with plax.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in log"):
            jnp.log(-jnp.ones(2))
        with pytest.raises(FloatingPointError, match="nan"):
            plax.jit(lambda x: jnp.log(x))(-jnp.ones(2))
    np.testing.assert_array_equal(np.isnan(jnp.log(-jnp.ones(2))), [True, True])
    with plax.debug_infs(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
            jnp.ones(2) / 0.0


def test_log_compiles_context(caplog):
    f = plax.jit(lambda x: x * 3)
    with caplog.at_level(logging.WARNING, logger="plax"), plax.log_compiles():
        np.testing.assert_array_equal(f(A3), A3 * 3)
    assert any("Compiling" in r.getMessage() for r in caplog.records)


def test_enable_checks_type_checks_traced_jaxprs(monkeypatch):
    checked = []
    monkeypatch.setattr(staging, "check_jaxpr", lambda j: checked.append(len(j.eqns)))
    plax.make_jaxpr(lambda x: jnp.sin(x) * 2)(A3)
    assert checked == []
    with plax.enable_checks():
        plax.make_jaxpr(lambda x: jnp.sin(x) * 2)(A3)
    assert checked == [2]  # sin, mul


# --- rank promotion ---------------------------------------------------------------------------
def test_rank_promotion_raise_and_warn():
    with plax.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match=r"Operands could not be broadcast together for add on "
                           r"shapes \(2, 3\) \(3,\) and with the config option "
                           r"jax_numpy_rank_promotion='raise'"):
            jnp.asarray(A23) + jnp.asarray(A3)
        with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
            jnp.maximum(A23, jnp.asarray(A3))
        # Scalars and equal ranks are no rank promotion.
        np.testing.assert_array_equal(jnp.asarray(A23) + 1.0, A23 + 1)
        np.testing.assert_array_equal(jnp.asarray(A23) + np.ones((1, 3), np.float32), A23 + 1)
    with plax.numpy_rank_promotion("warn"):
        with pytest.warns(UserWarning, match=r"Following NumPy automatic rank promotion for add on "
                          r"shapes \(2, 3\) \(3,\)"):
            out = jnp.asarray(A23) + jnp.asarray(A3)
    np.testing.assert_array_equal(out, A23 + A3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(jnp.asarray(A23) + jnp.asarray(A3), A23 + A3)


def test_rank_promotion_raise_where_jax_checks_it():
    """JAX checks jax_numpy_rank_promotion in lcm, vecdot and vectorize's loop dimensions;
    where, heaviside and gcd broadcast without the check (JAX 0.10.2's behaviour)."""
    i3, i23 = np.arange(3), np.ones((2, 3), np.int32)
    with plax.numpy_rank_promotion("raise"):
        np.testing.assert_array_equal(jnp.where(A23 > 0, A3, 0.0), np.where(A23 > 0, A3, 0.0))
        np.testing.assert_array_equal(jnp.heaviside(A3 - 1, A23), np.heaviside(A3 - 1, A23))
        np.testing.assert_array_equal(jnp.gcd(i3, 2 * i23), np.gcd(i3, 2 * i23))
        with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
            jnp.lcm(i3, i23)
        with pytest.raises(ValueError, match=r"operands with shapes \[\(3,\), \(2, 3\)\] require "
                           r"rank promotion for jnp.vectorize function with signature "
                           r"\(n\),\(n\)->\(\)"):
            jnp.vecdot(A3, A23)
        dot = jnp.vectorize(lambda x, y: jnp.sum(x * y), signature="(n),(n)->()")
        with pytest.raises(ValueError, match="require rank promotion for jnp.vectorize"):
            dot(A3, A23)
        np.testing.assert_array_equal(dot(A3, 2.0 * np.ones(3, np.float32)), 6.0)
        np.testing.assert_array_equal(jnp.vectorize(lambda x, y: x * y)(A3, 2.0), 2 * A3)
    with plax.numpy_rank_promotion("warn"):
        with pytest.warns(UserWarning, match="require rank promotion for jnp.vectorize"):
            out = jnp.vecdot(A3, A23)
    np.testing.assert_array_equal(out, [3.0, 3.0])


def test_jit_retraces_when_rank_promotion_changes():
    add = counted(lambda a, b: a + b)
    f = plax.jit(add)
    np.testing.assert_array_equal(f(A23, A3), A23 + A3)
    with plax.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
            f(A23, A3)
    np.testing.assert_array_equal(f(A23, A3), A23 + A3)  # the first trace, from the cache
    config.update("jax_numpy_rank_promotion", "raise")  # global updates retrace too
    with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
        f(A23, A3)
    config.update("jax_numpy_rank_promotion", "allow")
    np.testing.assert_array_equal(f(A23, A3), A23 + A3)
    assert add.n == 3


# --- matmul precision ---------------------------------------------------------------------------
def test_default_matmul_precision_reaches_dot_general_and_the_jit_key():
    a = np.ones((2, 2), np.float32)
    matmul = counted(lambda x, y: x @ y)
    f = plax.jit(matmul)
    assert "precision DEFAULT" in f.lower(a, a).as_text()
    for name, want in (("float32", "HIGHEST"), ("highest", "HIGHEST"),
                       ("tensorfloat32", "HIGH"), ("bfloat16", "DEFAULT")):
        with plax.default_matmul_precision(name):
            assert f"precision {want}" in f.lower(a, a).as_text()
            assert f"Precision.{want}" in str(plax.make_jaxpr(lambda x: x @ x)(a))
            np.testing.assert_array_equal(f(a, a), a @ a)
    # An explicit precision wins over the default.
    with plax.default_matmul_precision("float32"):
        jaxpr = plax.make_jaxpr(lambda x: jnp.matmul(x, x, precision="default"))(a)
    assert "Precision.DEFAULT" in str(jaxpr)
    config.update("jax_default_matmul_precision", "highest")
    assert "precision HIGHEST" in f.lower(a, a).as_text()
    config.update("jax_default_matmul_precision", None)
    assert "precision DEFAULT" in f.lower(a, a).as_text()
    assert matmul.n == 5  # one trace per setting: the global updates found theirs cached


# --- dtype promotion ---------------------------------------------------------------------------
# (array dtype, other operand) -> the result dtype under 'strict', as JAX 0.10.2 gives it
# (None: TypePromotionError).
_STRICT = [
    (np.float32, np.int32, None), (np.float32, np.float16, None), (np.int32, np.int8, None),
    (np.float32, np.float32, np.float32), (np.bool_, np.int32, None), (np.int32, np.uint8, None),
    (np.float32, np.complex64, None), (np.bool_, np.bool_, np.bool_),
    (np.float32, 1, np.float32), (np.float32, 1.0, np.float32), (np.float32, 1j, None),
    (np.float32, True, None), (np.int32, 1, np.int32), (np.int32, 1.0, None),
    (np.bool_, 1, None), (np.bool_, True, np.bool_), (np.complex64, 1.0, np.complex64),
    (np.complex64, 1j, np.complex64), (np.uint8, 1, np.uint8), (np.uint8, 1.0, None),
    (jnp.bfloat16, 1.0, jnp.bfloat16), (jnp.bfloat16, 1j, None),
]


@pytest.mark.parametrize("dtype, other, want", _STRICT)
def test_strict_dtype_promotion(dtype, other, want):
    x = jnp.ones(3, dtype)
    y = jnp.ones(3, other) if isinstance(other, type) else other
    with plax.numpy_dtype_promotion("strict"):
        if want is None:
            with pytest.raises(TypePromotionError, match="jax_numpy_dtype_promotion=strict"):
                x + y
        else:
            assert (x + y).dtype == np.dtype(want)
    standard = jnp.result_type(x, y)
    assert (x + y).dtype == standard  # 'standard' promotes as before


def test_strict_promotion_between_python_scalars():
    with plax.numpy_dtype_promotion("strict"):
        assert jnp.result_type(1, 1.0) == np.float32 and jnp.result_type(1.0, 1j) == np.complex64
        with pytest.raises(TypePromotionError, match="no available implicit dtype promotion path"):
            jnp.result_type(True, 1)
        with pytest.raises(TypePromotionError, match="strict"):
            jnp.promote_types(np.float32, np.int32)
    assert jnp.promote_types(np.float32, np.int32) == np.float32


def test_jit_retraces_when_dtype_promotion_changes():
    f = plax.jit(lambda a, b: a + b)
    x, i = jnp.ones(3), jnp.ones(3, np.int32)
    assert f(x, i).dtype == np.float32
    with plax.numpy_dtype_promotion("strict"):
        with pytest.raises(TypePromotionError, match="strict"):
            f(x, i)
    config.update("jax_numpy_dtype_promotion", "strict")
    with pytest.raises(TypePromotionError, match="strict"):
        f(x, i)
