"""``DebugInfo``: what a traced function is (its name and source line), what it was traced
for, and the names of its flattened arguments and results, as JAX 0.10.2 records them.

Libraries build one with ``plax.api_util.debug_info`` and hand it to
``plax.extend.linear_util.wrap_init``; tracing reads it back from the wrapped function.
"""
from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from plax.core.tree_core import tree_flatten_with_path
from plax.core.tree_keys import keystr


class InitialResultPaths:
    """Marks result paths not known yet: the function has not been traced."""

    def __repr__(self):
        return "initial_result_paths"


initial_result_paths = InitialResultPaths()

_FLAT_INDEX = re.compile(r"<flat index ([^>]+)>")
_SRC_INFO = re.compile(r"([^ ]+)( at (.+):(\d+))?$")


def path_str(path) -> str:
    """A key path as an argument/result name suffix: ``keystr`` with ``[<flat index 2>]``
    shortened to ``[2]``."""
    return _FLAT_INDEX.sub(r"\1", keystr(path))


class DebugInfo(NamedTuple):
    """Debugging facts about a traced function.

    ``func_src_info`` is ``"name at file:line"`` (or just the name, maybe ``<unknown>``);
    ``arg_names`` names each flattened non-static argument (``None``: unknown; ``""``: an
    argument with no user-given name); ``result_paths`` names each flattened result, or is
    ``None`` (unknown), ``initial_result_paths``, or a thunk computing them after tracing.
    """
    traced_for: str
    func_src_info: str
    arg_names: tuple[str, ...] | None
    result_paths: tuple[str, ...] | InitialResultPaths | Callable[[], tuple[str, ...]] | None

    @property
    def func_name(self) -> str:
        """The function's name: the first word of ``func_src_info``."""
        return self.func_src_info.split(" ")[0]

    @property
    def func_filename(self) -> str | None:
        m = _SRC_INFO.match(self.func_src_info)
        return m.group(3) if m else None

    @property
    def func_lineno(self) -> int | None:
        m = _SRC_INFO.match(self.func_src_info)
        return int(m.group(4)) if m and m.group(4) is not None else None

    def replace_func_name(self, name: str) -> DebugInfo:
        """This debug info with the function's name replaced (its location kept)."""
        rest = self.func_src_info.split(" ")[1:]
        return self._replace(func_src_info=" ".join([name, *rest]))

    def resolve_result_paths(self) -> DebugInfo:
        """This debug info with a result-path thunk replaced by the paths it computes."""
        if self.result_paths is initial_result_paths:
            raise ValueError("DebugInfo.resolve_result_paths: the result paths are still "
                             "initial_result_paths; trace the function first.")
        if callable(self.result_paths):
            return self._replace(result_paths=tuple(self.result_paths()))
        return self

    def set_result_paths(self, ans) -> DebugInfo:
        """This debug info with result paths ``result...`` read off the output pytree ``ans``."""
        leaves, _ = tree_flatten_with_path(ans)
        return self._replace(result_paths=tuple(f"result{path_str(p)}" for p, _ in leaves))

    def assert_arg_names(self, expected_count: int) -> None:
        if self.arg_names is not None and len(self.arg_names) != expected_count:
            raise ValueError(f"DebugInfo for {self.func_src_info} has {len(self.arg_names)} "
                             f"arg_names but {expected_count} arguments were expected: "
                             f"{self.arg_names}")

    def safe_arg_names(self, expected_count: int) -> tuple[str, ...]:
        """The argument names, checked to number ``expected_count`` (empty names if unknown)."""
        self.assert_arg_names(expected_count)
        return self.arg_names if self.arg_names is not None else ("",) * expected_count

    def filter_arg_names(self, keep: Sequence[bool]) -> tuple[str, ...] | None:
        """The argument names where ``keep`` is true (None if unknown)."""
        if self.arg_names is None:
            return None
        return tuple(n for n, k in zip(self.safe_arg_names(len(keep)), keep) if k)

    def _resolved_result_paths(self, what: str):
        paths = self.result_paths
        if paths is initial_result_paths or callable(paths):
            raise ValueError(f"DebugInfo.{what}: the result paths are not resolved yet; call "
                             "resolve_result_paths() after tracing.")
        return paths

    def assert_result_paths(self, expected_count: int) -> None:
        paths = self._resolved_result_paths("assert_result_paths")
        if paths is not None and len(paths) != expected_count:
            raise ValueError(f"DebugInfo for {self.func_src_info} has {len(paths)} "
                             f"result_paths but {expected_count} results were expected: {paths}")

    def safe_result_paths(self, expected_count: int) -> tuple[str, ...]:
        """The result paths, checked to number ``expected_count`` (empty paths if unknown)."""
        self.assert_result_paths(expected_count)
        return self.result_paths if self.result_paths is not None else ("",) * expected_count

    def filter_result_paths(self, keep: Sequence[bool]) -> tuple[str, ...] | None:
        """The result paths where ``keep`` is true (None if unknown)."""
        paths = self._resolved_result_paths("filter_result_paths")
        return None if paths is None else tuple(p for p, k in zip(paths, keep) if k)

    def with_unknown_names(self) -> DebugInfo:
        """This debug info with argument names and result paths unknown."""
        return self._replace(arg_names=None, result_paths=None)


