"""The jaxpr IR: variables, literals, equations, jaxprs; printing, checking, evaluation."""
from __future__ import annotations

import contextlib
import itertools
import re

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, weak_host_value
from plax.core.caches import WeakKeyCache
from plax.core.effects import eqn_effects, jaxpr_effects
from plax.core.primitive import abstract_eval
from plax.core.rules import body_context_rules, param_printers, pp_eqn_rules
from plax.core.source_info import scope_path, staging_location


class Var:
    """A variable of a jaxpr; printed with a name chosen when the jaxpr is printed."""

    __slots__ = ("aval", "count")
    _counter = itertools.count()

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.count = next(Var._counter)

    def __repr__(self):
        return f"Var({self.count}:{self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in a jaxpr (``2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val})"

    def value(self):
        """The value to bind in its place: weakly typed literals come back as Python
        scalars, so that evaluating a jaxpr again keeps them weak; a weak literal of a
        narrower dtype (an int8 scalar from ``int8_array + 1``) keeps its dtype as a weak
        host value."""
        if self.aval.weak_type and isinstance(self.val, (np.generic, np.ndarray)):
            scalar = np.asarray(self.val).item()
            if dtypes.canonicalize_dtype(dtypes.python_scalar_dtypes[type(scalar)]) \
                    == self.aval.dtype:
                return scalar
            return weak_host_value(self.val, self.aval.dtype)
        return self.val

    def pretty(self) -> str:
        v = self.val.item() if hasattr(self.val, "item") else self.val
        return f"{v}:{self.aval.str_short()}"


class JaxprEqn:
    """``outvars = primitive[params] invars``, with where it came from (``source_info``)."""

    __slots__ = ("invars", "outvars", "primitive", "params", "source_info")

    def __init__(self, invars, outvars, primitive, params, source_info=None):
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.primitive = primitive
        self.params = dict(params)
        self.source_info = source_info

    def replace(self, **kw) -> "JaxprEqn":
        d = dict(invars=self.invars, outvars=self.outvars, primitive=self.primitive,
                 params=self.params, source_info=self.source_info)
        d.update(kw)
        return JaxprEqn(**d)

    @property
    def effects(self) -> frozenset:
        """This equation's effects (see ``plax.core.effects``)."""
        return eqn_effects(self)

    def __repr__(self):
        return _Printer().eqn(self, 0)


