"""Tracebacks without plax's own frames (the ``jax_traceback_filtering`` flag).

An exception that leaves plax through a public entry point (``api_boundary``: a jitted
function's call, the transformations, the control-flow functions) has plax's frames, and
those of source paths libraries excluded (``source_info.register_exclusion``), taken out of
its traceback, so that what the user reads is their own code: the call they made and the
line of their function that failed. The flag says how:

- ``off``: the traceback is left whole;
- ``tracebackhide``: plax's frames get a ``__tracebackhide__`` local, which IPython and
  pytest's reports leave out;
- ``remove_frames``: the frames are removed, and the whole traceback is kept as the
  exception's ``__cause__``, an ``UnfilteredStackTrace`` (chained to the original cause);
- ``quiet_remove_frames``: the frames are removed and a note on the exception says so;
- ``auto`` (the default): ``quiet_remove_frames``.

Only the outermost entry point filters: an exception the user catches between two plax
calls (inside a function jit traces) still has its whole traceback. Nothing runs unless an
exception passes; the entry point's own frame then decides, by looking up the stack for
another entry point's frame.
"""
from __future__ import annotations

import functools
import sys
import types

from plax.core.source_info import is_plax_code, pass_through_code

_NOTE = ("--------------------\nFor simplicity, plax has removed its internal frames from the "
         "traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include "
         "these.")
_UNFILTERED = ("\n\nThe stack trace below excludes plax-internal frames.\nThe preceding is "
               "the original exception that occurred, unmodified.\n\n--------------------")


class UnfilteredStackTrace(Exception):
    """The whole traceback of an exception whose plax frames were removed: its
    ``__cause__`` under ``jax_traceback_filtering=remove_frames``."""


def filtering_mode() -> str:
    """The ``jax_traceback_filtering`` mode in force, ``auto`` resolved."""
    from plax.core.config import config
    mode = config.read("jax_traceback_filtering")
    return "quiet_remove_frames" if mode == "auto" else mode


def filter_traceback(tb):
    """``tb`` without the entries of plax's (and excluded libraries') frames; None when no
    entry is left."""
    kept = []
    while tb is not None:
        if not is_plax_code(tb.tb_frame.f_code):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def api_boundary(fun=None, **options):
    """Mark ``fun`` as a public entry point of plax: an exception leaving the outermost such
    call has its traceback filtered as ``jax_traceback_filtering`` says. Usable as
    ``@api_boundary`` and ``@api_boundary(repro_api_name=...)`` (JAX's options are
    accepted; plax records no repros)."""
    del options
    if fun is None:
        return api_boundary

    @functools.wraps(fun)
    def entry(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (read by IPython and pytest, and by tracebackhide)
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            _filter_at_boundary(e, sys._getframe())
            raise  # (with the traceback _filter_at_boundary set: bare raise adds no frame)
    return entry


_ENTRY_CODE = api_boundary(lambda: None).__code__
pass_through_code.add(_ENTRY_CODE)  # errors name the entry point, not this wrapper


def _filter_at_boundary(e: Exception, frame) -> None:
    mode = filtering_mode()
    if mode == "off":
        return
    caller = frame.f_back
    f = caller
    while f is not None:  # an enclosing entry point filters instead
        if f.f_code is _ENTRY_CODE:
            return
        f = f.f_back
    tb = e.__traceback__
    if mode == "tracebackhide":
        entry = tb
        while entry is not None:
            code = entry.tb_frame.f_code
            # (entry points have the local already, and theirs is still running)
            if code is not _ENTRY_CODE and is_plax_code(code):
                entry.tb_frame.f_locals["__tracebackhide__"] = True
            entry = entry.tb_next
        return
    if mode == "remove_frames" and not isinstance(e.__cause__, UnfilteredStackTrace):
        message = str(e)
        unfiltered = UnfilteredStackTrace(
            f"{type(e).__name__}: {message}{_UNFILTERED}" if message
            else f"{type(e).__name__}{_UNFILTERED}")
        whole = tb
        f = caller
        while f is not None:  # the frames above, as a traceback printed at the top shows
            whole = types.TracebackType(whole, f, f.f_lasti, f.f_lineno)
            f = f.f_back
        unfiltered.__traceback__ = whole
        unfiltered.__cause__ = e.__cause__
        unfiltered.__context__ = e.__context__
        unfiltered.__suppress_context__ = e.__suppress_context__
        e.__cause__ = unfiltered
        e.__context__ = None
        del unfiltered, whole
    elif mode == "quiet_remove_frames" and _NOTE not in getattr(e, "__notes__", ()):
        e.add_note(_NOTE)
    e.__traceback__ = filter_traceback(tb)
