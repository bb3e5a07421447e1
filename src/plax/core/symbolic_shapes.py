"""Symbolic dimensions: array sizes known by a name (``b``) and arithmetic on names.

A ``DimExpr`` is a polynomial with integer coefficients over *atoms*: dimension variables
and the operations that are not polynomial (``floordiv``, ``mod``, ``max``, ``min``). Every
dimension variable is at least 1, as in JAX. Comparisons are decided from the bounds of the
difference: ``2*b >= b`` is True, ``b >= 2`` cannot be decided and raises
``InconclusiveDimensionOperation``; ``==`` is True only when the two expressions are the
same polynomial (``b == 3`` is False, as in JAX).

Shapes with symbolic entries appear only where a user asks for shape polymorphism
(``plax.export.symbolic_shape``): ``ShapedArray`` admits them on its slow path, and shape
rules that only do arithmetic and comparisons work on them unchanged. An operation that
needs a concrete size gets one through ``__index__``, which raises for a symbolic size.
"""
from __future__ import annotations

import math
import operator
import re

import numpy as np

from plax.core import dtypes
from plax.core.errors import InconclusiveDimensionOperation
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, jvp_rules

_INF = math.inf


class SymbolicScope:
    """The dimension variables that may be combined, and the constraints on them (lower
    and upper bounds of single variables, from ``constraints=("b >= 4", ...)``)."""

    def __init__(self, constraints=()):
        if isinstance(constraints, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints!r}")
        self._bounds: dict = {}
        self._constraint_bounds: list = []
        self._constraints = tuple(constraints)
        for c in constraints:
            self._add_constraint(c)

    def _add_constraint(self, text: str) -> None:
        m = re.fullmatch(r"\s*(.+?)\s*(>=|<=|>|<)\s*(.+?)\s*", text)
        if not m:
            raise ValueError(f"Unsupported symbolic constraint {text!r}: plax supports bounds "
                             "of one dimension variable, e.g. 'b >= 4' or 'b <= 128'.")
        lhs, op, rhs = m.groups()
        if re.fullmatch(r"-?\d+", lhs):  # "4 <= b" -> "b >= 4"
            lhs, rhs, op = rhs, lhs, {">=": "<=", "<=": ">=", ">": "<", "<": ">"}[op]
        if not (re.fullmatch(r"[A-Za-z_][\w.]*", lhs) and re.fullmatch(r"-?\d+", rhs)):
            raise ValueError(f"Unsupported symbolic constraint {text!r}: plax supports bounds "
                             "of one dimension variable, e.g. 'b >= 4' or 'b <= 128'.")
        k = int(rhs)
        self._constraint_bounds.append((text, lhs, op in (">=", ">"),
                                        k + (op == ">") - (op == "<")))
        lo, hi = self._bounds.get(lhs, (1, _INF))
        if op == ">=":
            lo = max(lo, k)
        elif op == ">":
            lo = max(lo, k + 1)
        elif op == "<=":
            hi = min(hi, k)
        else:
            hi = min(hi, k - 1)
        self._bounds[lhs] = (lo, hi)

    def bounds(self, name: str) -> tuple:
        return self._bounds.get(name, (1, _INF))

    def constraint_bounds(self) -> list:
        """The constraints as (text, variable, is a lower bound, bound), in their order."""
        return list(self._constraint_bounds)

    def __str__(self):
        return f"SymbolicScope(constraints={list(self._constraints)})"

    __repr__ = __str__


# --- atoms ---------------------------------------------------------------------------------
class _Var:
    __slots__ = ("name", "scope", "_key")

    def __init__(self, name: str, scope: SymbolicScope):
        self.name, self.scope = name, scope
        self._key = ("0", name)

    def __eq__(self, other):
        return isinstance(other, _Var) and self.name == other.name and \
            self.scope is other.scope

    def __hash__(self):
        return hash(self.name)

    def bounds(self):
        return self.scope.bounds(self.name)

    def __str__(self):
        return self.name

    def evaluate(self, env):
        try:
            return env[self.name]
        except KeyError:
            raise KeyError(f"no value for the dimension variable {self.name!r}") from None

    def variables(self):
        return {self.name}


