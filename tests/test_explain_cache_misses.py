"""jax_explain_cache_misses: a retrace logs which argument changed and how (shape, dtype, weak
type, static value, pytree structure, sharding, trace-context flag), with the function's file
and line and the call site; unset it explains from the 5th retrace on, each cause once."""
import dataclasses
import logging
import re
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.config import config
from plax.sharding import NamedSharding, PartitionSpec as P

LOGGER = "plax.cache_misses"
HERE = re.escape(__file__)


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.fixture
def explain(caplog):
    """Every trace explained; returns a function giving the messages logged so far."""
    with config.override("explain_cache_misses", True), caplog.at_level(logging.WARNING, LOGGER):
        yield lambda: messages(caplog)


def only_retrace(msgs):
    retraces = [m for m in msgs if "traced again" in m]
    assert len(retraces) == 1, msgs
    return retraces[0]


def test_shape_change_names_argument_file_line_and_call_site(explain):
    def scale(x, factor):
        return x * factor

    f = plax.jit(scale)
    f(np.ones(3, np.float32), 2.0)
    line = sys._getframe().f_lineno + 1
    f(np.ones(4, np.float32), 2.0)
    msgs = explain()
    assert re.fullmatch(rf"TRACING CACHE MISS at {HERE}:\d+ \(test_\w+\): scale \(defined at "
                        rf"{HERE}:{scale.__code__.co_firstlineno}\) is traced for the first time.",
                        msgs[0])
    msg = only_retrace(msgs)
    assert msg.startswith(f"TRACING CACHE MISS at {__file__}:{line} "
                          "(test_shape_change_names_argument_file_line_and_call_site): scale "
                          f"(defined at {__file__}:{scale.__code__.co_firstlineno})")
    assert re.search(r"trace 2 of it.*\n  \* x: shape changed: f32\[3\] -> f32\[4\]$", msg)


def test_dtype_change(explain):
    f = plax.jit(lambda x, y: x + y)
    f(np.ones(2, np.float32), np.ones(2, np.float32))
    f(np.ones(2, np.float32), np.ones(2, np.int32))
    assert re.search(r"\* y: dtype changed: f32\[2\] -> i32\[2\]$", only_retrace(explain()))


def test_weak_type_python_scalar_vs_array(explain):
    f = plax.jit(lambda x, s: x * s)
    f(jnp.ones(2), 2.0)
    f(jnp.ones(2), np.float32(2.0))
    msg = only_retrace(explain())
    assert re.search(r"\* s: weak_type changed: ~f32\[\] -> f32\[\] \(~ marks a weak type: a "
                     r"Python int/float/complex scalar", msg)


def test_static_value_change_and_hint(explain):
    f = plax.jit(lambda x, n: x * n, static_argnums=1)
    f(jnp.ones(2), 2)
    f(jnp.ones(2), 3)
    msg = only_retrace(explain())
    assert re.search(r"\* n \(static\): value changed: 2 -> 3; .*static argument that changes "
                     r"on every call retraces on every call", msg)


def test_pytree_dict_gained_key_and_nested_leaf_names(explain):
    def loss(params, x):
        return jnp.sum(params["w1"] * x)

    f = plax.jit(loss)
    x = jnp.ones(3)
    f({"w1": jnp.ones(3)}, x)
    f({"w1": jnp.ones(3), "b": jnp.zeros(())}, x)
    f({"w1": jnp.ones(3, jnp.int32)}, x)
    retraces = [m for m in explain() if "traced again" in m]
    assert re.search(r"\* params: pytree structure changed: the dict gained key 'b'$",
                     retraces[0])
    assert re.search(r"\* params\['w1'\]: dtype changed: f32\[3\] -> i32\[3\]$", retraces[1])


def test_list_length_and_keyword_arguments(explain):
    f = plax.jit(lambda xs, scale=1.0: xs[0] * scale)
    f([1.0, 2.0])
    f([1.0, 2.0, 3.0])
    f([1.0, 2.0, 3.0], scale=2.0)
    retraces = [m for m in explain() if "traced again" in m]
    assert re.search(r"\* xs: pytree structure changed: the list changed length: 2 -> 3$",
                     retraces[0])
    assert re.search(r"\* pytree structure changed: the keyword arguments gained key 'scale'$",
                     retraces[1])


@dataclasses.dataclass
class Pair:
    a: object
    b: object


plax.tree_util.register_dataclass(Pair, data_fields=["a", "b"], meta_fields=[])


def test_registered_node_children_are_named_by_field(explain):
    f = plax.jit(lambda p: p.a)
    f(Pair(1.0, 2.0))
    f(Pair(1.0, (2.0,)))
    assert re.search(r"\* p\.b: pytree structure changed: was an array leaf, now a tuple$",
                     only_retrace(explain()))


