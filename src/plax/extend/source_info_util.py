"""``plax.extend.source_info_util``: where staged operations come from.

Each equation of a jaxpr records a ``SourceInfo``: the user's source line and the name stack
(the enclosing ``named_scope``/``named_call``/``jit`` names, a tuple here). Libraries built on
plax mark their own source files with ``register_exclusion`` so that their wrappers are never
taken for the user's call site.
"""
from plax.core.source_info import SourceInfo, current_source_info, register_exclusion  # noqa: F401
from plax.core.trace import (extend_name_stack, fresh_name_stack as reset_name_stack,  # noqa: F401
                             name_stack as current_name_stack)

__all__ = ["SourceInfo", "current", "current_name_stack", "extend_name_stack",
           "register_exclusion", "reset_name_stack", "summarize"]


def current() -> SourceInfo:
    """The ``SourceInfo`` an operation staged here and now would record."""
    return current_source_info(current_name_stack())


def summarize(source_info: SourceInfo, num_frames=1) -> str:
    """``file:line (function)`` of the user code ``source_info`` points at ('' if unknown)."""
    del num_frames
    return source_info.location() or "unknown"
