"""Where an equation came from: the user's source line and the named-scope stack; the
names of user functions and of their arguments' leaves (for messages and jaxprs)."""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
from typing import NamedTuple

from plax.core.caches import BoundedCache
from plax.core.tree_core import tree_flatten_with_path
from plax.core.tree_keys import keystr

_PLAX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Transform(str):
    """A transformation's entry in a name stack (``jvp``, ``vmap``, ``transpose``): printed
    around the scope after it, ``jvp(foo)`` (``jvp()`` when none follows), as JAX's is. It
    never equals a scope of the same name."""
    __slots__ = ()

    def __eq__(self, other):
        return type(other) is Transform and str.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(("transform", str(self)))

    def __repr__(self):
        return f"Transform({str.__repr__(self)})"


def scope_path(entries) -> str:
    """The ``/``-joined path of name-stack entries, each transform around the scope after
    it: ``(foo, Transform('vmap'), bar, baz)`` is ``foo/vmap(bar)/baz``."""
    if not any(type(e) is Transform for e in entries):
        return "/".join(entries)
    out: list = []
    for e in reversed(entries):
        if type(e) is Transform:
            out = [f"{e}({out[0]})", *out[1:]] if out else [f"{e}()"]
        else:
            out.insert(0, e)
    return "/".join(out)


def op_path(entries, prim_name: str) -> str:
    """An operation's name-stack path: its scopes, then its primitive (which no transform
    wraps: ``jvp()/sin``)."""
    return f"{scope_path(entries)}/{prim_name}" if entries else prim_name


class SourceInfo(NamedTuple):
    name_stack: tuple      # enclosing named_scope / named_call / jit names, outermost first
    file: str | None
    line: int | None
    function: str | None
    # (name, value) pairs the equation's ops carry as ``mhlo.frontend_attributes``
    # (``set_xla_metadata``, ``compute_on``); usually empty.
    frontend_attributes: tuple = ()
    # (code object, instruction offset) of the user's frame: its column, read when asked
    # for (``column``), as staging every equation must stay cheap.
    position: tuple | None = None

    @property
    def column(self) -> int | None:
        """The 0-based column where the user's expression starts (as JAX reports it)."""
        if self.position is None:
            return None
        code, lasti = self.position
        starts = _column_starts.get(code)
        if starts is None:
            starts = _column_starts.put(code, [p[2] for p in code.co_positions()])
        i = lasti // 2
        return starts[i] if 0 <= i < len(starts) else None

    @property
    def traceback(self) -> "SourceInfo":
        """Where the equation came from, as JAX's ``source_info.traceback`` is passed on
        (``source_info_util.user_context(eqn.source_info.traceback)``): plax's SourceInfo
        is its own location, so itself."""
        return self

    def location(self) -> str:
        """``file:line:column (function)`` of the user code (``file:line (function)`` when
        the column is unknown), or '' when unknown."""
        if self.file is None:
            return ""
        column = self.column
        where = f"{self.file}:{self.line}" if column is None else \
            f"{self.file}:{self.line}:{column}"
        return f"{where} ({self.function})"

    def scope(self, prim_name: str) -> str:
        """The name-stack path of an equation, e.g. ``outer/inner/sin``."""
        return op_path(self.name_stack, prim_name)


class TracebackFrame(NamedTuple):
    """One frame of a ``Traceback``, as jaxlib's ``Traceback.Frame`` names its fields."""
    file_name: str
    function_name: str
    function_start_line: int
    line_num: int


def code_position(code, lasti: int) -> tuple:
    """``(line, column)`` of the instruction at offset ``lasti`` of ``code`` (column 0-based;
    either None when unknown)."""
    positions = list(code.co_positions())
    i = lasti // 2
    line, _, column, _ = positions[i] if 0 <= i < len(positions) else (None,) * 4
    return line, column


class Traceback:
    """A stack of user frames, innermost first, each a ``(code, instruction offset)``: where
    an equation came from (``traceback_of``) followed by where the equations enclosing it
    did (``+``). plax records one frame per equation, the user's call site."""
    __slots__ = ("_frames",)

    def __init__(self, frames=()):
        self._frames = tuple(frames)

    def raw_frames(self) -> tuple:
        """``(code objects, instruction offsets)``, innermost first."""
        return [c for c, _ in self._frames], [i for _, i in self._frames]

    @property
    def frames(self) -> list:
        """The frames as ``TracebackFrame``s, innermost first."""
        return [TracebackFrame(c.co_filename, c.co_qualname, c.co_firstlineno,
                               code_position(c, i)[0]) for c, i in self._frames]

    @staticmethod
    def code_addr2line(code, lasti: int):
        """The source line of the instruction at offset ``lasti`` of ``code``."""
        return code_position(code, lasti)[0]

    def __add__(self, other: "Traceback") -> "Traceback":
        if not isinstance(other, Traceback):
            return NotImplemented
        return Traceback(self._frames + other._frames)

    def __len__(self):
        return len(self._frames)

    def __getitem__(self, index: slice) -> "Traceback":
        if not isinstance(index, slice):
            raise TypeError("a Traceback is sliced into a Traceback; use raw_frames() or "
                            "frames for its frames")
        return Traceback(self._frames[index])

    def __eq__(self, other):
        return isinstance(other, Traceback) and self._frames == other._frames

    def __hash__(self):
        return hash(self._frames)

    def __str__(self):
        return "\n".join(f"{f.file_name}:{f.line_num} ({f.function_name})" for f in self.frames)

    def __repr__(self):
        return f"Traceback({len(self._frames)} frames)"