def test_closing_over_an_enclosing_tracer_is_named(explain):
    state = {}
    f = plax.jit(lambda y: y * state["c"])

    def loss(c):
        state["c"] = c
        return f(1.0)

    plax.grad(loss)(2.0)
    plax.grad(loss)(3.0)
    assert "could not be cached: <lambda> closes over values traced by an enclosing " \
        "transformation" in only_retrace(explain())


def test_sharding_over_eight_devices_vs_one(explain):
    mesh = plax.make_mesh((8,), ("x",))  # Explicit axes: the split is part of the type
    spread = plax.device_put(np.ones(8, np.float32), NamedSharding(mesh, P("x")))
    f = plax.jit(lambda a: a * 2)
    f(np.ones(8, np.float32))
    f(spread)
    assert re.search(r"\* a: sharding changed: f32\[8\] -> f32\[8@x\]$", only_retrace(explain()))


def test_x64_flag(explain):
    f = plax.jit(lambda a: a + 1)
    f(np.ones(2, np.float32))
    with plax.enable_x64():
        f(np.ones(2, np.float32))
    msg = only_retrace(explain())
    assert re.search(r"\* the trace-context flag jax_enable_x64 changed: False -> True$", msg)


def test_named_axes_in_scope(explain):
    f = plax.jit(lambda a: a * 2)
    f(jnp.ones(3))
    plax.vmap(f, axis_name="i")(jnp.ones((2, 3)))
    assert re.search(r"\* the named axes in scope changed: none -> \{i: 2\}$",
                     only_retrace(explain()))


def test_cleared_cache_is_named(explain):
    f = plax.jit(lambda a: a * 2)
    f(jnp.ones(3))
    f.clear_cache()
    f(jnp.ones(3))
    assert "dropped from the cache (clear_cache()" in only_retrace(explain())


def test_default_explains_from_the_fifth_retrace_once_per_cause(caplog):
    def grow(x):
        return x + 1

    f = plax.jit(grow)
    with config.override("explain_cache_misses", None), caplog.at_level(logging.WARNING, LOGGER):
        for n in range(1, 6):  # the first trace and 4 retraces: silent
            f(np.ones(n, np.float32))
        assert messages(caplog) == []
        f(np.ones(6, np.float32))  # the 5th retrace
        f(np.ones(7, np.float32))  # the same cause (x's shape): not repeated
        f(np.ones(7, np.int32))    # a new cause
    msgs = messages(caplog)
    assert len(msgs) == 2, msgs
    assert re.search(r"grow .* is traced again \(trace 6 of it\).*\n  \* x: shape changed: "
                     r"f32\[5\] -> f32\[6\]\n  \(grow has been retraced more than 4 times", msgs[0])
    assert re.search(r"\* x: dtype changed: f32\[7\] -> i32\[7\]", msgs[1])


def test_default_leaves_plax_own_jitted_functions_alone(caplog):
    with config.override("explain_cache_misses", None), caplog.at_level(logging.WARNING, LOGGER):
        for n in range(1, 9):
            plax.nn.softmax(np.ones(n, np.float32))
    assert messages(caplog) == []


def test_true_explains_each_and_false_never(caplog):
    f = plax.jit(lambda x: x + 1)
    with caplog.at_level(logging.WARNING, LOGGER):
        with config.override("explain_cache_misses", True):
            for n in range(1, 4):
                f(np.ones(n, np.float32))
        assert len(messages(caplog)) == 3  # the first trace and two retraces
        caplog.clear()
        with config.override("explain_cache_misses", False), config.override("log_compiles", True):
            for n in range(4, 12):
                f(np.ones(n, np.float32))
    assert messages(caplog) == []


def test_logging_level_silences_it(caplog):
    f = plax.jit(lambda x: x + 1)
    logger = logging.getLogger(LOGGER)
    with config.override("explain_cache_misses", True), caplog.at_level(logging.WARNING, LOGGER):
        logger.setLevel(logging.ERROR)
        f(np.ones(1, np.float32))
        f(np.ones(2, np.float32))
        assert messages(caplog) == []
        logger.setLevel(logging.WARNING)
        f(np.ones(3, np.float32))
    assert len(messages(caplog)) == 1
    assert any(r.name == LOGGER for r in caplog.records)


def test_flag_values():
    assert config.read("explain_cache_misses") is None
    with config.override("jax_explain_cache_misses", "true"):
        assert config.read("explain_cache_misses") is True
    with pytest.raises(ValueError, match="explain_cache_misses.*must be a boolean"):
        config.override("explain_cache_misses", "sometimes").__enter__()
