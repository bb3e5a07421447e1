"""plax.profiler: traces of what a program does, for TensorBoard and Perfetto (JAX's
``jax.profiler``), on jaxlib's profiler.

``with plax.profiler.trace(log_dir):`` (or ``start_trace``/``stop_trace``) collects host and
device activity and writes ``log_dir/plugins/profile/<run>/<host>.xplane.pb`` (TensorBoard's
profile plugin) and ``<host>.trace.json.gz``; with ``create_perfetto_trace=True`` also
``perfetto_trace.json.gz`` for https://ui.perfetto.dev. Besides jaxlib's and XLA's own events
the trace holds plax's steps: ``trace f``, ``lower jit(f)``, ``compile jit(f)`` and
``execute jit(f)`` (runs through Python; C++-dispatched calls appear as jaxlib's
``PjitFunction(f)``), and ``named_scope <name>`` around what was traced in a
``plax.named_scope``. Outside a trace these annotations cost one flag read.

``TraceAnnotation``/``StepTraceAnnotation``/``annotate_function`` add the user's own;
``start_server`` lets TensorBoard capture remotely; ``device_memory_profile`` is a pprof
snapshot of live buffers. ``ProfileData`` reads a written ``.xplane.pb`` back.
"""
from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import pathlib
import socketserver
import threading

from plax.runtime import xla
from plax.version import __version__

__all__ = [
    "ProfileData", "ProfileEvent", "ProfileOptions", "ProfilePlane", "StepTraceAnnotation",
    "TraceAnnotation", "annotate_function", "device_memory_profile", "register_subprocess",
    "save_device_memory_profile", "start_server", "start_trace", "stop_server", "stop_trace",
    "trace",
]

ProfileData = xla.ProfileData    # a written trace, read back: .planes -> .lines -> .events
ProfileEvent = xla.ProfileEvent
ProfilePlane = xla.ProfilePlane


class ProfileOptions(xla.ProfileOptions):
    """What a trace collects: ``host_tracer_level`` (0-3), ``python_tracer_level`` (1:
    every Python call), ``enable_hlo_proto``, ``duration_ms``, ... (jaxlib's options)."""


class TraceAnnotation(xla.TraceMe):
    """Context manager marking a span named ``name`` on the trace timeline; keyword
    arguments are attached to it as metadata (``TraceAnnotation("load", batch=3)``).
    Costs next to nothing when no trace is being collected."""


class StepTraceAnnotation(TraceAnnotation):
    """A ``TraceAnnotation`` marking one training step, ``step_num=`` its number: TensorBoard's
    step-time views group the trace by these."""

    def __init__(self, name: str, **kwargs):
        super().__init__(name, _r=1, **kwargs)  # (_r=1: the profiler's mark of a step)


