"""Calling Python from traced code: pure_callback, io_callback, debug.callback, debug.print.

Each flattens its arguments, binds one primitive of ``plax/higher_order/callbacks.py`` on the
array leaves, and hands the primitive a ``FlatCallback`` that rebuilds the user's
arguments from NumPy arrays and flattens what the user's function returns.
"""
from __future__ import annotations

import functools
import logging
import string
import sys
from typing import Any, Callable

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.effects import debug_effect, ordered_debug_effect
from plax.core.source_info import user_frame
from plax.core.trace import Tracer
from plax.higher_order.callbacks import (VMAP_METHODS, debug_callback_p, io_callback_p,
                                         pure_callback_p)
from plax.runtime.array import CONCRETE
from plax.core.tracebacks import api_boundary

__all__ = ["pure_callback", "io_callback", "debug_callback", "debug_print", "debug_log"]

_logger = logging.getLogger("plax.debug")


class FlatCallback:
    """The user's callback on flat arguments: dynamic leaves (arrays) come in as NumPy
    arrays, static leaves (strings, ...) were kept at trace time; returns flat leaves."""

    __slots__ = ("fn", "in_tree", "static", "returns")

    def __init__(self, fn, in_tree, static: tuple, returns: bool = True):
        self.fn, self.in_tree, self.static, self.returns = fn, in_tree, static, returns

    def __call__(self, *arrays):
        leaves, dynamic = [], iter(arrays)
        for is_static, value in self.static:
            leaves.append(value if is_static else next(dynamic))
        args, kwargs = tree_util.tree_unflatten(self.in_tree, leaves)
        out = self.fn(*args, **kwargs)
        return tree_util.tree_leaves(out) if self.returns else ()

    def __repr__(self):
        return f"FlatCallback(callback_func={self.fn!r})"


def _is_dynamic(leaf) -> bool:
    # Concrete plax arrays are staged too, so the callback sees them as the host values
    # its traced arguments become (not weakly typed), as JAX's callbacks do.
    return isinstance(leaf, (Tracer, *CONCRETE, np.ndarray, np.generic, int, float, complex,
                             bool)) or hasattr(leaf, "__jax_array__")


def _split(fn, args, kwargs, returns: bool = True):
    """(FlatCallback, the dynamic leaves to bind)."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    static = tuple((not _is_dynamic(x), None if _is_dynamic(x) else x) for x in leaves)
    dynamic = [x for x in leaves if _is_dynamic(x)]
    return FlatCallback(fn, in_tree, static, returns), dynamic


def _result_avals(result_shape_dtypes, what: str):
    leaves, tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{what}: result_shape_dtypes must be a pytree of objects with "
                            f"shape and dtype (plax.ShapeDtypeStruct, arrays), got {leaf!r}.")
        if not dtypes.x64_enabled() and not dtypes.is_extended(leaf.dtype) and \
                np.dtype(leaf.dtype) in _WIDE:
            raise ValueError(f"{what}: result_shape_dtypes cannot specify 64-bit types when "
                             f"`jax_enable_x64` is disabled (got {np.dtype(leaf.dtype).name}); "
                             "declare the 32-bit type the callback's results will have.")
        avals.append(ShapedArray(tuple(leaf.shape), dtypes.canonicalize_dtype(leaf.dtype)))
    return tuple(avals), tree


_WIDE = frozenset(map(np.dtype, (np.int64, np.uint64, np.float64, np.complex128)))


def _check_sharding(sharding, what: str):
    if sharding is None:
        return None
    if len(getattr(sharding, "device_set", ())) != 1:
        raise NotImplementedError(f"{what}: only a single-device sharding (the device that "
                                  f"runs the callback) is supported, got {sharding!r}.")
    return sharding


@api_boundary
def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding=None, vmap_method: str | None = None, **kwargs: Any):
    """Call the pure Python function ``callback(*args, **kwargs)`` from traced code.

    ``callback`` receives NumPy arrays and must return arrays of the shapes and dtypes of
    ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct``). Being pure, a call may be
    dropped when its results are unused. Under vmap, ``vmap_method`` says how a batch
    reaches it: 'sequential' (a call per member, in a loop), 'sequential_unrolled',
    'expand_dims' (one call; unbatched arguments get a leading 1), 'broadcast_all' (one
    call; every argument batched). Differentiate it with ``custom_jvp``/``custom_vjp``.
    """
    if vmap_method not in (*VMAP_METHODS, None):
        raise ValueError(f"vmap_method must be on of the allowed methods "
                         f"{[*VMAP_METHODS, None]}, but got: {vmap_method}")
    result_avals, out_tree = _result_avals(result_shape_dtypes, "pure_callback")
    flat, dynamic = _split(callback, args, kwargs)
    outs = pure_callback_p.bind(*dynamic, callback=flat, result_avals=result_avals,
                                sharding=_check_sharding(sharding, "pure_callback"),
                                vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, list(outs))


@api_boundary
def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                sharding=None, ordered: bool = False, **kwargs: Any):
    """Call the Python function ``callback(*args, **kwargs)``, which may have side
    effects, from traced code; it is never dropped. ``ordered=True``: calls run in program
    order (also across calls of a jitted function); such calls cannot be vmapped."""
    result_avals, out_tree = _result_avals(result_shape_dtypes, "io_callback")
    flat, dynamic = _split(callback, args, kwargs)
    outs = io_callback_p.bind(*dynamic, callback=flat, result_avals=result_avals,
                              sharding=_check_sharding(sharding, "io_callback"),
                              ordered=bool(ordered))
    return tree_util.tree_unflatten(out_tree, list(outs))


def debug_callback(callback: Callable[..., None] | None = None, *args: Any,
                   ordered: bool = False, partitioned: bool = False, **kwargs: Any):
    """Call ``callback(*args, **kwargs)`` (NumPy values) for its side effect, from traced
    code: once per batch member under vmap, per iteration in loops, per device inside
    shard_map. ``ordered=True``: in program order. ``debug_callback(ordered=True)``
    without a callback returns the function taking it (the two-call form)."""
    if callback is None:
        if args or kwargs:
            raise TypeError(f"debug_callback received unexpected arguments in the two-call "
                            f"form: args={args} kwargs={kwargs}; pass them in the second call.")
        return lambda fn, *a, **k: debug_callback(fn, *a, ordered=ordered,
                                                  partitioned=partitioned, **k)
    if not callable(callback):
        raise TypeError(f"debug_callback expects a callable, got {callback!r}.")
    flat, dynamic = _split(callback, args, kwargs, returns=False)
    debug_callback_p.bind(*dynamic, callback=flat,
                          effect=ordered_debug_effect if ordered else debug_effect,
                          partitioned=bool(partitioned))
    return None


class _FormatChecker(string.Formatter):
    """Checks a format string against its arguments at trace time, formatting nothing."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused}")
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused_kw:
            raise ValueError(
                f"Unused keyword arguments to `jax.debug.print`: {unused_kw}. An f-string "
                "(f\"{x}\") is formatted before plax sees it: pass a plain string and the "
                "values as arguments instead.")


