"""The runtime flags as top-level context managers (plax.api.runtime_flags), each checked
against what JAX 0.10.2 does: transfer guards, no_tracing/no_execution, user contexts,
allow_f16_reductions, softmax_custom_jvp, auto_pcast, and the States' protocol."""
import logging
import threading

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.config import config

DISALLOWED_H2D = "Disallowed host-to-device transfer"


@pytest.fixture
def add_one():
    f = plax.jit(lambda x: x + 1.0)
    f(jnp.ones(3))  # compiled outside the guarded blocks
    return f


# --- transfer guards ------------------------------------------------------------------------
# (what, the transfer, refused under 'disallow', refused under 'disallow_explicit')
TRANSFERS = [
    ("NumPy argument to a jitted function", lambda f: f(np.ones(3)), True, True),
    ("jnp.asarray of a NumPy array", lambda f: jnp.asarray(np.full(3, 2.0)), True, True),
    ("device_put (explicit)", lambda f: plax.device_put(np.ones(3)), False, True),
    ("device_get (explicit)", lambda f: plax.device_get(jnp.ones(3)), False, False),
    # A CPU array's memory is the host's: reading it is no transfer (as in JAX on CPU).
    ("np.asarray of a CPU array", lambda f: np.asarray(f(jnp.ones(3))), False, False),
]


@pytest.mark.parametrize("level", ["disallow", "disallow_explicit"])
@pytest.mark.parametrize("what, transfer, implicit_refused, explicit_refused", TRANSFERS,
                         ids=[t[0] for t in TRANSFERS])
def test_transfer_guard_refuses_as_jax_does(add_one, level, what, transfer, implicit_refused,
                                            explicit_refused):
    refused = explicit_refused if level == "disallow_explicit" else implicit_refused
    with plax.transfer_guard(level):
        if refused:
            with pytest.raises(Exception, match=DISALLOWED_H2D):
                transfer(add_one)
        else:
            assert np.asarray(transfer(add_one)).shape == (3,)
    transfer(add_one)  # outside the block: allowed again


def test_transfer_guard_per_direction_and_value(add_one):
    assert plax.transfer_guard_host_to_device.value is None
    with plax.transfer_guard_host_to_device("disallow"):
        assert plax.transfer_guard_host_to_device.value == "disallow"
        assert plax.transfer_guard_device_to_device.value is None
        with pytest.raises(Exception, match=DISALLOWED_H2D):
            add_one(np.ones(3))
    np.testing.assert_allclose(add_one(np.ones(3)), [2.0, 2.0, 2.0])


def test_transfer_guard_device_to_device():
    if len(plax.devices()) < 2:
        pytest.skip("needs two devices (PLAX_NUM_CPU_DEVICES)")
    x = plax.device_put(jnp.ones(3), plax.devices()[0])
    with plax.transfer_guard_device_to_device("disallow_explicit"):
        with pytest.raises(Exception, match="Disallowed device-to-device transfer"):
            plax.device_put(x, plax.devices()[1])
    with plax.transfer_guard_device_to_device("disallow"):  # device_put is explicit
        assert plax.device_put(x, plax.devices()[1]).devices() == {plax.devices()[1]}


def test_transfer_guard_is_per_thread(add_one):
    seen = []
    with plax.transfer_guard("disallow"):
        worker = threading.Thread(target=lambda: seen.append(np.asarray(add_one(np.ones(3)))))
        worker.start()
        worker.join()
    np.testing.assert_allclose(seen[0], [2.0, 2.0, 2.0])


def test_transfer_guard_set_globally_by_config(add_one):
    config.update("jax_transfer_guard", "disallow")
    try:
        assert config.jax_transfer_guard_host_to_device == "disallow"
        with pytest.raises(Exception, match=DISALLOWED_H2D):
            add_one(np.ones(3))
        with plax.transfer_guard("allow"):  # a block overrides the global level
            np.testing.assert_allclose(add_one(np.ones(3)), [2.0, 2.0, 2.0])
    finally:
        config.update("jax_transfer_guard", None)
        for kind in ("host_to_device", "device_to_device", "device_to_host"):
            config.update("jax_transfer_guard_" + kind, None)
    np.testing.assert_allclose(add_one(np.ones(3)), [2.0, 2.0, 2.0])


