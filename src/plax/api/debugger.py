"""debug.breakpoint: a pdb-style prompt inside traced code (JAX's ``jdb``).

``breakpoint()`` records the Python frames around the call when the function is traced:
each frame's file, line, source, globals and locals. Locals that are arrays (traced values
included) become the operands of a debug callback; the rest stay as they were. When the
program runs, the callback rebuilds the frames with the arrays' values and opens the prompt
on the innermost one, so under jit, vmap (once per batch member), grad and loops the user
inspects what the traced values actually are.

Commands: ``p expr`` / ``pp expr`` (print / pretty-print an expression evaluated in the
frame), any other line is evaluated and printed, ``u``/``up`` and ``d``/``down`` move
between frames, ``l``/``list`` shows the source around the line, ``w``/``where``/``bt`` the
frames, ``c``/``cont``/``continue`` resumes the program, ``q``/``quit``/``exit`` (or end of
input) leaves the process.
"""
from __future__ import annotations

import cmd
import inspect
import os
import pprint
import sys
import threading
import traceback

from plax import tree_util
from plax.api.callbacks import debug_callback, pure_callback
from plax.core.trace import Tracer
from plax.runtime.array import ARRAY_TYPES

_PLAX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_prompt_lock = threading.Lock()  # one prompt at a time (callbacks may run on other threads)


class DebuggerFrame:
    """One Python frame as the debugger shows it: where it is, its source, its variables."""

    def __init__(self, filename, function, lineno, source, offset, globals_, locals_):
        self.filename, self.function, self.lineno = filename, function, lineno
        self.source, self.offset = source, offset  # the function's lines; the current one
        self.globals, self.locals = globals_, locals_

    @classmethod
    def of(cls, info: inspect.FrameInfo) -> "DebuggerFrame":
        try:
            lines, first = inspect.getsourcelines(info.frame)
            source = [line.rstrip("\n") for line in lines]
            offset = max(0, info.lineno - max(first, 1))
        except (OSError, TypeError):
            source, offset = [], None
        return cls(info.filename, info.function, info.lineno, source, offset,
                   info.frame.f_globals, dict(info.frame.f_locals))


def _is_array(value) -> bool:
    return isinstance(value, (Tracer, *ARRAY_TYPES))


def _split_locals(frames):
    """The array locals of every frame (the callback's operands) and a function putting
    their values back."""
    slots, values = [], []
    for i, frame in enumerate(frames):
        for name, value in frame.locals.items():
            if _is_array(value):
                slots.append((i, name))
                values.append(value)

    def rebuild(arrays):
        out = [DebuggerFrame(f.filename, f.function, f.lineno, f.source, f.offset, f.globals,
                             dict(f.locals)) for f in frames]
        for (i, name), value in zip(slots, arrays):
            out[i].locals[name] = value
        return out
    return values, rebuild


def breakpoint(*, backend=None, filter_frames: bool = True, num_frames: int | None = None,
               ordered: bool = False, token=None, **kwargs):
    """Stop at this point of the program, when it runs, with a pdb-style prompt ``(jdb)``
    showing the values of the traced function's variables (see the module docstring for the
    commands). Works eagerly and under jit, vmap (one prompt per batch member), grad and
    loops. ``filter_frames``: hide plax's own frames; ``num_frames``: how many frames from
    the breakpoint outwards to keep; ``ordered``: in program order with other ordered
    callbacks; ``token``: run once ``token`` (a pytree of arrays) is computed, and return it
    (pass it on, or the breakpoint may be pruned). ``backend``: plax has the command-line
    debugger only (any name falls back to it, as JAX falls back to its highest-priority one).
    Other keyword arguments go to the debugger (``stdin=``, ``stdout=``: file objects)."""
    if token is not None and ordered:
        raise ValueError("`ordered` and `token` are mutually exclusive arguments.")
    infos = inspect.stack()[1:]
    if filter_frames:  # (plax's own frames, and Python's frozen ones: runpy, importlib)
        infos = [i for i in infos if not i.filename.startswith("<frozen")
                 and not os.path.abspath(i.filename).startswith(_PLAX_DIR)]
    frames = [DebuggerFrame.of(i) for i in infos]
    del infos  # (frame objects: do not keep them alive)
    if num_frames is not None:
        frames = frames[:num_frames]
    arrays, rebuild = _split_locals(frames)

    def open_prompt(*values):
        thread = None if threading.current_thread() is threading.main_thread() \
            else threading.get_ident()
        with _prompt_lock:
            run_cli(rebuild(_as_arrays(values)), thread, **kwargs)

    if token is None:
        debug_callback(open_prompt, *arrays, ordered=ordered)
        return None

    def pass_token(tok, *values):
        open_prompt(*values)
        return tok
    shapes = tree_util.tree_map(_result_shape, token)
    return pure_callback(pass_token, shapes, token, *arrays)


