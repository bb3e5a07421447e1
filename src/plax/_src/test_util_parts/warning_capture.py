"""Catching warnings in tests, safely when tests run on several threads.

Python's ``warnings.catch_warnings`` changes process-wide state, so two threads using it
race. With ``install_threadsafe_warning_handlers()`` (done when tests run on threads),
every warning is shown through one hook that asks this thread's stack of handlers; the
context managers below push a handler. Without it they fall back to ``catch_warnings``.
"""
from __future__ import annotations

import contextlib
import re
import threading
import warnings


class _Handlers(threading.local):
    def __init__(self):
        self.stack = []


_handlers = _Handlers()


def _showwarning(message, category, filename, lineno, file=None, line=None):
    """The hook: the innermost handler that takes the warning wins; none raises it."""
    for handler in reversed(_handlers.stack):
        if handler(message, category, filename, lineno, file, line):
            return
    raise category(message)


def _installed() -> bool:
    return warnings.showwarning is _showwarning


@contextlib.contextmanager
def _pushed(handler):
    _handlers.stack.append(handler)
    try:
        yield
    finally:
        _handlers.stack.pop()


@contextlib.contextmanager
def raise_on_warnings():
    """Inside, a warning is raised as an exception."""
    if not _installed():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            yield
        return

    def handler(message, category, *rest):
        raise category(message)
    with _pushed(handler):
        yield


@contextlib.contextmanager
def record_warnings():
    """Yields the list of the warnings (``warnings.WarningMessage``) raised inside."""
    if not _installed():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught
        return
    log = []

    def handler(message, category, filename, lineno, file=None, line=None):
        log.append(warnings.WarningMessage(message, category, filename, lineno, file, line))
        return True
    with _pushed(handler):
        yield log


@contextlib.contextmanager
def ignore_warning(*, message: str | None = None, category: type = Warning):
    """Inside (or in the decorated function), warnings of ``category`` whose text matches
    the regular expression ``message`` from its start are ignored."""
    if not _installed():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="" if message is None else message,
                                    category=category)
            yield
        return
    pattern = re.compile(message) if message else None
    wanted = category

    def handler(message, category, *rest):
        text = str(message) if isinstance(message, Warning) else message
        return (pattern is None or pattern.match(text)) and issubclass(category, wanted)
    with _pushed(handler):
        yield


def install_threadsafe_warning_handlers() -> None:
    """Show every warning through the per-thread handlers (and show every one)."""
    warnings.showwarning = _showwarning
    warnings.simplefilter("always")