def annotate_function(func, name: str | None = None, **decorator_kwargs):
    """Decorator: every call of ``func`` is a ``TraceAnnotation`` named ``name`` (default: the
    function's qualified name), with ``decorator_kwargs`` as its metadata."""
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def annotated(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return annotated


# --- collecting a trace -----------------------------------------------------------------
class _Session:
    """The one trace being collected in this process, and where it goes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.session = None
        self.log_dir = None
        self.perfetto_trace = False
        self.perfetto_link = False


_current = _Session()


def start_trace(log_dir, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
                profiler_options: ProfileOptions | None = None) -> None:
    """Start collecting a trace, written to ``log_dir`` by ``stop_trace`` (TensorBoard's layout:
    ``log_dir/plugins/profile/<run>/``). ``create_perfetto_trace`` also writes
    ``perfetto_trace.json.gz``; ``create_perfetto_link`` writes it and, at ``stop_trace``,
    serves it on 127.0.0.1:9001 and prints a ui.perfetto.dev link, waiting until Perfetto has
    fetched it. One trace at a time: a second raises RuntimeError."""
    with _current.lock:
        if _current.session is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be run "
                               "at a time (stop it with plax.profiler.stop_trace()).")
        log_dir = os.fspath(log_dir)
        xla.clear_profiler_metadata()
        xla.get_backend()  # devices must exist before the session, or their tracers miss it
        xla.set_profiler_metadata("jax_version", __version__)
        xla.set_profiler_metadata("jaxlib_version", xla.JAXLIB_VERSION)
        _current.session = xla.profiler_session(profiler_options or ProfileOptions())
        _current.log_dir = log_dir
        _current.perfetto_link = bool(create_perfetto_link)
        _current.perfetto_trace = bool(create_perfetto_trace or create_perfetto_link)


def stop_trace() -> None:
    """Stop the trace ``start_trace`` began and write it to its ``log_dir``; RuntimeError
    when none is running."""
    with _current.lock:
        if _current.session is None:
            raise RuntimeError("No profile started: call plax.profiler.start_trace(log_dir) "
                               "first.")
        session, log_dir = _current.session, _current.log_dir
        perfetto_trace, perfetto_link = _current.perfetto_trace, _current.perfetto_link
        _current.reset()
        session.stop_and_export(log_dir)
        xla.clear_profiler_metadata()
        if perfetto_trace:
            path = _write_perfetto_trace(log_dir)
            if perfetto_link:
                _serve_to_perfetto(path)


class trace:
    """Context manager (and decorator) collecting a trace into ``log_dir`` while it is open:
    ``start_trace`` on entry, ``stop_trace`` on exit (see there for the arguments)."""

    def __init__(self, log_dir, create_perfetto_link=False, create_perfetto_trace=False,
                 profiler_options: ProfileOptions | None = None):
        self._args = (log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)

    def __enter__(self):
        start_trace(*self._args)
        return self

    def __exit__(self, *exc):
        stop_trace()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def traced(*args, **kwargs):
            with trace(*self._args):
                return func(*args, **kwargs)
        return traced


def _latest_run(log_dir) -> pathlib.Path:
    runs = list((pathlib.Path(log_dir).absolute() / "plugins" / "profile").iterdir())
    return max(runs, key=os.path.getmtime)


def _write_perfetto_trace(log_dir) -> pathlib.Path:
    """``perfetto_trace.json.gz`` next to the run's ``*.trace.json.gz``: the same events
    without the ``metadata`` entry, which Perfetto refuses."""
    run = _latest_run(log_dir)
    found = sorted(run.glob("*.trace.json.gz"))
    if len(found) != 1:
        raise ValueError(f"Invalid trace folder {run}: expected one *.trace.json.gz, found "
                         f"{[p.name for p in found]}.")
    with gzip.open(found[0], "rb") as f:
        events = json.load(f)
    events.pop("metadata", None)
    out = run / "perfetto_trace.json.gz"
    with gzip.open(out, "wb") as f:
        f.write(json.dumps(events).encode("utf-8"))
    return out


class _PerfettoRequests(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Access-Control-Allow-Origin", "*")  # ui.perfetto.dev fetches it
        super().end_headers()

    def do_GET(self):
        self.server.last_path = self.path
        super().do_GET()

    def log_message(self, *args):  # (quiet)
        pass


def _serve_to_perfetto(path: pathlib.Path, port: int = 9001) -> None:
    """Serve ``path`` where ui.perfetto.dev looks (127.0.0.1:9001) until it is fetched."""
    handler = functools.partial(_PerfettoRequests, directory=str(path.parent))
    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", port), handler) as server:
        server.last_path = None
        print(f"Open URL in browser: https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/"
              f"{path.name}")
        while server.last_path != "/" + path.name:
            server.handle_request()


# --- the server TensorBoard captures from ------------------------------------------------
_server = [None]


def start_server(port: int, requires_backend: bool = True):
    """Start jaxlib's profiler server on ``port``, from which TensorBoard's profile plugin
    ("capture profile") samples traces. One per process. ``requires_backend``: start the
    devices first (their tracers register with it)."""
    if _server[0] is not None:
        raise ValueError("Only one profiler server can be active at a time (stop it with "
                         "plax.profiler.stop_server()).")
    if requires_backend:
        xla.get_backend()
    _server[0] = xla.start_profiler_server(int(port))
    return _server[0]


def stop_server() -> None:
    """Stop the server ``start_server`` started."""
    if _server[0] is None:
        raise ValueError("No active profiler server (start one with "
                         "plax.profiler.start_server(port)).")
    _server[0] = None  # (jaxlib stops it when its last reference goes)


def register_subprocess(pid: int, port: int):
    """Include the profiler server of process ``pid`` (listening on ``port``) in this
    process's traces; returns a function that unregisters it."""
    return xla.register_profiler_subprocess(int(pid), int(port))


# --- device memory -------------------------------------------------------------------------
def device_memory_profile(backend: str | None = None) -> bytes:
    """A snapshot of the live device buffers and executables of ``backend`` (default: the
    default one), with where each was allocated, as a gzipped pprof protocol buffer
    (``pprof --web file.prof``)."""
    return gzip.compress(xla.heap_profile(xla.get_backend(backend)))


def save_device_memory_profile(filename, backend: str | None = None) -> None:
    """Write ``device_memory_profile(backend)`` to ``filename``."""
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)
