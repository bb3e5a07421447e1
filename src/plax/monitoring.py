"""plax.monitoring: named events and the listeners that receive them (JAX's ``jax.monitoring``).

Code marks a point with ``record_event(name)``, a timing with
``record_event_duration_secs(name, secs)`` or ``record_event_time_span(name, start, end)``,
and a value with ``record_scalar(name, value)``; every listener registered for that kind is
called with the same arguments, keyword metadata included (``fun_name=...``). With no
listener a record costs a loop over an empty list.

plax records what JAX records when it compiles: for tracing a jitted function
(``/jax/core/compile/jaxpr_trace_duration``, ``fun_name="f"``), lowering it to StableHLO
(``/jax/core/compile/jaxpr_to_mlir_module_duration``) and XLA's compile
(``/jax/core/compile/backend_compile_duration``, both ``fun_name="jit(f)"``) the start time as
a scalar, the duration and the time span; and the persistent compilation cache's events
(``/jax/compilation_cache/compile_requests_use_cache``, ``cache_hits``, ``cache_misses``, and
the duration ``cache_retrieval_time_sec``).
"""
from __future__ import annotations

from plax.runtime import pipeline_steps, xla

__all__ = [
    "clear_event_listeners", "record_event", "record_event_duration_secs",
    "record_event_time_span", "record_scalar", "register_event_duration_secs_listener",
    "register_event_listener", "register_event_time_span_listener", "register_scalar_listener",
    "unregister_event_duration_listener", "unregister_event_listener",
    "unregister_event_time_span_listener", "unregister_scalar_listener",
]

BACKEND_COMPILE_EVENT = xla.BACKEND_COMPILE_EVENT

_event_listeners: list = []
_duration_listeners: list = []
_time_span_listeners: list = []
_scalar_listeners: list = []


def record_event(event: str, **kwargs) -> None:
    """Call each event listener with ``(event, **kwargs)``."""
    for listener in tuple(_event_listeners):
        listener(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs) -> None:
    """Call each duration listener with ``(event, duration, **kwargs)`` (seconds)."""
    for listener in tuple(_duration_listeners):
        listener(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs) -> None:
    """Call each time-span listener with ``(event, start_time, end_time, **kwargs)``
    (seconds since the epoch)."""
    for listener in tuple(_time_span_listeners):
        listener(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value, **kwargs) -> None:
    """Call each scalar listener with ``(event, value, **kwargs)``."""
    for listener in tuple(_scalar_listeners):
        listener(event, value, **kwargs)


def register_event_listener(callback) -> None:
    """Have ``callback(event, **kwargs)`` called by every ``record_event``."""
    _event_listeners.append(callback)


def register_event_duration_secs_listener(callback) -> None:
    """Have ``callback(event, duration_secs, **kwargs)`` called by every
    ``record_event_duration_secs``."""
    _duration_listeners.append(callback)


def register_event_time_span_listener(callback) -> None:
    """Have ``callback(event, start_time, end_time, **kwargs)`` called by every
    ``record_event_time_span``."""
    _time_span_listeners.append(callback)


def register_scalar_listener(callback) -> None:
    """Have ``callback(event, value, **kwargs)`` called by every ``record_scalar``."""
    _scalar_listeners.append(callback)


def _unregister(listeners: list, callback, kind: str) -> None:
    if callback not in listeners:
        # AssertionError, the type JAX raises, but raised always (not an assert under -O).
        raise AssertionError(f"unregister_{kind}_listener: {callback!r} is not a registered "
                             f"{kind.replace('_', ' ')} listener; register it first (or do "
                             "not unregister it twice).")
    listeners.remove(callback)


def unregister_event_listener(callback) -> None:
    """Stop calling ``callback`` on ``record_event``; it must be registered."""
    _unregister(_event_listeners, callback, "event")


def unregister_event_duration_listener(callback) -> None:
    """Stop calling ``callback`` on ``record_event_duration_secs``; it must be registered."""
    _unregister(_duration_listeners, callback, "event_duration")


def unregister_event_time_span_listener(callback) -> None:
    """Stop calling ``callback`` on ``record_event_time_span``; it must be registered."""
    _unregister(_time_span_listeners, callback, "event_time_span")


def unregister_scalar_listener(callback) -> None:
    """Stop calling ``callback`` on ``record_scalar``; it must be registered."""
    _unregister(_scalar_listeners, callback, "scalar")


def clear_event_listeners() -> None:
    """Unregister every listener of every kind."""
    for listeners in (_event_listeners, _duration_listeners, _time_span_listeners,
                      _scalar_listeners):
        listeners.clear()


# The pipeline's steps, reported as JAX reports them: the start time as a scalar, the
# duration and the time span, each with ``fun_name``. Other timed events (the persistent
# cache's retrieval) report their duration only.
_STEP_EVENTS = frozenset({
    "/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
    xla.BACKEND_COMPILE_EVENT})


def _record_span(event: str, start: float, end: float, **kwargs) -> None:
    """The runtime's report of a timed step (``pipeline_steps.span_recorder``)."""
    if event in _STEP_EVENTS:
        record_scalar(event, start, **kwargs)
        record_event_duration_secs(event, end - start, **kwargs)
        record_event_time_span(event, start, end, **kwargs)
    else:
        record_event_duration_secs(event, end - start, **kwargs)


pipeline_steps.event_recorder = record_event
pipeline_steps.span_recorder = _record_span