class Jaxpr:
    """A typed, first-order program: ``{ lambda constvars ; invars. let eqns in outvars }``."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "__weakref__")

    def __init__(self, constvars, invars, outvars, eqns):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])
    effects = property(lambda self: jaxpr_effects(self), doc="The effects of its equations.")

    def __str__(self):
        return _Printer().top(self)

    __repr__ = __str__

    def pretty_print(self, **options) -> str:
        """This jaxpr as text; options as in JAX (see ``pretty_print_jaxpr``)."""
        return pretty_print_jaxpr(self, **options)


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts", "__weakref__")

    def __init__(self, jaxpr: Jaxpr, consts):
        if len(consts) != len(jaxpr.constvars):
            raise ValueError(f"ClosedJaxpr needs {len(jaxpr.constvars)} consts, got {len(consts)}")
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)
    effects = property(lambda self: jaxpr_effects(self.jaxpr))
    # The inner jaxpr's variables, as JAX's ClosedJaxpr shows them.
    constvars = property(lambda self: self.jaxpr.constvars)
    invars = property(lambda self: self.jaxpr.invars)
    outvars = property(lambda self: self.jaxpr.outvars)
    literals = property(lambda self: self.consts)

    def __str__(self):
        return str(self.jaxpr)

    __repr__ = __str__

    def pretty_print(self, **options) -> str:
        """This jaxpr as text; options as in JAX (see ``pretty_print_jaxpr``)."""
        return pretty_print_jaxpr(self.jaxpr, **options)


def subjaxprs(params):
    """The jaxprs (``Jaxpr`` or ``ClosedJaxpr``) held in an equation's params, in order,
    seeing through tuples and lists (``branches=(j1, j2)``)."""
    for value in params.values():
        if isinstance(value, (Jaxpr, ClosedJaxpr)):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, (Jaxpr, ClosedJaxpr)):
                    yield item


def open_jaxpr(j) -> "Jaxpr":
    """The ``Jaxpr`` of a ``Jaxpr`` or ``ClosedJaxpr``."""
    return j.jaxpr if isinstance(j, ClosedJaxpr) else j


def as_mask(value, n: int, what: str) -> tuple:
    """``value`` (a bool, or one bool per item) as a tuple of ``n`` bools."""
    if isinstance(value, bool):
        return (value,) * n
    mask = tuple(bool(v) for v in value)
    if len(mask) != n:
        raise ValueError(f"{what} has {len(mask)} entries for {n} items")
    return mask


def consts_as_inputs(closed: "ClosedJaxpr"):
    """``(callee, consts)``: a ClosedJaxpr without constants that takes ``consts`` as its
    leading inputs. Higher-order primitives keep bodies in this form and pass the
    constants (which may be tracers of an enclosing trace) as operands."""
    if not closed.jaxpr.constvars:
        return closed, []
    return callee_of(closed.jaxpr), list(closed.consts)


def callee_of(j: "Jaxpr") -> "ClosedJaxpr":
    """A ClosedJaxpr without constants taking ``j``'s constvars as its leading inputs. The
    same body gives the same callee (whatever ClosedJaxpr wraps it, even a new one per
    call), so that executables compiled for it are reused."""
    callee = _callees.get(j, None)
    if callee is None:
        callee = ClosedJaxpr(Jaxpr([], list(j.constvars) + list(j.invars), j.outvars, j.eqns), [])
        _callees.put(j, None, callee)
    return callee


_callees = WeakKeyCache("consts_as_inputs")


def call_out_avals(what: str, closed: "ClosedJaxpr", avals) -> list:
    """The output types of a call of ``closed`` on arguments of types ``avals``; a TypeError
    when they are not the types it was traced for (for pjit and the custom-rule calls)."""
    expected = closed.in_avals
    if len(avals) != len(expected) or any(
            a.shape != e.shape or a.dtype != e.dtype for a, e in zip(avals, expected)):
        got = ", ".join(a.str_short() for a in avals)
        want = ", ".join(a.str_short() for a in expected)
        raise TypeError(f"{what} was traced for arguments ({want}) but called with ({got}).")
    return closed.out_avals


# --- printing -----------------------------------------------------------------

def _letters(n: int) -> str:
    """0 -> a, 25 -> z, 26 -> ba: base 26 with the digits a..z."""
    s = chr(ord("a") + n % 26)
    while n >= 26:
        n //= 26
        s = chr(ord("a") + n % 26) + s
    return s


_KEYWORD, _KEYWORD_END = "\x1b[34;1m", "\x1b[39;22m"  # JAX's colours: keywords bold blue,
_TYPE, _TYPE_END = "\x1b[35m", "\x1b[39m"                # binder types magenta
# Printed text carries zero-width pieces: colour escapes, and ``\x00<n>\x01`` marks where
# equation n starts (its annotations go at the end of that line). (Patterns, compiled by re on
# first use, i.e. when a jaxpr is first printed, not at import.)
_ZERO_WIDTH = "\x1b\\[[0-9;]*m|\x00[0-9]+\x01"
_MARK = "\x00([0-9]+)\x01"


def _width(text: str) -> int:
    return len(re.sub(_ZERO_WIDTH, "", text))


class _Printer:
    """Jaxprs as JAX prints them. A jaxpr, an equation's ``[params]`` and a tuple of jaxprs
    each print on one line when that line fits in ``width`` columns from where it starts,
    otherwise broken over lines (their parts deciding again for themselves)."""

    def __init__(self, *, print_shapes=True, source_info=False, name_stack=False,
                 custom_pp_eqn_rules=True, print_effects=False, use_color=False, width=80):
        self.names: dict = {}
        self.used = None
        self.print_shapes, self.source_info, self.name_stack = print_shapes, source_info, name_stack
        self.custom_rules, self.print_effects = custom_pp_eqn_rules, print_effects
        self.color, self.width = use_color, width
        self.notes: list = []  # per marked equation, its annotations

    def keyword(self, text: str) -> str:
        return f"{_KEYWORD}{text}{_KEYWORD_END}" if self.color else text

    def name(self, v) -> str:
        if isinstance(v, Literal):
            return v.pretty()
        n = self.names.get(v)
        if n is None:
            n = self.names[v] = _letters(len(self.names))
        return n

    def out_binder(self, v) -> str:
        if self.used is not None and v not in self.used:
            return "_" + self.type_of(v)
        return self.binder(v)

    def binder(self, v) -> str:
        return self.name(v) + self.type_of(v)

    def type_of(self, v) -> str:
        if not self.print_shapes:
            return ""
        text = ":" + v.aval.str_short()
        return f"{_TYPE}{text}{_TYPE_END}" if self.color else text

    def jaxpr(self, jaxpr: Jaxpr, indent: int, column: int = 0, flat: bool = False) -> str:
        saved = self.names, self.used
        self.names = {}
        self.used = {v for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
        self.used.update(v for v in jaxpr.outvars if isinstance(v, Var))
        head = ("{ " + self.keyword("lambda ") + " ".join(self.binder(v) for v in jaxpr.constvars)
                + "; " + " ".join(self.binder(v) for v in jaxpr.invars) + ". ")
        let = f"{_KEYWORD}let" if self.color else "let"
        end = _KEYWORD_END if self.color else ""
        body = "; ".join(self.eqn(e, 0, flat=True) for e in jaxpr.eqns)  # names, in order
        outs = ", ".join(self.name(v) for v in jaxpr.outvars)
        tail = (self.keyword("in ") + f"({outs}{',' if len(jaxpr.outvars) == 1 else ''})"
                + (f" : {self.effects(jaxpr)}" if self.print_effects else "") + " }")
        one_line = f"{head}{let}{end} {body} {tail}"
        if flat or column + _width(one_line) <= self.width:
            text = one_line
        else:  # the colour of ``let`` ends where the first line after it starts, as in JAX
            pad = " " * (indent + 4)
            lines = [pad + self.eqn(e, indent + 4) for e in jaxpr.eqns]
            lines.append(" " * (indent + 2) + tail)
            lines[0] = lines[0][:indent + 4 if jaxpr.eqns else indent + 2] + end + \
                lines[0][indent + 4 if jaxpr.eqns else indent + 2:]
            text = "\n".join([head + let, *lines])
        self.names, self.used = saved
        return text

    def effects(self, jaxpr: Jaxpr) -> str:
        return "{ " + ", ".join(sorted(str(e) for e in jaxpr_effects(jaxpr))) + " }"

    def param(self, value, indent: int, column: int, flat: bool) -> str:
        if isinstance(value, ClosedJaxpr):
            value = value.jaxpr
        if isinstance(value, Jaxpr):
            return self.jaxpr(value, indent, column, flat)
        if isinstance(value, np.dtype):
            return value.name
        if isinstance(value, type) and issubclass(value, np.generic):
            return np.dtype(value).name
        if isinstance(value, (tuple, list)) and _holds_jaxprs({"": value}):
            one_line = "(" + " ".join(self.param(x, 0, 0, True) for x in value) + ")"
            if flat or column + _width(one_line) <= self.width:
                return one_line
            return "(\n" + "\n".join(" " * (indent + 2) + self.param(x, indent + 2, indent + 2,
                                                                       False)
                                      for x in value) + "\n" + " " * indent + ")"
        return str(value)

    def eqn(self, e: JaxprEqn, indent: int, flat: bool = False) -> str:
        """The equation's text starting at column ``indent`` (without the indentation)."""
        own = pp_eqn_rules.get(e.primitive) if self.custom_rules else None
        if own is not None:
            return self.mark(e) + own(e, self)
        lhs = " ".join(self.out_binder(v) for v in e.outvars)
        args = " ".join(self.name(v) for v in e.invars)
        shown = param_printers.get(e.primitive) if self.custom_rules else None
        # A primitive's printer also fixes the order (pjit shows name first, as JAX does).
        params = list(shown(e.params).items()) if shown else sorted(e.params.items())
        rhs = e.primitive.name
        if params:
            rhs = rhs + "[" + " ".join(f"{k}={self.param(v, 0, 0, True)}" for k, v in params) + "]"
            start = indent + (_width(lhs) + 3 if lhs else 0)
            if not flat and start + _width(rhs) > self.width:  # as JAX: one param per line
                pad = " " * (indent + 2)
                inner = "\n".join(pad + f"{k}=" + self.param(v, indent + 2, indent + 3 + len(k),
                                                              False) for k, v in params)
                rhs = f"{e.primitive.name}[\n{inner}\n{' ' * indent}]"
        text = f"{lhs} = {rhs}" if lhs else rhs  # no outputs: no binders
        return self.mark(e) + text + (f" {args}" if args else "")

    def mark(self, e: JaxprEqn) -> str:
        notes = []
        info = e.source_info
        if self.source_info and info is not None and info.location():
            notes.append(info.location())
        if self.name_stack:
            notes.append("[" + scope_path(info.name_stack if info is not None else ()) + "]")
        if not notes:
            return ""
        self.notes.append(notes)
        return f"\x00{len(self.notes) - 1}\x01"

    def annotate(self, text: str) -> str:
        """``text`` with each marked equation's notes after the line it starts on, all notes
        in one column past the longest line (JAX's layout of ``source_info``/``name_stack``)."""
        if not self.notes:
            return text
        lines = text.split("\n")
        column = max(_width(line) for line in lines)
        out = []
        for line in lines:
            notes = [n for i in re.findall(_MARK, line) for n in self.notes[int(i)]]
            line = re.sub(_MARK, "", line)
            if notes:
                out.append(line + " " * (column - _width(line)) + " # " + notes[0])
                out.extend(" " * column + " # " + n for n in notes[1:])
            else:
                out.append(line)
        return "\n".join(out)

    def top(self, jaxpr: Jaxpr) -> str:
        return self.annotate(self.jaxpr(jaxpr, 0))