def test_transfer_guard_bad_level():
    with pytest.raises(ValueError, match="must be one of"):
        with plax.transfer_guard("sometimes"):
            pass
    with pytest.raises(TypeError, match="requires an argument"):
        plax.transfer_guard_host_to_device()


# --- no_tracing / no_execution ---------------------------------------------------------------
def test_no_tracing_refuses_a_new_trace_but_runs_a_cached_one(add_one):
    with plax.no_tracing(True):
        np.testing.assert_allclose(add_one(jnp.ones(3)), [2.0, 2.0, 2.0])
        with pytest.raises(RuntimeError, match="for `jit`, but 'no_tracing' is set"):
            plax.jit(lambda x: x * 2.0)(jnp.ones(3))
        with pytest.raises(RuntimeError, match="'no_tracing' is set"):
            plax.make_jaxpr(lambda x: x * 3.0)(1.0)
    assert plax.jit(lambda x: x * 2.0)(jnp.ones(3)).shape == (3,)


def test_no_execution_refuses_runs_but_traces_and_compiles(add_one):
    x = jnp.ones(3)
    with plax.no_execution(True):
        with pytest.raises(RuntimeError, match="tried to execute function jit"):
            add_one(x)
        with pytest.raises(RuntimeError, match="no_execution config option is set"):
            jnp.sin(x)
        compiled = plax.jit(lambda x: x * 5.0).lower(x).compile()
        assert "mul" in str(plax.make_jaxpr(lambda x: x * 3.0)(x))
    np.testing.assert_allclose(compiled(x), [5.0, 5.0, 5.0])


def test_no_execution_set_globally_stops_the_cpp_fast_path(add_one):
    add_one(jnp.ones(3))  # recorded in C++
    config.update("jax_no_execution", True)
    try:
        with pytest.raises(RuntimeError, match="no_execution"):
            add_one(jnp.ones(3))
    finally:
        config.update("jax_no_execution", False)
    np.testing.assert_allclose(add_one(jnp.ones(3)), [2.0, 2.0, 2.0])


# --- the State protocol ----------------------------------------------------------------------
def test_a_flag_is_a_state():
    assert plax.no_tracing.name == "jax_no_tracing"
    assert plax.no_tracing.value is False and plax.no_tracing.get_global() is False
    with plax.no_tracing():  # a boolean flag's block defaults to True
        assert plax.no_tracing.value is True and config.jax_no_tracing is True
    assert plax.no_tracing.value is False

    @plax.no_tracing(True)
    def inside():
        return plax.no_tracing.value
    assert inside() is True and plax.no_tracing.value is False
    with pytest.raises(TypeError, match=r"did you mean to use 'no_tracing.value'"):
        bool(plax.no_tracing)
    plax.thread_guard.set_global(True)
    try:
        assert plax.thread_guard.value is True and config.jax_thread_guard is True
    finally:
        plax.thread_guard.set_global(False)


@pytest.mark.parametrize("name, default, value", [
    ("thread_guard", False, True), ("jax2tf_associative_scan_reductions", False, True),
    ("explain_cache_misses", None, True), ("array_garbage_collection_guard", None, "log"),
    ("auto_pcast", True, False), ("allow_f16_reductions", True, False),
    ("softmax_custom_jvp", False, True),
])
def test_each_flag_reads_and_sets_its_config_option(name, default, value):
    state = getattr(plax, name)
    assert state.value == default
    with state(value):
        assert state.value == value
        assert getattr(config, state.name) == value
    assert state.value == default


def test_array_garbage_collection_guard_checks_its_level():
    with pytest.raises(ValueError, match="must be one of"):
        plax.array_garbage_collection_guard("often")


