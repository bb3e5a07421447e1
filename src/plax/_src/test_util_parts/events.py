"""Counting what plax does: traces, lowerings, compiles, cache misses, transfers.

``count_x()`` is a context manager yielding a function that returns how many times ``x``
happened in this thread since the block began. The counts come from plax's own machinery,
watched only while some count is open (the hooks are put in place when the first block
opens and removed when the last one closes):

- tracing a jitted function, lowering a program to StableHLO (a jit's, or an eager
  primitive's one-equation program), XLA compiling one, and the persistent cache missing:
  the events plax's pipeline reports (``runtime.pipeline_steps``);
- a jitted call jaxlib's C++ dispatch could not serve (its miss handler ran): JAX's
  ``jit_cpp_cache_miss``;
- a call of an AOT-compiled function (``Compiled.__call__``): plax runs every one in
  Python, so each counts, as a miss of JAX's C++ path would;
- ``plax.device_put`` calls (outermost ones only);
- the jaxprs of jitted functions lowered for one device (``collect_lowered_jaxprs``).
"""
from __future__ import annotations

import contextlib
import functools
import threading

import plax
from plax.api import devices as _api_devices
from plax.api import jit as _jit
from plax.api import stages as _stages
from plax.runtime import dispatch as _dispatch
from plax.runtime import jitted as _jitted
from plax.runtime import pipeline_steps as _steps
from plax.runtime import xla as _xla


class _State(threading.local):
    def __init__(self):
        self.counts = {}
        self.device_put_depth = 0
        self.lowered = None  # the list collect_lowered_jaxprs fills, while one is open


_state = _State()


def _bump(name: str) -> None:
    _state.counts[name] = _state.counts.get(name, 0) + 1


# plax's pipeline events -> JAX's test-event names.
_SPAN_EVENTS = {
    _jit.TRACE_EVENT: "trace_to_jaxpr",
    _jitted.LOWER_EVENT: "lower_jaxpr_to_module",
    _xla.BACKEND_COMPILE_EVENT: "pxla_cached_compilation",
}
_POINT_EVENTS = {"/jax/compilation_cache/cache_misses":
                 "compile_after_persistent_compilation_miss"}


def _span_wrapper(original):
    def span_recorder(event, *args, **kwargs):
        name = _SPAN_EVENTS.get(event)
        if name is not None:
            _bump(name)
        if original is not None:
            original(event, *args, **kwargs)
    return span_recorder


def _event_wrapper(original):
    def event_recorder(event, *args, **kwargs):
        name = _POINT_EVENTS.get(event)
        if name is not None:
            _bump(name)
        if original is not None:
            original(event, *args, **kwargs)
    return event_recorder


def _counting(name):
    def wrap(original):
        @functools.wraps(original)
        def counted(*args, **kwargs):
            _bump(name)
            return original(*args, **kwargs)
        return counted
    return wrap


def _device_put_wrapper(original):
    @functools.wraps(original)
    def device_put(*args, **kwargs):
        if _state.device_put_depth == 0:
            _bump("batched_device_put")
        _state.device_put_depth += 1
        try:
            return original(*args, **kwargs)
        finally:
            _state.device_put_depth -= 1
    return device_put


def _lowering_wrapper(original):
    @functools.wraps(original)
    def lower_jitted(call, *args, **kwargs):
        out = original(call, *args, **kwargs)
        if _state.lowered is not None:
            _state.lowered.append((call.jaxpr, out[0]))
        return out
    return lower_jitted


# (owner, attribute, wrapper): the hooks the counts need.
_HOOKS = (
    (_steps, "span_recorder", _span_wrapper),
    (_steps, "event_recorder", _event_wrapper),
    (_jit.JitWrapped, "_cpp_miss", _counting("jit_cpp_cache_miss")),
    (_stages.Compiled, "_call_python", _counting("stages_compiled_call")),
    (_dispatch, "compile_jaxpr", _counting("xla_primitive_callable_cache_miss")),
    (_jitted, "lower_jitted", _lowering_wrapper),
    (plax, "device_put", _device_put_wrapper),
    (_api_devices, "device_put", _device_put_wrapper),
)
_lock = threading.Lock()
_open = [0]
_saved: list = []


@contextlib.contextmanager
def watching():
    """While open (in any thread), plax's machinery reports what the counts count."""
    with _lock:
        if _open[0] == 0:
            # (A class's own attribute, not a bound one; a module's may be loaded lazily.)
            originals = [owner.__dict__[attr] if isinstance(owner, type)
                         else getattr(owner, attr) for owner, attr, _ in _HOOKS]
            for (owner, attr, wrapper), original in zip(_HOOKS, originals):
                _saved.append((owner, attr, original))
                setattr(owner, attr, wrapper(original))
        _open[0] += 1
    try:
        yield
    finally:
        with _lock:
            _open[0] -= 1
            if _open[0] == 0:
                while _saved:
                    owner, attr, original = _saved.pop()
                    setattr(owner, attr, original)


def count_events(event: str):
    """A context manager factory counting ``event`` (one of JAX's test-event names)."""
    @contextlib.contextmanager
    def count_event():
        with watching():
            before = _state.counts.get(event, 0)
            yield lambda: _state.counts.get(event, 0) - before
    return count_event


count_device_put = count_events("batched_device_put")
count_device_put_fast_path_hit = count_events("batched_copy_array")  # (plax: never)
count_pjit_cpp_cache_miss = count_events("jit_cpp_cache_miss")
count_jit_tracing_cache_miss = count_events("trace_to_jaxpr")
count_aot_jit_cpp_cache_miss = count_events("stages_compiled_call")
count_jit_and_pmap_lowerings = count_events("lower_jaxpr_to_module")
count_jit_compilation_cache_miss = count_events("pxla_cached_compilation")
count_compilation_after_persistent_cache_miss = count_events(
    "compile_after_persistent_compilation_miss")
count_jax_array_shard_arg_calls = count_events("_array_shard_arg")  # (plax: never)
count_primitive_compile_misses = count_events("xla_primitive_callable_cache_miss")


@contextlib.contextmanager
def collect_lowered_jaxprs():
    """Yields a list that gets ``(closed jaxpr, StableHLO text)`` for each jitted function
    lowered (on one device) in this thread inside the block."""
    assert _state.lowered is None, "collect_lowered_jaxprs blocks do not nest"
    collection = _state.lowered = []
    try:
        with watching():
            yield collection
    finally:
        _state.lowered = None


@contextlib.contextmanager
def count_primitive_compiles():
    """Forget the eager primitives' compiled programs, then count the programs compiled
    for them in the block; the count is -1 until the block ends, as in JAX."""
    _dispatch._prim_cache.clear()
    _dispatch._prim_callables.clear()
    result = [-1]
    with count_primitive_compile_misses() as count:
        try:
            yield lambda: result[0]
        finally:
            result[0] = count()


@contextlib.contextmanager
def assert_num_jit_and_pmap_compilations(times):
    """Fail unless exactly ``times`` programs were lowered in the block."""
    with count_jit_and_pmap_lowerings() as count:
        yield
    if count() != times:
        raise AssertionError(f"Expected exactly {times} XLA compilations, "
                             f"but executed {count()}")