def traceback_of(info) -> "Traceback | None":
    """The ``Traceback`` of an equation's ``SourceInfo``: its user frame; None when it has
    none."""
    if info is None or info.position is None:
        return None
    return Traceback((info.position,))


# code object -> is it plax's own? (asked for every staged op)
_in_plax = BoundedCache("code objects inside plax", 1 << 16)
# code object -> the start column of each of its instructions (for SourceInfo.column)
_column_starts = BoundedCache("instruction columns of code objects", 1 << 10)
# Source paths whose frames are never the user's: plax's own, and those libraries built on
# plax exclude (``register_exclusion``: their wrappers are not where an op comes from).
excluded_paths: list = [_PLAX_DIR]
_excluded = [(_PLAX_DIR,)]  # the same, as the tuple str.startswith takes


def register_exclusion(path: str) -> None:
    """Treat frames of source files under ``path`` as library code, never as the user's
    call site, in source locations and warnings."""
    if path not in excluded_paths:
        excluded_paths.append(path)
    _excluded[0] = tuple(excluded_paths)
    _in_plax.clear()


def is_plax_code(code) -> bool:
    """Whether the code object ``code`` is plax's own source, or excluded as a library's
    (cached per code object)."""
    inside = _in_plax.get(code)
    if inside is None:
        inside = _in_plax.put(code, code.co_filename.startswith(_excluded[0]))
    return inside


def user_frame():
    """The innermost frame outside plax's own source (the user's call site)."""
    f = sys._getframe(1)
    known = _in_plax
    while f is not None:  # is_plax_code, inlined: this runs for every staged equation
        code = f.f_code
        inside = known.get(code)
        if inside is None:
            inside = known.put(code, code.co_filename.startswith(_excluded[0]))
        if not inside:
            return f
        f = f.f_back
    return None


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the caller point at user code."""
    f, level = sys._getframe(1), 1
    while f is not None and is_plax_code(f.f_code):
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
    while f is not None and is_plax_code(f.f_code):
        if f.f_code in traced_call_code:
            break
        if not f.f_code.co_filename.endswith("array_methods.py") and \
                f.f_code not in pass_through_code:
            entry = f.f_code.co_name
        f = f.f_back
    return (entry or "").lstrip("_") or "a plax function"


class _StagingLocation(threading.local):
    at = None
    frontend_attributes = ()


# ``staging_location.at``: an equation's SourceInfo whose location (file, line, function)
# the equations staged now record instead of the caller's line; None (the default) means
# the caller's line. The backward pass sets it to the equation it transposes, so that a
# transposed op points at the user line of the op it comes from (as in JAX). Set it and
# put the previous value back in a ``finally``: it is a plain attribute, as it changes
# for every equation transposed.
staging_location = _StagingLocation()


def current_source_info(name_stack: tuple) -> SourceInfo:
    at = staging_location.at
    attrs = staging_location.frontend_attributes
    if at is not None and at.file is not None:
        if at.name_stack:  # an equation staged again: its scopes, under the current ones
            name_stack = name_stack + at.name_stack if name_stack else at.name_stack
        if at.name_stack is name_stack and at.frontend_attributes is attrs:
            return at
        return SourceInfo(name_stack, at.file, at.line, at.function, attrs, at.position)
    f = user_frame()
    if f is None:
        return SourceInfo(name_stack, None, None, None, attrs)
    code = f.f_code
    return SourceInfo(name_stack, code.co_filename, f.f_lineno, code.co_name, attrs,
                      (code, f.f_lasti))


@contextlib.contextmanager
def staged_frontend_attributes(flag: str, value, attributes: dict, replace=()):
    """Inside, staged equations record ``attributes`` (name -> str; they replace those of
    the same name given by an enclosing block, and the names in ``replace`` are dropped
    first), which their ops carry as ``mhlo.frontend_attributes``; the config flag ``flag``
    holds ``value`` meanwhile, so jitted functions traced outside (where the flag differs)
    trace anew."""
    from plax.core.config import config
    prev = staging_location.frontend_attributes
    merged = {k: v for k, v in prev if k not in replace}
    merged.update(attributes)
    with config.override(flag, value):
        staging_location.frontend_attributes = tuple(sorted(merged.items()))
        try:
            yield
        finally:
            staging_location.frontend_attributes = prev


def fun_name(fun, qualified: bool = False) -> str:
    """The name of a user function for messages: its ``__name__`` (``__qualname__`` with
    ``qualified=True``), a ``functools.partial``'s function's, else its type's name."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    name = getattr(fun, "__qualname__", None) if qualified else None
    return name or getattr(fun, "__name__", None) or type(fun).__name__


def wraps(wrapped):
    """``functools.wraps(wrapped)`` that gives up, as JAX's transformations do, where
    ``wrapped``'s attributes cannot be copied (a callable object whose ``__name__`` is no
    string): the wrapper then keeps what it had copied so far."""
    def decorate(fun):
        try:
            return functools.update_wrapper(fun, wrapped)
        except (AttributeError, TypeError):
            return fun
    return decorate


def flat_arg_names(fun, args, kwargs, static=()) -> list[str]:
    """Readable names (``x``, ``params['w']``) of the leaves of the arguments of a call
    ``fun(*args, **kwargs)``, leaving out the positional arguments numbered in ``static``."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_pos = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    names = []
    for i, a in enumerate(args):
        if i in static:
            continue
        base = positional[i] if i < len(positional) else (
            f"{var_pos}[{i - len(positional)}]" if var_pos else f"args[{i}]")
        for path, _ in tree_flatten_with_path(a)[0]:
            names.append(base + keystr(path))
    for k in sorted(kwargs):
        for path, _ in tree_flatten_with_path(kwargs[k])[0]:
            names.append(k + keystr(path))
    return names