class _Op:
    """A non-polynomial operation on dimension expressions: floordiv, mod, max, min."""
    __slots__ = ("kind", "args", "_key")

    def __init__(self, kind: str, args: tuple):
        self.kind, self.args = kind, args
        self._key = ("1", kind, tuple(str(a) for a in args))

    def __eq__(self, other):
        return isinstance(other, _Op) and self.kind == other.kind and self.args == other.args

    def __hash__(self):
        return hash((self.kind, self.args))

    def bounds(self):
        (alo, ahi), (blo, bhi) = (_refined_bounds(a) for a in self.args)
        if self.kind == "max":
            return max(alo, blo), max(ahi, bhi)
        if self.kind == "min":
            return min(alo, blo), min(ahi, bhi)
        if blo < 1:  # (a divisor that may be negative: a constant one is made positive)
            return -_INF, _INF
        if self.kind == "mod":
            return 0, bhi - 1
        quotients = [_floor_quotient(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(quotients), max(quotients)

    def __str__(self):
        return f"{self.kind}({', '.join(str(a) for a in self.args)})"

    def evaluate(self, env):
        a, b = (_evaluate(x, env) for x in self.args)
        return {"floordiv": floordiv, "mod": mod, "max": max_dim, "min": min_dim}[self.kind](a, b)

    def variables(self):
        out = set()
        for a in self.args:
            if isinstance(a, DimExpr):
                out |= a.variables()
        return out


def _floor_quotient(x, y):
    """``x // y`` for bounds (``y >= 1``; either may be infinite)."""
    if abs(x) == _INF:
        return x
    if y == _INF:
        return 0 if x >= 0 else -1
    return x // y


# --- expressions ---------------------------------------------------------------------------
def _monomial_key(mono) -> tuple:
    return tuple((atom._key, p) for atom, p in mono)


# JAX's syntactic order of terms, which decides how an expression prints ("2*b + a", the
# constant last) and which term polynomial division starts from: by a size (1 for a
# variable; an operation's is 1 + its operands'), then by names and operands.
def _atom_order(atom) -> tuple:
    if isinstance(atom, _Var):
        return (1, atom.name)
    args = tuple(_expr_order(a) for a in atom.args)
    return (1 + sum(a[0] for a in args), atom.kind, args)


def _term_order(mono) -> tuple:
    factors = sorted((_atom_order(atom), p) for atom, p in mono)
    return (sum(1 + p * f[0] for f, p in factors), tuple(factors))


def _expr_order(e) -> tuple:
    if not isinstance(e, DimExpr):
        return (1, (((0, ()), e),))
    terms = tuple((_term_order(m), c) for m, c in e._terms)
    return (sum(1 + abs(c) * t[0] for t, c in terms), terms)


class DimExpr:
    """A symbolic dimension size: an integer polynomial over dimension variables and
    floordiv/mod/max/min terms. Arithmetic with ints and other DimExprs; comparisons
    decided where the bounds allow (else InconclusiveDimensionOperation)."""

    __slots__ = ("_terms", "_scope", "_hash")

    def __init__(self, terms: dict, scope):
        # monomial (tuple of (atom, power), sorted) -> nonzero coefficient; () is the constant
        self._terms = tuple(sorted(((m, c) for m, c in terms.items() if c),
                                   key=lambda mc: _term_order(mc[0]), reverse=True))
        self._scope = scope
        self._hash = hash(self._terms)

    # construction
    @staticmethod
    def _make(terms: dict, scope):
        """The expression, or a Python int when it is constant."""
        terms = {m: c for m, c in terms.items() if c}
        if not terms:
            return 0
        if list(terms) == [()]:
            return terms[()]
        return DimExpr(terms, scope)

    @staticmethod
    def _atom(atom, scope) -> "DimExpr":
        return DimExpr({((atom, 1),): 1}, scope)

    @property
    def scope(self) -> SymbolicScope:
        return self._scope

    def _terms_dict(self) -> dict:
        return dict(self._terms)

    def variables(self) -> set:
        out = set()
        for mono, _ in self._terms:
            for atom, _ in mono:
                out |= atom.variables()
        return out

    # arithmetic
    def _coerce(self, other):
        if isinstance(other, DimExpr):
            if other._scope is not self._scope:
                raise ValueError(
                    "Invalid mixing of symbolic scopes: the dimension expressions "
                    f"'{self}' and '{other}' come from different symbolic_shape calls. Create "
                    "them in one call, or pass scope= to share one.")
            return other._terms_dict()
        try:
            k = operator.index(other)
        except TypeError:
            return None
        return {(): k}

    def __add__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        t = self._terms_dict()
        for m, c in o.items():
            t[m] = t.get(m, 0) + c
        return DimExpr._make(t, self._scope)

    __radd__ = __add__

    def __neg__(self):
        return DimExpr._make({m: -c for m, c in self._terms}, self._scope)

    def __sub__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self + DimExpr._make({m: -c for m, c in o.items()}, self._scope) \
            if not (list(o) == [()]) else self + (-o[()])

    def __rsub__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return (-self) + other

    def __mul__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        out: dict = {}
        for m1, c1 in self._terms:
            for m2, c2 in o.items():
                powers: dict = {}
                for atom, p in (*m1, *m2):
                    powers[atom] = powers.get(atom, 0) + p
                mono = tuple(sorted(powers.items(), key=lambda ap: ap[0]._key))
                out[mono] = out.get(mono, 0) + c1 * c2
        return DimExpr._make(out, self._scope)

    __rmul__ = __mul__

    def __pow__(self, power):
        power = operator.index(power)
        if power < 0:
            raise InconclusiveDimensionOperation(
                f"Symbolic dimension '{self}' raised to the negative power {power}")
        out = 1
        for _ in range(power):
            out = out * self
        return out

    def __floordiv__(self, other):
        if self._coerce(other) is None:
            return NotImplemented
        return floordiv(self, other)

    def __rfloordiv__(self, other):
        if self._coerce(other) is None:
            return NotImplemented
        return floordiv(other, self)

    def __mod__(self, other):
        if self._coerce(other) is None:
            return NotImplemented
        return mod(self, other)

    def __rmod__(self, other):
        if self._coerce(other) is None:
            return NotImplemented
        return mod(other, self)

    def __divmod__(self, other):
        return self // other, self % other

    def __truediv__(self, other):
        # An exact division is a dimension again (JAX's behaviour); else a value is needed.
        if isinstance(other, (int, DimExpr)) or hasattr(other, "__index__"):
            q, r = floordiv(self, other), mod(self, other)
            if isinstance(r, int) and r == 0:
                return q
            raise InconclusiveDimensionOperation(
                f"Cannot divide '{self}' by '{other}': the quotient is not an integer "
                "dimension. Use // for integer division, or jnp.asarray(dim) / other "
                "for a value.")
        return NotImplemented

    # comparisons
    def _diff_bounds(self, other):
        o = self._coerce(other)
        if o is None:
            return None
        return _refined_bounds(self - DimExpr._make(o, self._scope)
                               if len(o) > 1 or () not in o else self - o[()])

    def _compare(self, other, op: str):
        b = self._diff_bounds(other)
        if b is None:
            return NotImplemented
        lo, hi = b
        decided = {">=": (lo >= 0, hi < 0), ">": (lo > 0, hi <= 0),
                   "<=": (hi <= 0, lo > 0), "<": (hi < 0, lo >= 0)}[op]
        if decided[0]:
            return True
        if decided[1]:
            return False
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension comparison '{self}' {op} '{other}' is inconclusive.\n"
            "This error arises for comparison operations with shapes that are non-constant, "
            "and the result of the operation cannot be represented as a boolean value for all "
            "values of the symbolic dimensions involved (dimension variables are >= 1).")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __eq__(self, other):
        o = self._coerce(other) if not isinstance(other, DimExpr) or \
            other._scope is self._scope else None
        if o is None:
            return False if isinstance(other, DimExpr) else NotImplemented
        return self._terms_dict() == o

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return self._hash

    # conversions: a symbolic size where a concrete one is needed
    def _needs_constant(self):
        return InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used in a context that requires a constant.\n"
            "This error arises for operations with shapes that are non-constant, where a "
            "concrete size is needed (a Python int, a NumPy shape, a loop bound).")

    def __index__(self):
        raise self._needs_constant()

    def __int__(self):
        raise self._needs_constant()

    def __float__(self):
        raise self._needs_constant()

    def __jax_array__(self):
        return dimension_as_value(self)

    def __str__(self):
        parts = []
        for mono, c in self._terms:
            factors = sorted(mono, key=lambda ap: _atom_order(ap[0]))
            body = "*".join(str(a) + (f"^{p}" if p > 1 else "") for a, p in factors)
            if not body:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            parts.append(("+ " if c > 0 else "- ") + text)
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else text

    __repr__ = __str__

    def evaluate(self, env):
        return _evaluate(self, env)

    def bounds(self) -> tuple:
        return _refined_bounds(self)


