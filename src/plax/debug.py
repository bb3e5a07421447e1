"""plax.debug: printing from traced code, debug callbacks; seeing how arrays are laid out,
and where communication comes from.

``print(fmt, *args)`` and ``callback(fn, *args)`` run at run time under jit, vmap, grad,
loops and shard_map (see ``plax/api/callbacks.py``); so does ``breakpoint()``, a pdb-style
prompt showing the traced function's values (``plax/api/debugger.py``).

``visualize_array_sharding(x)`` draws which device holds which block of a 1-D or 2-D
array. ``explain_sharding(f, *args)`` prints the collectives XLA's partitioner put
into ``jit(f)`` for these arguments, with the mesh axes (the user's names) whose devices
communicate and the plax source line each comes from
(``jit(f).lower(...).compile().collectives()`` gives them as a list).

``show_jaxpr(f, *args, path=None)`` (beyond JAX) draws the jaxpr of ``f(*args)`` as a
Graphviz graph: its DOT text, and an SVG/PNG picture when Graphviz's ``dot`` is installed.
"""
from __future__ import annotations

import builtins

from plax.api.jit import jit
from plax.api.callbacks import debug_callback, debug_log, debug_print
from plax.api.debugger import breakpoint  # noqa: F401
from plax.api.show_jaxpr import show_jaxpr
from plax.core.effects import DebugEffect, OrderedDebugEffect  # noqa: F401
from plax.first_order.sharding_constraint import inspect_array_sharding
from plax.runtime.collectives import Collective, collectives_of  # noqa: F401

__all__ = ["breakpoint", "print", "callback", "log", "DebugEffect", "OrderedDebugEffect", "visualize_array_sharding", "visualize_sharding", "explain_sharding",
           "inspect_array_sharding", "Collective", "collectives_of", "show_jaxpr"]


# --- explaining where communication comes from -------------------------------------------------
def _groups_text(c: Collective) -> str:
    """A collective's device groups as the table shows them: the mesh axes they span (the
    user's names), then the groups written out (XLA's mesh form names its own axes)."""
    if c.groups is None:
        return c.replica_groups
    listed = "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in c.groups) + "}"
    return listed if c.axes is None else f"over {','.join(map(repr, c.axes))}: {listed}"


def _result_text(c: Collective) -> str:
    if c.shape and isinstance(c.shape[0], tuple):
        return "(" + ", ".join(f"[{','.join(map(str, s))}]" for s in c.shape) + f") {c.dtype}"
    return f"{c.dtype}[{','.join(map(str, c.shape))}]"


def explain_sharding(f, *args, **kwargs) -> list:
    """Print (and return) the collectives of ``jit(f)`` on these arguments: which
    communication XLA's partitioner inserted, how much each moves, and why (the source line)."""
    wrapped = f if hasattr(f, "lower") else jit(f)
    found = wrapped.lower(*args, **kwargs).compile().collectives()
    rows = [(c.kind, _result_text(c), f"{c.bytes:,}", _groups_text(c), c.source)
            for c in found]
    header = ("collective", "result", "bytes/device", "replica groups", "source")
    if not rows:
        _echo("No collectives: every device computes its part without communicating.")
        return found
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    _echo(line)
    _echo("-" * len(line))
    for r in rows:
        _echo("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
    return found


# --- drawing a layout ---------------------------------------------------------------------------
def _bounds(index, shape):
    return tuple((s.start or 0, shape[d] if s.stop is None else s.stop)
                 for d, s in enumerate(index))


def visualize_sharding(shape, sharding, *, use_color: bool = True, max_width: int = 80):
    """Draw which devices hold which block of an array of ``shape`` laid out by
    ``sharding`` (1-D or 2-D)."""
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError(f"visualize_sharding draws 1-D and 2-D arrays only, got shape {shape}.")
    blocks = {}
    for dev, index in sharding.devices_indices_map(shape).items():
        b = _bounds(index, shape)
        b = b if len(shape) == 2 else ((0, 1),) + b
        blocks.setdefault(b, []).append(dev)
    rows = sorted({b[0] for b in blocks})
    cols = sorted({b[1] for b in blocks})
    labels = {b: _label(devs) for b, devs in blocks.items()}
    cell = max(max(len(v) for v in labels.values()) + 2,
               min(12, max_width // max(len(cols), 1)))
    palette = ["red", "green", "blue", "magenta", "cyan", "yellow", "bright_black", "white"]
    text_rows = []
    for r in rows:
        text_rows.append("".join("+" + "-" * cell for _ in cols) + "+")
        text_rows.append("".join("|" + labels[(r, c)].center(cell) for c in cols) + "|")
    text_rows.append("".join("+" + "-" * cell for _ in cols) + "+")
    try:
        import rich.console
        import rich.text
    except ImportError:
        _echo("\n".join(text_rows))
        return
    console = rich.console.Console(no_color=not use_color)
    styled = rich.text.Text()
    for line_no, line in enumerate(text_rows):
        if line_no % 2 == 1:
            r = rows[line_no // 2]
            parts = line.split("|")[1:-1]
            for c, part in zip(cols, parts):
                styled.append("|")
                colour = palette[hash(labels[(r, c)]) % len(palette)]
                styled.append(part, style=colour)
            styled.append("|\n")
        else:
            styled.append(line + "\n")
    console.print(styled, end="")


def _label(devices) -> str:
    kind = devices[0].platform.upper()
    return f"{kind} {','.join(str(d.id) for d in sorted(devices, key=lambda d: d.id))}"


def visualize_array_sharding(x, **kwargs):
    """Draw which devices hold which block of the array ``x`` (1-D or 2-D)."""
    visualize_sharding(x.shape, x.sharding, **kwargs)


_echo = builtins.print
callback = debug_callback
log = debug_log
print = debug_print  # noqa: A001  (jax.debug.print; this module uses _echo for its own output)
