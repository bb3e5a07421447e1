"""Exiting while daemon threads still call into XLA.

While CPython finalises, a daemon thread that takes the GIL again is ended with
``pthread_exit``. A thread coming back from jaxlib (a program it ran, an array it freed:
jaxlib lets go of the GIL around both) is inside C++ frames then, and the forced unwinding
of ``pthread_exit`` through jaxlib's ``noexcept`` frames aborts the whole process
("FATAL: exception not rethrown"), in JAX as well. So when the program exits, plax first
stops daemon threads from going into jaxlib again: the C++ jit path is turned off (every
call reaches Python), a thread other than the main one that reaches plax's runtime waits
there until the process ends ("parks"), and the exit waits a bounded time for the daemon
threads that may be inside jaxlib to come back out and park. Nothing here imports jaxlib.
"""
from __future__ import annotations

import atexit
import os
import sys
import sysconfig
import threading
import time

exiting = [False]  # read on the runtime's paths into jaxlib (a list: cheap to read inline)
_on_exit: list = []  # what turns the C++ jit path off (installed by runtime/cpp_jit.py)
_parked: set = set()  # idents of the threads parked so far
_registered = [False]
_GRACE_SECS = 0.5  # the longest the exit waits for daemon threads to come out of jaxlib


def on_exit(hook) -> None:
    """Run ``hook()`` when the program starts to exit (before daemon threads are parked)."""
    _on_exit.append(hook)


def park() -> None:
    """Called on a path into jaxlib once the program exits: a daemon thread waits here for
    the end of the process (the main thread, and plax's own threads, go on)."""
    me = threading.current_thread()
    if me is threading.main_thread() or me.name.startswith("plax-") or not me.daemon:
        return
    _parked.add(me.ident)
    threading.Event().wait()


def install() -> None:
    """Arrange for the exit to park daemon threads (once; when a backend starts)."""
    if not _registered[0]:
        _registered[0] = True
        atexit.register(_park_daemon_threads)


_STDLIB = os.path.normcase(sysconfig.get_paths()["stdlib"]) + os.sep


def _may_be_in_jaxlib(thread, frames) -> bool:
    """Whether a daemon thread may be inside a jaxlib call now: it is not parked, and its
    innermost Python frame is not the standard library's (a thread blocked on a queue, a
    lock, a socket or a sleep there is not in jaxlib)."""
    if thread.ident in _parked or thread.name.startswith("plax-"):
        return False
    frame = frames.get(thread.ident)
    if frame is None:
        return False
    return not os.path.normcase(frame.f_code.co_filename).startswith(_STDLIB)


def _park_daemon_threads() -> None:
    exiting[0] = True
    for hook in _on_exit:
        hook()
    deadline = time.monotonic() + _GRACE_SECS
    me = threading.current_thread()
    while time.monotonic() < deadline:
        frames = sys._current_frames()
        busy = [t for t in threading.enumerate()
                if t.daemon and t is not me and t.is_alive() and _may_be_in_jaxlib(t, frames)]
        del frames
        if not busy:
            return
        time.sleep(0.005)  # (lets them take the GIL, come back out of jaxlib, and park)
