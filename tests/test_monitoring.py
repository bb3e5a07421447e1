"""plax.monitoring: the listener registry with JAX's call conventions, and the backend-compile
events plax's runtime records."""
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


def test_a_backend_compile_records_its_duration_span_and_start():
    log = []
    monitoring.register_event_duration_secs_listener(recorder(log, "duration"))
    monitoring.register_event_time_span_listener(recorder(log, "span"))
    monitoring.register_scalar_listener(recorder(log, "scalar"))

    def monitored_probe(x):  # a program no other test compiles, so no cache answers it
        return x * 1234.5 + 0.125
    f = plax.jit(monitored_probe)
    np.testing.assert_allclose(f(np.float32(2.0)), 2469.125)
    event = "/jax/core/compile/backend_compile_duration"
    ours = [entry for entry in log if entry[3] == {"fun_name": "jit(monitored_probe)"}]
    assert [(tag, name) for tag, name, _, _ in ours] == [
        ("scalar", event), ("duration", event), ("span", event)]
    (start,), (duration,), (span_start, span_end) = (args for _, _, args, _ in ours)
    assert 0.0 <= duration < 60.0 and start == span_start
    assert span_end - span_start == pytest.approx(duration, abs=1e-3)
    log.clear()
    f(np.float32(3.0))  # the executable is reused: nothing compiles
    assert log == []