# --- operations ----------------------------------------------------------------------------
def is_symbolic_dim(d) -> bool:
    """Whether ``d`` is a symbolic dimension (not a plain int)."""
    return isinstance(d, DimExpr)


def is_constant_dim(d) -> bool:
    return not isinstance(d, DimExpr)


def shape_is_symbolic(shape) -> bool:
    return any(isinstance(d, DimExpr) for d in shape)


def _scope_of(*xs):
    for x in xs:
        if isinstance(x, DimExpr):
            return x._scope
    return None


def _divmod(a, b) -> tuple:
    """``(a // b, a % b)`` by polynomial division from the leading term (JAX's): exact
    quotients are expressions, and a constant divisor may leave a constant remainder; where
    the division does not come out, ``floordiv(a, b)`` and ``mod(a, b)`` terms."""
    if not isinstance(a, DimExpr) and not isinstance(b, DimExpr):
        return divmod(operator.index(a), operator.index(b))
    scope = _scope_of(a, b)
    if not isinstance(b, DimExpr):
        b = operator.index(b)
        if b == 0:
            raise ZeroDivisionError(f"dimension '{a}' divided by 0")
        if b < 0:
            q, r = _divmod(-a, -b)
            return q, -r
    elif isinstance(a, DimExpr) and a._scope is not b._scope:
        a._coerce(b)  # raises the error for mixed scopes
    dividend, quotient = a, 0
    while isinstance(dividend, DimExpr):
        mono, count = dividend._terms[0]
        if isinstance(b, DimExpr):
            dmono, dcount = b._terms[0]
            qmono = _divide_monomial(mono, dmono)
        else:
            qmono, dcount = mono, b
        qcount, rcount = divmod(count, dcount)
        if qmono is None or rcount:
            break
        q = DimExpr._make({qmono: qcount}, scope)
        quotient = quotient + q
        dividend = dividend - q * b
    else:
        if not isinstance(b, DimExpr):
            q, r = divmod(dividend, b)
            return quotient + q, r
        if dividend == 0:
            return quotient, 0
    return (DimExpr._atom(_Op("floordiv", (a, b)), scope),
            DimExpr._atom(_Op("mod", (a, b)), scope))