def pretty_print_jaxpr(jaxpr: Jaxpr, *, source_info=False, print_shapes=True,
                       custom_pp_eqn_rules=True, name_stack=False, print_effects=False,
                       width=80, use_color=None, **format_options) -> str:
    """``jaxpr`` as text, with the options of JAX's ``Jaxpr.pretty_print``: binder types
    (``print_shapes``), each equation's user source line (``source_info``) and named-scope
    path (``name_stack``) as ``# ...`` notes, the primitives' own param printers
    (``custom_pp_eqn_rules``), each jaxpr's effects (``print_effects``), the line ``width``
    and ANSI colours (``use_color``; plax colours only when asked, also in a terminal).
    JAX's other ``Doc.format`` options are checked but change nothing in plain text."""
    unknown = sorted(set(format_options) - _FORMAT_OPTIONS)
    if unknown:
        raise TypeError(f"pretty_print() got unexpected keyword argument(s) {unknown}.")
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"pretty_print: width must be a positive int, got {width!r}.")
    return _Printer(print_shapes=print_shapes, source_info=source_info, name_stack=name_stack,
                    custom_pp_eqn_rules=custom_pp_eqn_rules, print_effects=print_effects,
                    use_color=bool(use_color), width=width).top(jaxpr)


class _EqnMarker(_Printer):
    """A printer that marks where every equation's text starts (for ``equation_lines``)."""

    def mark(self, e: JaxprEqn) -> str:
        self.notes.append(e)
        return f"\x00{len(self.notes) - 1}\x01"