# --- make_user_context -----------------------------------------------------------------------
def test_a_user_context_is_part_of_jits_cache_key():
    ctx = plax.make_user_context(1)
    traces = []

    @plax.jit
    def f(x):
        traces.append(ctx.value)
        return x + ctx.value

    np.testing.assert_allclose(f(jnp.zeros(2)), [1.0, 1.0])
    with ctx(2):
        assert ctx.value == 2
        np.testing.assert_allclose(f(jnp.zeros(2)), [2.0, 2.0])
        np.testing.assert_allclose(f(jnp.zeros(2)), [2.0, 2.0])
    np.testing.assert_allclose(f(jnp.zeros(2)), [1.0, 1.0])
    ctx.set_global(5)
    try:
        np.testing.assert_allclose(f(jnp.zeros(2)), [5.0, 5.0])
    finally:
        ctx.set_global(1)
    assert traces == [1, 2, 5]
    assert plax.make_user_context().value is None
    with pytest.raises(TypeError, match="must be hashable"):
        ctx([1, 2])


# --- flags that change what plax computes ----------------------------------------------------
def test_allow_f16_reductions_false_refuses_half_precision_sums():
    x = jnp.ones(3, jnp.float16)
    with plax.allow_f16_reductions(False):
        with pytest.raises(ValueError, match=r"reduce_sum on operand f16\[3\] is not allowed "
                                             "when jax_allow_f16_reductions=False"):
            lax.reduce_sum(x, (0,))
        with pytest.raises(ValueError, match="bf16"):
            plax.jit(lambda a: lax.reduce_sum(a, (0,)))(jnp.ones(4, jnp.bfloat16))
        assert float(jnp.sum(x)) == 3.0  # (jnp.sum accumulates in float32, as JAX's)
        assert float(lax.reduce_sum(jnp.ones((1, 3), jnp.float16), (0,))[0]) == 1.0  # size 1
    assert float(lax.reduce_sum(x, (0,))) == 3.0


def test_softmax_custom_jvp_chooses_the_derivative_path_with_equal_values():
    x = jnp.array([0.5, -1.0, 2.0])

    def first(v):
        return plax.nn.softmax(v)[0]
    plain = plax.grad(first)(x)
    assert "custom_jvp_call" not in str(plax.make_jaxpr(plax.grad(first))(x))
    with plax.softmax_custom_jvp(True):
        custom = plax.grad(first)(x)
        assert "custom_jvp_call" in str(plax.make_jaxpr(first)(x))
    s = np.exp(x) / np.exp(x).sum()
    expected = s[0] * ((np.arange(3) == 0) - s)  # d softmax_0 / dx_j = s_0 (delta_0j - s_j)
    np.testing.assert_allclose(plain, expected, rtol=1e-5)
    np.testing.assert_allclose(custom, expected, rtol=1e-5)


def test_auto_pcast_false_refuses_operands_of_different_variance():
    if len(plax.devices()) < 2:
        pytest.skip("needs two devices (PLAX_NUM_CPU_DEVICES)")
    from plax.sharding import NamedSharding, PartitionSpec as P
    mesh = plax.make_mesh((2,), ("x",), devices=plax.devices()[:2])
    g = plax.shard_map(lambda a, b: a + b, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))
    a = plax.device_put(jnp.arange(4.0), NamedSharding(mesh, P("x")))
    b = plax.device_put(jnp.ones(2), NamedSharding(mesh, P()))
    np.testing.assert_allclose(g(a, b), np.arange(4.0) + 1)  # implicitly pvary'd
    with plax.auto_pcast(False):
        with pytest.raises(ValueError, match="requires varying manual axes to match"):
            g(a, b)


def test_explain_cache_misses_logs_each_retrace(caplog):
    @plax.jit
    def retraced(x):
        return x * 2
    retraced(jnp.ones(2))
    with plax.explain_cache_misses(True), caplog.at_level(logging.WARNING, "plax"):
        retraced(jnp.ones(3))
    assert "TRACING CACHE MISS" in caplog.text
