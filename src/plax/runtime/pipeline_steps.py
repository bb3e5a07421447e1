"""The steps of plax's pipeline (trace, lower, compile, execute) as the profiler and
plax.monitoring see them: ``step`` (a TraceMe while a profiler session collects, a timed span
for plax.monitoring's listeners) and ``record_event`` (a point event). No jaxlib here: the
profiler's TraceMe is installed by runtime/xla.py, which imports this module."""
from __future__ import annotations

import re
import time

# jaxlib's profiler annotation (cheap to ask ``is_enabled()``: one C++ flag read), set by
# runtime/xla.py when it loads.
TraceMe = None

# plax.monitoring's recorders, installed when it is imported (it sits above the runtime;
# with it not imported no listener can exist): ``event_recorder(event, **kwargs)`` and
# ``span_recorder(event, start, end, **kwargs)`` (seconds since the epoch).
event_recorder = None
span_recorder = None


def record_event(event: str) -> None:
    """Report ``event`` to plax.monitoring's listeners, if it is loaded."""
    if event_recorder is not None:
        event_recorder(event)


class step:
    """One step of plax's pipeline (trace, lower, compile, execute) as the profiler and
    plax.monitoring see it: while a profiler session is active, a TraceMe named
    ``"<what> <fun_name>"``; with plax.monitoring loaded, the step's span reported as
    ``event`` (when given). ``fun_name`` may be a function computing the name, called only
    when someone looks. With neither, entering and leaving cost two flag reads."""

    __slots__ = ("_what", "_event", "_fun_name", "_traceme", "_start")

    def __init__(self, what: str, fun_name, event: str | None = None):
        self._what, self._fun_name, self._event = what, fun_name, event

    def _name(self) -> str:
        name = self._fun_name
        if callable(name):
            name = self._fun_name = name()
        return name

    def __enter__(self):
        self._traceme = None
        if TraceMe.is_enabled():
            self._traceme = TraceMe(f"{self._what} {self._name()}")
            self._traceme.__enter__()
        self._start = time.time() if self._event and span_recorder is not None else None
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._start is not None and exc_type is None:
            span_recorder(self._event, self._start, time.time(), fun_name=self._name())
        if self._traceme is not None:
            self._traceme.__exit__(exc_type, exc, tb)
        return False


# --- the names steps go by -------------------------------------------------------------
_MODULE_NAME = re.compile(r"module @([\w.$-]+)")


def executable_name(exe) -> str:
    """JAX's name of a compiled executable: ``jit(f)`` for its module ``jit_f``."""
    try:
        return "jit(" + exe.hlo_modules()[0].name.removeprefix("jit_") + ")"
    except Exception:
        return "an XLA executable"


def module_fun_name(text) -> str:
    """JAX's name of a compiled module: ``jit(f)`` for the module ``@jit_f``."""
    found = _MODULE_NAME.search(str(text)[:500])
    name = found.group(1) if found else "unknown"
    return f"jit({name[4:]})" if name.startswith("jit_") else name