def _divide_monomial(mono, divisor):
    """``mono / divisor`` as a monomial, or None when it is not one."""
    powers = dict(mono)
    for atom, p in divisor:
        left = powers.get(atom, 0) - p
        if left < 0:
            return None
        if left:
            powers[atom] = left
        else:
            del powers[atom]
    return tuple(sorted(powers.items(), key=lambda ap: ap[0]._key))


def floordiv(a, b):
    """``a // b`` for dimensions (a ``floordiv`` term where it does not come out)."""
    return _divmod(a, b)[0]


def mod(a, b):
    """``a % b`` for dimensions (a ``mod`` term where it does not come out)."""
    return _divmod(a, b)[1]


def _minmax(kind: str, a, b):
    if not isinstance(a, DimExpr) and not isinstance(b, DimExpr):
        return max(a, b) if kind == "max" else min(a, b)
    lo, hi = _refined_bounds(a - b)
    if lo >= 0:  # a >= b
        return a if kind == "max" else b
    if hi <= 0:  # a <= b
        return b if kind == "max" else a
    return DimExpr._atom(_Op(kind, (a, b)), _scope_of(a, b))


def max_dim(a, b):
    """The larger of two dimensions (symbolic when it cannot be decided)."""
    return _minmax("max", a, b)


def min_dim(a, b):
    """The smaller of two dimensions (symbolic when it cannot be decided)."""
    return _minmax("min", a, b)


def _bounds(e) -> tuple:
    """An interval holding every value of ``e`` (dimension variables are >= 1)."""
    if not isinstance(e, DimExpr):
        return e, e
    lo = hi = 0
    for mono, c in e._terms:
        mlo, mhi = 1, 1
        for atom, p in mono:
            alo, ahi = atom.bounds()
            plo, phi = _interval_pow(alo, ahi, p)
            mlo, mhi = _interval_mul(mlo, mhi, plo, phi)
        tlo, thi = (c * mlo, c * mhi) if c > 0 else (c * mhi, c * mlo)
        lo, hi = lo + tlo, hi + thi
    return lo, hi