def _printer(fmt: str, printoptions: dict, placeholders: bool, record=None):
    def print_now(*args, **kwargs):
        # Values print as plax Arrays, so that reprs (of pytrees) read as JAX's do.
        args, kwargs = tree_util.tree_map(_as_array, (args, kwargs))
        with np.printoptions(**printoptions):
            if placeholders:
                text = fmt.format(*args, **kwargs)
            else:
                text = " ".join((fmt, *(str(a) for a in args)))
        if record is None:
            sys.stdout.write(text + "\n")
        else:  # debug.log: a record made at trace time (the user's line), sent now
            made = logging.makeLogRecord(dict(record.__dict__, msg=text, args=()))
            _logger.handle(made)
    # (what a TPU kernel's lowering reads to print with Mosaic's own log ops)
    print_now.debug_format = (fmt, placeholders)
    return print_now


def _as_array(leaf):
    if isinstance(leaf, np.ndarray):
        from plax.runtime.dispatch import array_from_host
        return array_from_host(leaf)
    return leaf


def debug_print(fmt: str | None = None, *args, ordered: bool = False,
                partitioned: bool = False, skip_format_check: bool = False,
                _use_logging: bool = False, **kwargs):
    """Print ``fmt.format(*args, **kwargs)`` with the runtime values of traced arrays
    (pytrees allowed), from traced code: under jit at run time, once per batch member
    under vmap, per iteration in loops, per device inside shard_map. ``ordered=True``:
    prints in program order. ``debug.print(ordered=True)`` returns the printing function
    (the two-call form)."""
    if fmt is None:
        if args or kwargs:
            raise TypeError(f"debug.print received unexpected arguments in the two-call "
                            f"form: args={args} kwargs={kwargs}; pass them in the second call.")
        return lambda f, *a, **k: debug_print(f, *a, ordered=ordered, partitioned=partitioned,
                                              skip_format_check=skip_format_check,
                                              _use_logging=_use_logging, **k)
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print's first argument is the format string, got {fmt!r}.")
    if not skip_format_check:
        _FormatChecker().format(fmt, *args, **kwargs)
    placeholders = any(field is not None for _, field, _, _ in string.Formatter().parse(fmt))
    if not placeholders and kwargs:
        raise ValueError(f"debug.print: the format string {fmt!r} has no placeholders for "
                         f"the keyword arguments {sorted(kwargs)}.")
    printer = _printer(fmt, dict(np.get_printoptions()), placeholders,
                       _log_record() if _use_logging else None)
    return debug_callback(printer, *args, ordered=ordered, partitioned=partitioned, **kwargs)


def _log_record():
    """An INFO record naming the user's line that called debug.log (filled in at run time)."""
    frame = user_frame()
    file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else \
        ("(unknown file)", 0)
    return _logger.makeRecord(_logger.name, logging.INFO, file, line, "", (), None)


debug_log = functools.partial(debug_print, _use_logging=True)
debug_log.__doc__ = ("Like debug.print, but the text goes to the ``plax.debug`` logger at "
                     "INFO level, as a record naming the line that called it.")
