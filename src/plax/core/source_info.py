"""Where an equation came from: the user's source line and the named-scope stack."""
from __future__ import annotations

import os
import sys
from typing import NamedTuple

from plax.core.caches import BoundedCache

_PLAX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SourceInfo(NamedTuple):
    name_stack: tuple      # enclosing named_scope / named_call / jit names, outermost first
    file: str | None
    line: int | None
    function: str | None

    def location(self) -> str:
        """``file:line (function)`` of the user code, or '' when unknown."""
        if self.file is None:
            return ""
        return f"{self.file}:{self.line} ({self.function})"

    def scope(self, prim_name: str) -> str:
        """The name-stack path of an equation, e.g. ``outer/inner/sin``."""
        return "/".join((*self.name_stack, prim_name))


# code object -> is it plax's own? (asked for every staged op)
_in_plax = BoundedCache("code objects inside plax", 1 << 16)


def _is_plax_code(code) -> bool:
    inside = _in_plax.get(code)
    if inside is None:
        inside = _in_plax.put(code, code.co_filename.startswith(_PLAX_DIR))
    return inside


def user_frame():
    """The innermost frame outside plax's own source (the user's call site)."""
    f = sys._getframe(1)
    known = _in_plax
    while f is not None:  # _is_plax_code, inlined: this runs for every staged equation
        code = f.f_code
        inside = known.get(code)
        if inside is None:
            inside = known.put(code, code.co_filename.startswith(_PLAX_DIR))
        if not inside:
            return f
        f = f.f_back
    return None


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the caller point at user code."""
    f, level = sys._getframe(1), 1
    while f is not None and _is_plax_code(f.f_code):
        f, level = f.f_back, level + 1
    return level


# Code of decorators' wrappers (``takes_out_sharding``): frames that are not a function's name.
pass_through_code: set = set()
# Code that calls a function being traced by jit: the entry is inside it (plax.numpy's eager
# functions run compiled, traced by jit, so the frames outside are jit's).
traced_call_code: set = set()


def user_entry_name() -> str:
    """The name of the plax function the user's code called (that is running now), e.g.
    ``zeros`` or ``astype``; array methods count as the plax.numpy function they call."""
    f, entry = sys._getframe(1), None
    while f is not None and _is_plax_code(f.f_code):
        if f.f_code in traced_call_code:
            break
        if not f.f_code.co_filename.endswith("array_methods.py") and \
                f.f_code not in pass_through_code:
            entry = f.f_code.co_name
        f = f.f_back
    return (entry or "").lstrip("_") or "a plax function"


def current_source_info(name_stack: tuple) -> SourceInfo:
    f = user_frame()
    if f is None:
        return SourceInfo(name_stack, None, None, None)
    return SourceInfo(name_stack, f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