def _refined_bounds(e, depth: int = 3) -> tuple:
    """``_bounds(e)``, tightened by replacing each ``min``/``max`` term by its arguments
    (``min(p, q) <= p``, ``max(p, q) >= p``): ``min(3, b) - b`` is at most 0. Nested and
    further ``min``/``max`` terms are replaced in turn, ``depth`` levels deep."""
    lo, hi = _bounds(e)
    if not isinstance(e, DimExpr) or depth <= 0:
        return lo, hi
    for mono, c in e._terms:
        if len(mono) != 1 or mono[0][1] != 1 or not isinstance(mono[0][0], _Op) or \
                mono[0][0].kind not in ("min", "max"):
            continue
        atom = mono[0][0]
        rest = e - c * DimExpr._atom(atom, e._scope)
        (plo, phi), (qlo, qhi) = (_refined_bounds(rest + c * arg, depth - 1)
                                  for arg in atom.args)
        # e = rest + c*max(p, q) = max(rest + c*p, rest + c*q) when c > 0, and so on
        if (atom.kind == "max") == (c > 0):
            lo, hi = max(lo, plo, qlo), min(hi, max(phi, qhi))
        else:
            lo, hi = max(lo, min(plo, qlo)), min(hi, phi, qhi)
    return lo, hi


def _mul(a, b):
    if a == 0 or b == 0:
        return 0
    return a * b


def _interval_mul(alo, ahi, blo, bhi):
    prods = [_mul(alo, blo), _mul(alo, bhi), _mul(ahi, blo), _mul(ahi, bhi)]
    return min(prods), max(prods)


def _interval_pow(lo, hi, p):
    out = (1, 1)
    for _ in range(p):
        out = _interval_mul(out[0], out[1], lo, hi)
    if p % 2 == 0 and lo < 0 < hi:
        out = (0, out[1])
    return out


def _evaluate(e, env):
    """``e`` with its dimension variables replaced by ``env``'s values (ints or DimExprs)."""
    if not isinstance(e, DimExpr):
        return e
    total = 0
    for mono, c in e._terms:
        term = c
        for atom, p in mono:
            v = atom.evaluate(env)
            for _ in range(p):
                term = term * v
        total = total + term
    return total


def evaluate_shape(shape, env) -> tuple:
    """``shape`` with its symbolic entries evaluated in ``env`` (name -> int or DimExpr)."""
    if not env and not shape_is_symbolic(shape):
        return tuple(shape)
    return tuple(_evaluate(d, env) for d in shape)


# --- parsing -------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<num>\d+)|(?P<name>[A-Za-z_][\w.]*)|(?P<op>\.\.\.|//|[-+*^(),%]))")


