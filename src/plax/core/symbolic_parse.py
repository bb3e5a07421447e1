"""The syntax of symbolic shapes: ``"b, 2*a + 1, mod(b, 4), ..."`` into dimensions.

A shape is a comma-separated list of dimension expressions (optionally in parentheses, with
an optional trailing comma). An expression is made of integers, dimension variables,
``+ - *``, ``^`` with an integer power, ``floordiv(e1, e2)``, ``mod(e1, e2)``,
``max(e1, e2)`` and ``min(e1, e2)``. ``_`` stands for the size at its position in ``like``
and ``...`` (last) for the rest of ``like``. Errors are ``ValueError``s that start with
JAX's phrase "syntax error in symbolic shape".
"""
from __future__ import annotations

import re

from plax.core.symbolic_shapes import DimExpr, SymbolicScope, _Var, floordiv, max_dim, \
    min_dim, mod

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?![\w.]))|(?P<name>[A-Za-z_][\w.]*)|(?P<op>\.\.\.|//|[-+*^(),%]))")
_OPERATIONS = {"floordiv": floordiv, "mod": mod, "max": max_dim, "min": min_dim}


class _Parser:
    def __init__(self, text: str, scope: SymbolicScope, like):
        self.text, self.scope, self.like = text, scope, like
        self.dims: list = []
        self.tokens = []  # (kind, text, position)
        pos = 0
        while pos < len(text):
            if text[pos:].isspace():
                break
            m = _TOKEN.match(text, pos)
            if not m:
                self.pos = pos
                raise self.error("unexpected character")
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def error(self, detail: str) -> ValueError:
        if hasattr(self, "pos"):
            pos = self.pos
        else:
            pos = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        return ValueError(
            f"syntax error in symbolic shape {self.text!r} in dimension {len(self.dims)}: "
            f"{detail}. Parsed {self.text[:pos]!r}, remaining {self.text[pos:]!r}.")

    def peek(self) -> tuple:
        return self.tokens[self.i][:2] if self.i < len(self.tokens) else ("end", "")

    def take(self, expected=None) -> tuple:
        tok = self.peek()
        if expected is not None and tok[1] != expected:
            raise self.error(f"expecting {expected!r} but found {tok[1] or 'the end'!r}")
        self.i += 1
        return tok

    # shape := "(" shape ")" | [dim ("," dim)* [","]]
    def shape(self) -> list:
        if self.peek() == ("op", "(") and self._parenthesized():
            self.take()
            self.shape()
            self.take(")")
            return self.dims
        while self.peek()[0] != "end" and self.peek() != ("op", ")"):
            if self.peek() in (("name", "_"), ("op", "...")):
                if self._placeholder():
                    break
            else:
                self.add_dim(self.expr())
            if self.peek() == ("op", ","):
                self.take()
            elif self.peek()[0] != "end" and self.peek() != ("op", ")"):
                raise self.error(f"expecting ',' but found {self.peek()[1]!r}")
        return self.dims

    def _parenthesized(self) -> bool:
        """Whether the first "(" closes at the last token (then it wraps the shape)."""
        depth = 0
        for j, (_, v, _) in enumerate(self.tokens):
            depth += v == "("
            depth -= v == ")"
            if depth == 0:
                return j == len(self.tokens) - 1
        return False

    def _placeholder(self) -> bool:
        """``_`` or ``...``: sizes from ``like``. True after ``...`` (the shape ends)."""
        _, text = self.peek()
        if self.like is None:
            raise self.error(f"spec contains {text} but no 'like' shape was given")
        need = len(self.dims) + (text == "_")
        if len(self.like) < need:
            raise self.error(f"cannot resolve placeholder '{text}' because we parsed "
                             f"{len(self.dims)} already and 'like' shape has only "
                             f"{len(self.like)} dimensions")
        for d in self.like[len(self.dims):need] if text == "_" else self.like[need:]:
            if d is None:
                raise self.error("unexpected placeholder for unknown dimension; "
                                 f"like={tuple(self.like)}")
            self.dims.append(d)
        self.take()
        if text == "...":
            if self.peek()[0] != "end" and self.peek() != ("op", ")"):
                raise self.error(f"expecting the end after '...' but found {self.peek()[1]!r}")
            return True
        return False

    def add_dim(self, d) -> None:
        if not isinstance(d, DimExpr) and self.like is not None:
            i = len(self.dims)
            known = self.like[i] if i < len(self.like) else None
            if d != known:
                raise self.error(f"different size {d} for known dimension; "
                                 f"like={tuple(self.like)}")
        self.dims.append(d)

    # expr := term (("+" | "-") term)*
    def expr(self):
        value = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    # term := ["+" | "-"] power (("*" | "//" | "%") power)*
    def term(self):
        sign = 1
        if self.peek() in (("op", "+"), ("op", "-")):
            sign = -1 if self.take()[1] == "-" else 1
        value = self.power()
        while self.peek() in (("op", "*"), ("op", "//"), ("op", "%")):
            op = self.take()[1]
            rhs = self.power()
            value = value * rhs if op == "*" else floordiv(value, rhs) if op == "//" \
                else mod(value, rhs)
        return value if sign == 1 else -value

    def power(self):
        value = self.factor()
        if self.peek() == ("op", "^"):
            self.take()
            if self.peek()[0] != "num":
                raise self.error(f"expecting an integer power but found {self.peek()[1]!r}")
            value = value ** int(self.take()[1])
        return value

    def factor(self):
        kind, text = self.peek()
        if kind == "num":
            self.take()
            return int(text)
        if kind == "name" and text != "_":
            self.take()
            if text in _OPERATIONS and self.peek() == ("op", "("):
                self.take("(")
                a = self.expr()
                self.take(",")
                b = self.expr()
                self.take(")")
                return _OPERATIONS[text](a, b)
            return DimExpr._atom(_Var(text, self.scope), self.scope)
        if (kind, text) == ("op", "("):
            self.take()
            value = self.expr()
            self.take(")")
            return value
        raise self.error(f"unexpected {text or 'end'!r}")


def parse_shape(spec, scope: SymbolicScope, like=None) -> tuple:
    """The dimensions of the shape ``spec`` (``"b, 4"``, ``"2*b + 1, ..."``)."""
    if not isinstance(spec, str):
        raise ValueError(f"polymorphic shape spec should be None or a string. Found {spec!r}.")
    parser = _Parser(spec, scope, like)
    dims = parser.shape()
    if parser.peek()[0] != "end":
        raise parser.error(f"expecting the end but found {parser.peek()[1]!r}")
    return tuple(dims)


def parse_dim(text: str, scope: SymbolicScope):
    """The one dimension expression ``text`` (a side of a constraint)."""
    dims = parse_shape(text, scope)
    if len(dims) != 1:
        raise ValueError(f"syntax error in symbolic shape {text!r}: expecting one dimension "
                         f"expression, found {len(dims)}")
    return dims[0]
