"""plax.monitoring: the listener registry with JAX's call conventions, and the compile and
persistent-cache events plax's runtime records (JAX's names, checked against JAX 0.10.2)."""
import numpy as np
import pytest

import plax
from plax import monitoring

# kind -> (register, unregister, record, the record's positional arguments after the event)
KINDS = {
    "event": (monitoring.register_event_listener, monitoring.unregister_event_listener,
              monitoring.record_event, ()),
    "duration": (monitoring.register_event_duration_secs_listener,
                 monitoring.unregister_event_duration_listener,
                 monitoring.record_event_duration_secs, (0.25,)),
    "time_span": (monitoring.register_event_time_span_listener,
                  monitoring.unregister_event_time_span_listener,
                  monitoring.record_event_time_span, (10.0, 12.5)),
    "scalar": (monitoring.register_scalar_listener, monitoring.unregister_scalar_listener,
               monitoring.record_scalar, (7,)),
}


@pytest.fixture(autouse=True)
def no_listeners_left():
    yield
    monitoring.clear_event_listeners()


def recorder(log, tag):
    return lambda event, *args, **kwargs: log.append((tag, event, args, kwargs))


@pytest.mark.parametrize("kind", list(KINDS))
def test_listeners_receive_the_record_with_its_metadata(kind):
    register, unregister, record, args = KINDS[kind]
    log = []
    first, second = recorder(log, "first"), recorder(log, "second")
    register(first)
    register(second)
    record("/plax/test", *args, fun_name="f", count=3)
    assert log == [("first", "/plax/test", args, {"fun_name": "f", "count": 3}),
                   ("second", "/plax/test", args, {"fun_name": "f", "count": 3})]
    unregister(first)
    record("/plax/test", *args)
    assert log[2:] == [("second", "/plax/test", args, {})]
    with pytest.raises(AssertionError, match="is not a registered"):
        unregister(first)


def test_each_kind_reaches_only_its_own_listeners_and_clear_removes_all():
    log = []
    for kind, (register, _, _, _) in KINDS.items():
        register(recorder(log, kind))
    for kind, (_, _, record, args) in KINDS.items():
        record("/plax/" + kind, *args)
    assert [(tag, event) for tag, event, _, _ in log] == [
        (kind, "/plax/" + kind) for kind in KINDS]
    monitoring.clear_event_listeners()
    for _, _, record, args in KINDS.values():
        record("/plax/after", *args)
    assert len(log) == len(KINDS)


def test_a_listener_may_unregister_itself_while_called():
    log = []

    def once(event, **kwargs):
        log.append(event)
        monitoring.unregister_event_listener(once)
    monitoring.register_event_listener(once)
    monitoring.register_event_listener(recorder(log, "other"))
    monitoring.record_event("/plax/a")
    monitoring.record_event("/plax/b")
    assert log == ["/plax/a", ("other", "/plax/a", (), {}), ("other", "/plax/b", (), {})]


TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
CACHE = "/jax/compilation_cache/"


def listen_to_everything(log):
    monitoring.register_event_listener(recorder(log, "event"))
    monitoring.register_event_duration_secs_listener(recorder(log, "duration"))
    monitoring.register_event_time_span_listener(recorder(log, "span"))
    monitoring.register_scalar_listener(recorder(log, "scalar"))


def test_a_first_call_records_trace_lower_and_compile_as_jax_does():
    log = []
    listen_to_everything(log)

    def monitored_probe(x):  # a program no other test compiles, so no cache answers it
        return x * 1234.5 + 0.125
    f = plax.jit(monitored_probe)
    np.testing.assert_allclose(f(np.float32(2.0)), 2469.125)
    steps = [(tag, name, kwargs) for tag, name, _, kwargs in log if name in (TRACE, LOWER, COMPILE)]
    # Each step: its start as a scalar, its duration, its span; trace names the function,
    # lower and compile name the jit (JAX's fun_name values).
    assert steps == [(tag, event, {"fun_name": name})
                     for event, name in ((TRACE, "monitored_probe"),
                                         (LOWER, "jit(monitored_probe)"),
                                         (COMPILE, "jit(monitored_probe)"))
                     for tag in ("scalar", "duration", "span")]
    compile_records = [args for _, name, args, _ in log if name == COMPILE]
    (start,), (duration,), (span_start, span_end) = compile_records
    assert 0.0 <= duration < 60.0 and start == span_start
    assert span_end - span_start == pytest.approx(duration, abs=1e-3)
    log.clear()
    f(np.float32(3.0))  # the executable is reused: nothing traces or compiles
    assert log == []


def test_the_persistent_cache_reports_misses_then_hits(tmp_path):
    log = []
    listen_to_everything(log)
    before = plax.config.jax_compilation_cache_dir
    plax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        def cached_probe(x):
            return x * 77.25 - 3.0
        np.testing.assert_allclose(plax.jit(cached_probe)(np.float32(1.0)), 74.25)
        events = [name for tag, name, _, _ in log if name.startswith(CACHE)]
        assert events == [CACHE + "compile_requests_use_cache", CACHE + "cache_misses"]
        log.clear()
        plax.clear_caches()  # the next call compiles again: the disk answers
        np.testing.assert_allclose(plax.jit(cached_probe)(np.float32(2.0)), 151.5)
        events = [(tag, name) for tag, name, _, _ in log if name.startswith(CACHE)]
        assert events == [("event", CACHE + "compile_requests_use_cache"),
                          ("event", CACHE + "cache_hits"),
                          ("duration", CACHE + "cache_retrieval_time_sec")]
        (retrieval,) = [args[0] for tag, name, args, _ in log
                        if name == CACHE + "cache_retrieval_time_sec"]
        assert 0.0 <= retrieval < 60.0
        # The compile step still reports, as JAX's does on a hit.
        assert ("duration", COMPILE) in [(tag, name) for tag, name, _, _ in log]
    finally:
        plax.config.update("jax_compilation_cache_dir", before)