class _Parser:
    def __init__(self, text: str, scope: SymbolicScope, like, spec: str):
        self.spec, self.scope, self.like = spec, scope, like
        self.tokens = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"syntax error in symbolic shape '{spec}': unexpected "
                                 f"character at {text[pos:]!r}")
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ValueError(f"syntax error in symbolic shape '{self.spec}': expecting "
                             f"{value!r} but found {tok[1] or 'the end'!r}")
        self.i += 1
        return tok

    def shape(self) -> list:
        toks = self.tokens
        if toks and toks[0] == ("op", "(") and toks[-1] == ("op", ")") and \
                self._outer_parens():
            self.tokens = toks[1:-1]
        dims = []
        if self.peek()[0] == "end":
            return dims
        while True:
            dims.append(self.dim(len(dims)))
            if self.peek()[0] == "end":
                return dims
            self.take(",")
            if self.peek()[0] == "end":  # a trailing comma: "b,"
                return dims

    def _outer_parens(self) -> bool:
        depth = 0
        for j, (_, v) in enumerate(self.tokens):
            depth += v == "("
            depth -= v == ")"
            if depth == 0 and j < len(self.tokens) - 1:
                return False
        return True

    def dim(self, index: int):
        tok = self.peek()
        if tok == ("name", "_"):
            self.take()
            if self.like is None or index >= len(self.like) or self.like[index] is None:
                raise ValueError(f"symbolic shape '{self.spec}': dimension {index} is '_' but "
                                 "like= gives no size for it.")
            return self.like[index]
        if tok == ("op", "..."):
            self.take()
            return Ellipsis
        return self.expr()

    def expr(self):
        if self.peek() == ("op", "-"):
            self.take()
            value = -self.term()
        else:
            value = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.power()
        while self.peek() in (("op", "*"), ("op", "//"), ("op", "%")):
            op = self.take()[1]
            rhs = self.power()
            value = value * rhs if op == "*" else floordiv(value, rhs) if op == "//" \
                else mod(value, rhs)
        return value

    def power(self):
        value = self.factor()
        if self.peek() == ("op", "^"):
            self.take()
            kind, n = self.take()
            if kind != "num":
                raise ValueError(f"syntax error in symbolic shape '{self.spec}': a power "
                                 "must be a number")
            value = value ** int(n)
        return value

    def factor(self):
        kind, text = self.take()
        if kind == "num":
            return int(text)
        if kind == "name":
            if text in ("floordiv", "mod", "max", "min") and self.peek() == ("op", "("):
                self.take("(")
                a = self.expr()
                self.take(",")
                b = self.expr()
                self.take(")")
                return {"floordiv": floordiv, "mod": mod, "max": max_dim,
                        "min": min_dim}[text](a, b)
            return DimExpr._atom(_Var(text, self.scope), self.scope)
        if (kind, text) == ("op", "("):
            value = self.expr()
            self.take(")")
            return value
        if (kind, text) == ("op", "-"):
            return -self.factor()
        raise ValueError(f"syntax error in symbolic shape '{self.spec}': unexpected "
                         f"{text or 'end'!r}")


def parse_shape(spec: str, scope: SymbolicScope, like=None) -> tuple:
    """The dimensions of the shape ``spec`` (``"b, 4"``, ``"2*b + 1, ..."``)."""
    if not isinstance(spec, str):
        raise ValueError(f"polymorphic shape spec should be a string, got {spec!r}")
    dims = _Parser(spec, scope, like, spec).shape()
    for d in dims:
        if isinstance(d, int) and d < 0:
            raise ValueError(f"symbolic shape '{spec}' has a negative dimension {d}")
    return tuple(dims)


def checked_symbolic_shape(shape) -> tuple:
    """``shape`` (some entries symbolic) with its constant entries as Python ints, after
    checking that no entry can be negative."""
    out = []
    for d in shape:
        if isinstance(d, DimExpr):
            if _refined_bounds(d)[0] < 0:
                raise InconclusiveDimensionOperation(
                    f"Shape {tuple(shape)} has the dimension '{d}', which may be negative.")
            out.append(d)
        else:
            try:
                d = operator.index(d)
            except TypeError:
                from plax.core.errors import shape_type_error
                raise shape_type_error(tuple(shape)) from None
            if d < 0:
                raise TypeError(f"shape must have every element be nonnegative, got "
                                f"{tuple(shape)}")
            out.append(d)
    return tuple(out)



# --- a symbolic dimension as a value (x / x.shape[0], jnp.asarray(b)) -------------------------
dim_as_value_p = Primitive("dim_as_value")


def dimension_as_value(d):
    """``d`` as an integer scalar value: ``d`` itself when constant, else the result of
    ``dim_as_value`` (the size the function is called with, known when it is lowered)."""
    if not isinstance(d, DimExpr):
        return d
    return dim_as_value_p.bind(dim=d)


def _dim_as_value_abstract(*, dim):
    from plax.core.avals import ShapedArray
    return ShapedArray((), dtypes.canonicalize_dtype(np.int64), weak_type=True)


def _dim_as_value_jvp(primals, tangents, *, dim):
    from plax.core.rules import Zero
    out = dim_as_value_p.bind(dim=dim)
    return out, Zero(_dim_as_value_abstract(dim=dim).to_tangent_aval())


abstract_eval_rules[dim_as_value_p] = _dim_as_value_abstract
jvp_rules[dim_as_value_p] = _dim_as_value_jvp
# nullary: vmap binds it unbatched
batch_rules[dim_as_value_p] = lambda axis, vals, dims, *, dim: (dim_as_value_p.bind(dim=dim),
                                                                 None)