def equation_lines(jaxpr: Jaxpr, *, width: int = 80) -> list:
    """``jaxpr`` printed (as ``str(jaxpr)`` at ``width``), line by line: ``[(text,
    [(column, eqn), ...]), ...]``, each line with the equations whose text starts on it."""
    printer = _EqnMarker(width=width)
    out = []
    for line in printer.jaxpr(jaxpr, 0).split("\n"):
        pieces = re.split(_MARK, line)  # text, equation number, text, ...
        text, starts = pieces[0], []
        for i in range(1, len(pieces), 2):
            starts.append((len(text), printer.notes[int(pieces[i])]))
            text += pieces[i + 1]
        out.append((text, starts))
    return out


# Doc.format's other options: JAX's HTML output, separable lines and source maps.
_FORMAT_OPTIONS = {"output_format", "separable_lines", "annotation_prefix", "source_map"}


def _holds_jaxprs(params) -> bool:
    return next(subjaxprs(params), None) is not None


# --- checking -----------------------------------------------------------------
class JaxprTypeError(TypeError):
    pass


def _same_type(a: ShapedArray, b: ShapedArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype


def check_jaxpr(jaxpr: Jaxpr, _seen=None) -> None:
    """Check that every variable is defined before use and every equation is well typed,
    in ``jaxpr`` and in every jaxpr its equations hold (under what their equations bind:
    ``body_context_rules``)."""
    seen = set() if _seen is None else _seen
    _check_one(jaxpr)
    for e in jaxpr.eqns:
        subs = [open_jaxpr(sub) for sub in subjaxprs(e.params)]
        subs = [sub for sub in subs if id(sub) not in seen]
        if not subs:
            continue
        rule = body_context_rules.get(e.primitive)
        with rule(e.params) if rule is not None else contextlib.nullcontext():
            for sub in subs:
                seen.add(id(sub))
                check_jaxpr(sub, seen)


def _check_one(jaxpr: Jaxpr) -> None:
    defined = set()

    def define(v, where):
        if v in defined:
            raise JaxprTypeError(f"Variable {v} defined twice ({where}).")
        defined.add(v)

    def read(v, where):
        if isinstance(v, Literal):
            return v.aval
        if v not in defined:
            raise JaxprTypeError(f"Variable {v} used before it is defined ({where}).")
        return v.aval

    for v in jaxpr.constvars:
        define(v, "constvar")
    for v in jaxpr.invars:
        define(v, "invar")
    for i, e in enumerate(jaxpr.eqns):
        where = f"equation {i}: {e.primitive.name}"
        in_avals = [read(v, where) for v in e.invars]
        expected = abstract_eval(e.primitive, in_avals, e.params)
        if len(expected) != len(e.outvars):
            raise JaxprTypeError(f"{where} has {len(e.outvars)} outputs, its rule gives {len(expected)}.")
        for v, t in zip(e.outvars, expected):
            if not _same_type(v.aval, t):
                raise JaxprTypeError(f"{where}: output typed {v.aval.str_short()} but the "
                                     f"primitive produces {t.str_short()}.")
            define(v, where)
    for v in jaxpr.outvars:
        read(v, "outvars")


# --- evaluation -------------------------------------------------------------------
def eval_jaxpr(jaxpr: Jaxpr, consts, *args):
    """Run ``jaxpr`` by binding each equation's primitive in the current trace."""
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x

    def read(v):
        return v.value() if isinstance(v, Literal) else env[v]

    # What an equation stages again records that equation's user line (as JAX's eval_jaxpr
    # does), not the line that called eval_jaxpr: a plain attribute set, this loop is hot.
    location = staging_location
    outer = location.at
    try:
        for e in jaxpr.eqns:
            location.at = e.source_info or outer
            out = e.primitive.bind(*[read(v) for v in e.invars], **e.params)
            if e.primitive.multiple_results:
                for v, x in zip(e.outvars, out):
                    env[v] = x
            else:
                env[e.outvars[0]] = out
    finally:
        location.at = outer
    return [read(v) for v in jaxpr.outvars]


def eval_closed_jaxpr(closed: ClosedJaxpr, *args):
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)