def _result_shape(x):
    from plax.core.shape_dtype_struct import ShapeDtypeStruct
    from plax.core.trace import get_aval
    aval = get_aval(x)
    return ShapeDtypeStruct(aval.shape, aval.dtype)


def _as_arrays(values):
    """The callback's NumPy values as plax Arrays again (what the user's code held)."""
    from plax.api.devices import device_put
    return [device_put(v) for v in values]


class CliDebugger(cmd.Cmd):
    """The ``(jdb)`` prompt over a list of frames (innermost first)."""

    prompt = "(jdb) "

    def __init__(self, frames, thread_id=None, stdin=None, stdout=None, completekey="tab"):
        super().__init__(stdin=stdin, stdout=stdout, completekey=completekey)
        self.use_rawinput = stdin is None
        self.frames, self.frame_index = frames, 0
        self.intro = "Entering jdb:" + ("" if thread_id is None else f" (thread {thread_id})")

    def _frame(self) -> DebuggerFrame:
        return self.frames[self.frame_index]

    def _say(self, text: str) -> None:
        print(text, file=self.stdout)

    def _evaluate(self, expr: str):
        frame = self._frame()
        return eval(expr, dict(frame.globals), dict(frame.locals))

    def _error(self) -> None:
        kind, value = sys.exc_info()[:2]
        self._say("*** " + traceback.format_exception_only(kind, value)[-1].strip())

    def default(self, line):
        """Evaluate an expression and print its repr."""
        self.do_p(line)

    def emptyline(self):  # (pdb repeats the last command; jdb does nothing)
        return False

    def do_p(self, arg):
        """p expression: evaluate it in the current frame and print its repr."""
        try:
            self._say(repr(self._evaluate(arg)))
        except Exception:
            self._error()

    def do_pp(self, arg):
        """pp expression: evaluate it in the current frame and pretty-print it."""
        try:
            self._say(pprint.pformat(self._evaluate(arg)))
        except Exception:
            self._error()

    def do_up(self, _arg):
        """u(p): move to the frame that called this one."""
        if self.frame_index == len(self.frames) - 1:
            self._say("At topmost frame.")
        else:
            self.frame_index += 1
        self._show_context()
    do_u = do_up

    def do_down(self, _arg):
        """d(own): move to the frame this one called."""
        if self.frame_index == 0:
            self._say("At bottommost frame.")
        else:
            self.frame_index -= 1
        self._show_context()
    do_d = do_down

    def do_list(self, _arg):
        """l(ist): the source around the current line."""
        self._show_context(num_lines=5)
    do_l = do_list

    def do_where(self, _arg):
        """w(here) / bt: the frames, outermost first."""
        lines = ["Traceback:"]
        for frame in reversed(self.frames):
            lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.function}')
            if frame.offset is not None and frame.offset < len(frame.source):
                lines.append("    " + frame.source[frame.offset].strip())
        self._say("\n".join(lines))
    do_w = do_bt = do_where

    def do_continue(self, _arg):
        """c(ont(inue)): leave the prompt and let the program run on."""
        return True
    do_c = do_cont = do_continue

    def do_quit(self, _arg):
        """q(uit) / exit: end the process."""
        sys.exit(0)
    do_q = do_exit = do_EOF = do_quit

    def _show_context(self, num_lines: int = 2) -> None:
        frame = self._frame()
        lines = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:
            for i, text in enumerate(frame.source):
                if frame.offset - num_lines <= i <= frame.offset + num_lines:
                    lines.append(("->  " if i == frame.offset else "    ") + text)
        self._say("\n".join(lines))


def run_cli(frames, thread_id=None, **kwargs) -> None:
    """Open the ``(jdb)`` prompt on ``frames`` until the user continues."""
    CliDebugger(frames, thread_id, **kwargs).cmdloop()