# --- building one from a function and example arguments ---------------------------------

_BUILTIN_NAME = re.compile(r"<built-in function (\S+)>")


def fun_source_info(fun) -> str:
    """``"name at file:line"`` for a Python function (through partials and ``__wrapped__``),
    the name of a builtin, else ``"<unknown>"``."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    fun = inspect.unwrap(fun)
    code = getattr(fun, "__code__", None)
    name = getattr(fun, "__name__", None)
    if code is not None and name is not None:
        return f"{name} at {code.co_filename}:{code.co_firstlineno}"
    try:
        m = _BUILTIN_NAME.match(str(fun))
    except Exception:  # a user object whose __str__ fails: no name to show
        return "<unknown>"
    return m.group(1) if m else "<unknown>"


def fun_signature(fun) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (ValueError, TypeError):
        return None


def resolve_argnums_in_range(argnums, num_args: int, drop_too_large: bool) -> tuple[int, ...]:
    """``argnums`` with negative entries counted from the end; an entry outside
    ``[-num_args, num_args)`` raises ValueError (or, past the end with ``drop_too_large``,
    is left out)."""
    out = []
    for i in argnums:
        if i >= num_args and drop_too_large:
            continue
        if not -num_args <= i < num_args:
            raise ValueError(
                "Positional argument indices, e.g. for `static_argnums`, must have value greater "
                "than or equal to -len(args) and less than len(args), but got value "
                f"{i} for len(args) == {num_args}.")
        out.append(i % num_args)
    return tuple(out)


_STATIC = object()  # stands for a static argument while naming the others


def _named_arguments(signature, args, kwargs):
    """``[(name, value)]`` for the call, positional first then keywords by key, named as the
    signature names them; None when there is no signature or the call does not fit it."""
    if signature is None:
        return None
    try:
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    var_kw = next((n for n, p in signature.parameters.items() if p.kind is p.VAR_KEYWORD), None)
    positional = [(n, v) for n, v in bound.arguments.items() if n not in kwargs and n != var_kw]
    keyword = [(k if k in bound.arguments else f"{var_kw}['{k}']", v)
               for k, v in sorted(kwargs.items(), key=lambda kv: kv[0])]
    return positional + keyword


def non_static_arg_names(signature, args, kwargs, static_argnums=(),
                         static_argnames=()) -> tuple[str, ...]:
    """The names JAX gives the flattened non-static arguments of ``fun(*args, **kwargs)``:
    parameter names from ``signature`` (``x``, ``params['w']``, ``args[1]`` for ``*args``,
    ``kw['k']`` for ``**kw``), or ``args[i]``/``kwargs['k']`` when the call does not fit it."""
    static_nums = resolve_argnums_in_range(static_argnums, len(args), drop_too_large=True)
    static_names = set(static_argnames)
    args_ = [_STATIC if i in static_nums else x for i, x in enumerate(args)]
    kwargs_ = {k: _STATIC if k in static_names else x for k, x in kwargs.items()}
    named = _named_arguments(signature, args_, kwargs_)
    if named is None:
        named = [("args", args_)] + sorted(
            ((f"kwargs['{k}']", x) for k, x in kwargs_.items() if x is not _STATIC),
            key=lambda kv: kv[0])
    return tuple(name + path_str(path)
                 for name, value in named
                 for path, leaf in tree_flatten_with_path(value)[0] if leaf is not _STATIC)


def debug_info(traced_for: str, fun: Callable, args: Sequence[Any], kwargs: dict[str, Any], *,
               static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = (),
               result_paths_thunk=initial_result_paths, sourceinfo: str | None = None,
               signature: inspect.Signature | None = None) -> DebugInfo:
    """The DebugInfo of ``fun`` traced for ``traced_for`` (``"jit"``, ``"scan"``, ...), naming
    its arguments from the example call ``fun(*args, **kwargs)``, whose static arguments are
    those numbered in ``static_argnums`` or named in ``static_argnames``. A function carrying
    ``__fun_debug_info__`` (set by a wrapper) gets that one."""
    saved = getattr(fun, "__fun_debug_info__", None)
    if saved is not None:
        return saved
    if sourceinfo is None:
        sourceinfo = fun_source_info(fun)
    if signature is None:
        signature = fun_signature(fun)
    names = non_static_arg_names(signature, args, kwargs, static_argnums, static_argnames)
    return DebugInfo(traced_for, sourceinfo, names, result_paths_thunk)
