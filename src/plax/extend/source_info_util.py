"""``plax.extend.source_info_util``: where staged operations come from.

Each equation of a jaxpr records a ``SourceInfo``: the user's source line and the name stack
(the enclosing ``named_scope``/``named_call``/``jit`` names, a tuple here). Libraries built on
plax mark their own source files with ``register_exclusion`` so that their wrappers are never
taken for the user's call site.
"""
import contextlib

from plax.core.source_info import (SourceInfo, current_source_info, register_exclusion,  # noqa: F401
                                   staging_location)
from plax.core.trace import (EMPTY_NAME_STACK, NameStack, extend_name_stack,  # noqa: F401
                             fresh_name_stack as reset_name_stack,
                             name_stack as current_name_stack, trace_state)
from plax.core.trace import transform_name_stack as _transform_name_stack

__all__ = ["NameStack", "SourceInfo", "current", "current_name_stack", "extend_name_stack",
           "new_name_stack", "new_source_info", "register_exclusion", "reset_name_stack",
           "set_name_stack", "summarize", "transform_name_stack", "user_context"]


def new_name_stack(name: str = "") -> NameStack:
    """A name stack holding ``name`` (empty for ``''``)."""
    return NameStack((name,)) if name else EMPTY_NAME_STACK


def new_source_info() -> SourceInfo:
    """A ``SourceInfo`` pointing nowhere, with an empty name stack."""
    return SourceInfo(EMPTY_NAME_STACK, None, None, None)


@contextlib.contextmanager
def set_name_stack(name_stack):
    """Make ``name_stack`` (a ``NameStack`` or a tuple of names) the name stack that
    operations staged inside record."""
    prev = trace_state.name_stack
    trace_state.name_stack = NameStack(name_stack)
    try:
        yield
    finally:
        trace_state.name_stack = prev


def transform_name_stack(name: str):
    """Record the operations staged inside under the transformation ``name`` (e.g.
    ``jvp``), printed around the scope after it: ``jvp(foo)``."""
    return _transform_name_stack(name)


@contextlib.contextmanager
def user_context(traceback, *, name_stack=None):
    """Stage operations inside as coming from ``traceback`` (a ``SourceInfo``, e.g. an
    equation's ``source_info``, whose line they record; None keeps the caller's line),
    under ``name_stack`` when one is given."""
    if traceback is not None and not isinstance(traceback, SourceInfo):
        raise TypeError(f"user_context: traceback must be a SourceInfo (an equation's "
                        f"source_info) or None, got {type(traceback).__name__}")
    prev_at, prev_stack = staging_location.at, trace_state.name_stack
    if traceback is not None:
        staging_location.at = traceback
    if name_stack is not None:
        trace_state.name_stack = NameStack(name_stack)
    try:
        yield
    finally:
        staging_location.at, trace_state.name_stack = prev_at, prev_stack


def current() -> SourceInfo:
    """The ``SourceInfo`` an operation staged here and now would record."""
    return current_source_info(current_name_stack())


def summarize(source_info: SourceInfo, num_frames=1) -> str:
    """``file:line (function)`` of the user code ``source_info`` points at ('' if unknown)."""
    del num_frames
    return source_info.location() or "unknown"
