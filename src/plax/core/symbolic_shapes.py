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

import functools
import operator
from typing import NamedTuple

import numpy as np

from plax.core import dtypes
from plax.core.errors import InconclusiveDimensionOperation
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, jvp_rules



class _Constraint(NamedTuple):
    """An explicit constraint ``e1 == e2`` or ``e1 >= e2`` (``cmp`` is "==" or ">="), as
    written (``text``), with ``diff = e1 - e2`` taken before it became a rewrite rule."""
    cmp: str
    text: str
    e1: object
    e2: object
    diff: object

    def __repr__(self):
        return f"Constraint({self.text})"


class SymbolicScope:
    """The dimension variables that may be combined, and the constraints on them:
    ``e1 >= e2``, ``e1 <= e2`` and ``e1 == e2`` over dimension expressions. An equality
    whose left side is one term (``b == a + 1``, ``mod(a, 4) == 0``) also rewrites that
    term wherever an expression of this scope is built."""

    def __init__(self, constraints=()):
        if isinstance(constraints, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints!r}")
        self._constraints = tuple(constraints)
        self._explicit_constraints: list = []
        self._normalization_rules: dict = {}  # monomial -> (terms dict, its coefficient)
        self._bounds_cache: dict = {}
        self._decision_initial_state = None
        self._initialized = False
        for c in self._constraints:
            self._add_constraint(c)
            self._bounds_cache.clear()
        self._initialized = True

    def _add_constraint(self, text) -> None:
        if not isinstance(text, str):
            raise ValueError(f"SymbolicScope constraint must be a string: got {text!r}")
        for sym, cmp, flip in (("==", "==", False), (">=", ">=", False), ("<=", ">=", True)):
            pos = text.find(sym)
            if pos >= 0:
                break
        else:
            raise ValueError("Constraint parsing error: must contain one of '==' or '>=' "
                             "or '<='")
        from plax.core.symbolic_parse import parse_dim
        e1, e2 = (parse_dim(side, self) for side in (text[:pos], text[pos + 2:]))
        if flip:
            e1, e2 = e2, e1
        self._process_constraint(_Constraint(cmp, text, e1, e2, e1 - e2))

    def _process_constraint(self, c: _Constraint) -> None:
        if not isinstance(c.diff, DimExpr):
            if c.diff != 0 if c.cmp == "==" else c.diff < 0:
                raise ValueError(f"Unsatisfiable explicit constraint: {c.text}")
            return  # trivially true: dropped
        if c.cmp == "==":
            if not isinstance(c.e1, DimExpr) or len(c.e1._terms) != 1:
                raise ValueError(f"Invalid equality constraint: {c.e1} == {c.e2}. The "
                                 "left-hand-side must be of the form `term * coefficient`.")
            (mono, k), = c.e1._terms
            if mono in self._normalization_rules:
                raise NotImplementedError("Found multiple equality constraints with the same "
                                          f"left-hand-side: {_term_str(mono)}")
            self._normalization_rules[mono] = (_as_terms(c.e2), k)
            atom = mono[0][0] if len(mono) == 1 and mono[0][1] == 1 else None
            if k == 1 and c.e2 == 0 and isinstance(atom, _Op) and atom.kind == "mod" and \
                    not isinstance(atom.args[1], DimExpr):
                # mod(x, n) == 0 also gives n*floordiv(x, n) == x
                x, n = atom.args
                lhs = n * DimExpr._make({((_Op("floordiv", (x, n)), 1),): 1}, self)
                self._process_constraint(_Constraint("==", f"{lhs} == {x}", lhs, x, lhs - x))
        self._explicit_constraints.append(c)

    def _describe(self) -> str:
        if not self._explicit_constraints:
            return "SymbolicScope without constraints"
        return "SymbolicScope with constraints:" + "".join(
            f"\n  {c.text}" for c in self._explicit_constraints)

    def _check_same_scope(self, other, when: str = "") -> None:
        if isinstance(other, DimExpr) and other._scope is not self:
            raise ValueError(
                f"Invalid mixing of symbolic scopes{' ' + when if when else ''}.\n"
                f"Expected {self._describe()}\nand found for '{other}' "
                f"{other._scope._describe()}")

    def __str__(self):
        return self._describe()

    __repr__ = __str__


# --- atoms (JAX's "factors") ---------------------------------------------------------------
class _Atom:
    """A factor of a term: a dimension variable or a non-polynomial operation. Atoms are
    ordered syntactically (``_atom_order``: by size, then names and operands), which
    decides the printed order of factors and terms."""
    __slots__ = ()

    def __lt__(self, other):
        return _atom_order(self) < _atom_order(other)

    def __le__(self, other):
        return _atom_order(self) <= _atom_order(other)

    def __gt__(self, other):
        return _atom_order(self) > _atom_order(other)

    def __ge__(self, other):
        return _atom_order(self) >= _atom_order(other)

    def to_var(self):
        """The variable's name, or None for an operation."""
        return self.name if isinstance(self, _Var) else None

    def get_vars(self) -> set:
        return self.variables()

    def __repr__(self):
        return str(self)


class _Var(_Atom):
    __slots__ = ("name", "scope", "_key")

    def __init__(self, name: str, scope: SymbolicScope):
        self.name, self.scope = name, scope
        self._key = ("0", name)

    def __eq__(self, other):
        return isinstance(other, _Var) and self.name == other.name and \
            self.scope is other.scope

    def __hash__(self):
        return hash(self.name)

    def __str__(self):
        return self.name

    def evaluate(self, env):
        try:
            return env[self.name]
        except KeyError:
            raise KeyError(f"no value for the dimension variable {self.name!r}") from None

    def variables(self):
        return {self.name}


class _Op(_Atom):
    """A non-polynomial operation on dimension expressions: floordiv, mod, max, min."""
    __slots__ = ("kind", "args", "_key")

    def __init__(self, kind: str, args: tuple):
        self.kind, self.args = kind, args
        self._key = ("1", kind, tuple(str(a) for a in args))

    def __eq__(self, other):
        return isinstance(other, _Op) and self.kind == other.kind and self.args == other.args

    def __hash__(self):
        return hash((self.kind, self.args))

    def __str__(self):
        # a negative constant operand prints as JAX's expressions do ("- 2")
        args = (f"- {-a}" if isinstance(a, int) and a < 0 else str(a) for a in self.args)
        return f"{self.kind}({', '.join(args)})"

    def evaluate(self, env):
        a, b = (_evaluate(x, env) for x in self.args)
        return {"floordiv": floordiv, "mod": mod, "max": max_dim, "min": min_dim}[self.kind](a, b)

    def variables(self):
        out = set()
        for a in self.args:
            if isinstance(a, DimExpr):
                out |= a.variables()
        return out


# --- expressions ---------------------------------------------------------------------------
# JAX's syntactic order of terms, which decides how an expression prints ("2*b + a", the
# constant last) and which term polynomial division and bounds start from: by a size (1 for
# a variable; an operation's is 1 + its operands'), then by names and operands; the factors
# of a term compare largest first.
def _atom_order(atom) -> tuple:
    if isinstance(atom, _Var):
        return (1, atom.name)
    args = tuple(_expr_order(a) for a in atom.args)
    return (1 + sum(a[0] for a in args), atom.kind, args)


@functools.lru_cache(maxsize=16384)
def _term_order(mono) -> tuple:
    factors = sorted(((_atom_order(atom), p) for atom, p in mono), reverse=True)
    return (sum(1 + p * f[0] for f, p in factors), tuple(factors))


def _expr_order(e) -> tuple:
    if not isinstance(e, DimExpr):
        return (1, (((0, ()), e),))
    terms = tuple((_term_order(m), c) for m, c in e._terms)
    return (sum(1 + abs(c) * t[0] for t, c in terms), terms)


def _sorted(terms) -> tuple:
    """(monomial, coefficient) pairs without zeros, the largest term first."""
    return tuple(sorted(((m, c) for m, c in terms if c),
                        key=lambda mc: _term_order(mc[0]), reverse=True))


def _mono_mul(m1, m2) -> tuple:
    powers: dict = {}
    for atom, p in (*m1, *m2):
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: ap[0]._key))


def _term_str(mono) -> str:
    return "*".join(str(a) + (f"^{p}" if p > 1 else "")
                    for a, p in sorted(mono, key=lambda ap: _atom_order(ap[0])))


def _as_terms(x) -> dict:
    return x._terms_dict() if isinstance(x, DimExpr) else ({(): x} if x else {})


def _normalize(terms: dict, scope) -> dict:
    """``terms`` after the first rewrite by the scope's equality constraints that applies
    (``t*k -> e``: a term ``t*(n*k)``, or a product holding the factor ``t``, becomes
    ``e*n``)."""
    rules = scope._normalization_rules
    for mono, k in _sorted(terms.items()):
        if not mono:
            continue
        candidates = [(mono, ())]
        if len(mono) > 1:
            candidates += [(((atom, p),), tuple(ap for ap in mono if ap[0] != atom))
                           for atom, p in mono]
        for lhs, rest in candidates:
            rule = rules.get(lhs)
            if rule is not None and k % rule[1] == 0:
                out = dict(terms)
                del out[mono]
                for m2, c2 in rule[0].items():
                    m2 = _mono_mul(m2, rest)
                    out[m2] = out.get(m2, 0) + c2 * (k // rule[1])
                return out
    return terms


class _DimTerm:
    """A term (a product of atoms with powers, ``()`` for the constant 1) as a value that
    compares in JAX's syntactic order: the face of plax's monomial tuples."""
    __slots__ = ("_mono",)

    def __init__(self, mono: tuple):
        self._mono = mono

    def __eq__(self, other):
        return isinstance(other, _DimTerm) and self._mono == other._mono

    def __hash__(self):
        return hash(self._mono)

    def __lt__(self, other):
        return _term_order(self._mono) < _term_order(other._mono)

    def __le__(self, other):
        return _term_order(self._mono) <= _term_order(other._mono)

    def __gt__(self, other):
        return _term_order(self._mono) > _term_order(other._mono)

    def __ge__(self, other):
        return _term_order(self._mono) >= _term_order(other._mono)

    def __str__(self):
        return _term_str(self._mono)

    __repr__ = __str__

    is_constant = property(lambda self: not self._mono)

    def to_factor(self):
        """The single atom of a term ``atom^1``, else None."""
        m = self._mono
        return m[0][0] if len(m) == 1 and m[0][1] == 1 else None

    def to_var(self):
        f = self.to_factor()
        return f.to_var() if f is not None else None

    def get_vars(self) -> set:
        return set().union(*(a.variables() for a, _ in self._mono))


class DimExpr:
    """A symbolic dimension size: an integer polynomial over dimension variables and
    floordiv/mod/max/min terms. Arithmetic with ints and other DimExprs; comparisons
    decided where the bounds allow (else InconclusiveDimensionOperation)."""

    __slots__ = ("_terms", "_scope", "_hash")
    __array_priority__ = 1000  # NumPy values defer to the reflected operations below

    def __init__(self, terms: dict, scope):
        # (monomial, nonzero coefficient), the largest term first; () is the constant
        self._terms = _sorted(terms.items())
        self._scope = scope
        self._hash = hash((self._terms, id(scope)))

    # construction
    @staticmethod
    def _make(terms: dict, scope):
        """The expression in normal form (the scope's rewrites applied), or a Python int
        when it is constant."""
        terms = {m: c for m, c in terms.items() if c}
        if scope is not None and scope._normalization_rules:
            terms = {m: c for m, c in _normalize(terms, scope).items() if c}
        if not terms:
            return 0
        if list(terms) == [()]:
            return terms[()]
        return DimExpr(terms, scope)

    @staticmethod
    def _atom(atom, scope) -> "DimExpr":
        return DimExpr._make({((atom, 1),): 1}, scope)

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

    # JAX's private views of an expression (jax._src.export.shape_poly._DimExpr)
    _get_vars = variables

    @property
    def _size(self) -> int:
        return _expr_order(self)[0]

    @property
    def _sorted_terms(self) -> tuple:
        return tuple((_DimTerm(m), c) for m, c in self._terms)

    @property
    def _leading_term(self) -> tuple:
        return self._sorted_terms[0]

    @staticmethod
    def _from_term(term: _DimTerm, count: int, scope):
        return DimExpr._make({term._mono: count}, scope)

    def _to_term(self):
        """The single term of ``1*term``, else None."""
        if len(self._terms) == 1 and self._terms[0][1] == 1:
            return _DimTerm(self._terms[0][0])
        return None

    def _to_factor(self):
        t = self._to_term()
        return t.to_factor() if t is not None else None

    def _to_var(self):
        f = self._to_factor()
        return f.to_var() if f is not None else None

    def _to_single_term(self):
        """``(k, c, term)`` for ``k + c*term``, else None."""
        rest = [(m, c) for m, c in self._terms if m]
        if len(rest) != 1:
            return None
        return (dict(self._terms).get((), 0), rest[0][1], _DimTerm(rest[0][0]))

    def _eq(self, other) -> bool:
        return not isinstance(self - other, DimExpr) and self - other == 0

    def _evaluate(self, env):
        return _evaluate(self, env)

    # arithmetic
    def _coerce(self, other, when: str = ""):
        if isinstance(other, DimExpr):
            self._scope._check_same_scope(other, when)
            return other._terms_dict()
        try:
            k = operator.index(other)
        except TypeError:
            return None
        return {(): k}

    def _value_op(self, name: str, other):
        """The operation on ``self`` as a value (``dim_as_value``): with a float, an array or
        a traced value the result is an array, as in JAX."""
        return getattr(dimension_as_value(self), name)(other)

    def __add__(self, other):
        if isinstance(other, int) and other == 0:
            return self  # (as JAX: no rewrite by the scope's equalities)
        o = self._coerce(other, "for linear combination")
        if o is None:
            return self._value_op("__add__", other)
        t = self._terms_dict()
        for m, c in o.items():
            t[m] = t.get(m, 0) + c
        return DimExpr._make(t, self._scope)

    def __radd__(self, other):
        if self._coerce(other) is None:
            return self._value_op("__radd__", other)
        return self + other

    def __neg__(self):
        return DimExpr._make({m: -c for m, c in self._terms}, self._scope)

    def __sub__(self, other):
        if isinstance(other, int) and other == 0:
            return self  # (as JAX: no rewrite by the scope's equalities)
        o = self._coerce(other, "for linear combination")
        if o is None:
            return self._value_op("__sub__", other)
        t = self._terms_dict()
        for m, c in o.items():
            t[m] = t.get(m, 0) - c
        return DimExpr._make(t, self._scope)

    def __rsub__(self, other):
        o = self._coerce(other)
        if o is None:
            return self._value_op("__rsub__", other)
        return (-self) + other

    def __mul__(self, other):
        if isinstance(other, int) and other in (0, 1):
            return self if other else 0
        o = self._coerce(other, "for mul")
        if o is None:
            return self._value_op("__mul__", other)
        out: dict = {}
        for m1, c1 in self._terms:
            for m2, c2 in o.items():
                mono = _mono_mul(m1, m2)
                out[mono] = out.get(mono, 0) + c1 * c2
        return DimExpr._make(out, self._scope)

    def __rmul__(self, other):
        if self._coerce(other) is None:
            return self._value_op("__rmul__", other)
        return self * other

    def __pow__(self, power):
        if isinstance(power, DimExpr):  # b ** b is a value
            return power.__rpow__(self)
        if power != int(power):
            raise ValueError("Symbolic dimension cannot be raised to non-integer powers: "
                             f"'{self}' ** '{power}'")
        power = int(power)
        if power < 0:  # (integer values have no negative powers either)
            raise ValueError("Symbolic dimension cannot be raised to negative powers: "
                             f"'{self}' ** '{power}'")
        out = 1
        for _ in range(power):
            out = out * self
        return out

    def __floordiv__(self, other):
        if self._coerce(other, "for floordiv") is None:
            return self._value_op("__floordiv__", other)
        return floordiv(self, other if isinstance(other, DimExpr) else operator.index(other))

    def __rfloordiv__(self, other):
        if self._coerce(other) is None:
            return self._value_op("__rfloordiv__", other)
        return floordiv(operator.index(other), self)

    def __mod__(self, other):
        if self._coerce(other, "for mod") is None:
            return self._value_op("__mod__", other)
        return mod(self, other if isinstance(other, DimExpr) else operator.index(other))

    def __rmod__(self, other):
        if self._coerce(other) is None:
            return self._value_op("__rmod__", other)
        return mod(operator.index(other), self)

    def __divmod__(self, other):
        if self._coerce(other, "for divmod") is None:
            return self._value_op("__divmod__", other)
        return _divmod(self, other if isinstance(other, DimExpr) else operator.index(other))

    def __rdivmod__(self, other):
        if self._coerce(other) is None:
            return self._value_op("__rdivmod__", other)
        return _divmod(operator.index(other), self)

    def __rpow__(self, other):
        return self._value_op("__rpow__", other)

    def __truediv__(self, other):
        # "/" always gives a (float) value, as in JAX; "//" keeps a dimension.
        return self._value_op("__truediv__", other)

    def __rtruediv__(self, other):
        return self._value_op("__rtruediv__", other)

    # comparisons
    def _compare(self, other, op: str):
        o = self._coerce(other, f"when comparing '{self}' {op} '{other}'")
        if o is None:
            return NotImplemented
        from plax.core.symbolic_decide import BoundsPrecision, bounds
        lo, hi = bounds(self - DimExpr._make(o, self._scope), BoundsPrecision.FOR_GEQ0_OR_LT0)
        decided = {">=": (lo >= 0, hi < 0), ">": (lo > 0, hi <= 0),
                   "<=": (hi <= 0, lo > 0), "<": (hi < 0, lo >= 0)}[op]
        if decided[0]:
            return True
        if decided[1]:
            return False
        using = (f"\nUsing symbolic scope {self._scope}"
                 if self._scope._explicit_constraints else "")
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension comparison '{self}' {op} '{other}' is inconclusive.{using}\n"
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
        # Equal when the difference is the constant 0 (JAX's cheap, syntactic equality).
        if isinstance(other, DimExpr):
            if other._scope is not self._scope:
                return False
        else:
            try:
                other = operator.index(other)
            except TypeError:
                return NotImplemented
        diff = self - other
        return not isinstance(diff, DimExpr) and diff == 0

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
            body = _term_str(mono)
            if not body:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            parts.append(("+ " if c > 0 else "- ") + text)
        text = " ".join(parts) or "0"
        return text[2:] if text.startswith("+ ") else text

    __repr__ = __str__

    def evaluate(self, env):
        return _evaluate(self, env)

    def bounds(self) -> tuple:
        """Lower and upper bounds of the values (``-inf``/``inf`` where unbounded)."""
        from plax.core.symbolic_decide import bounds
        return bounds(self)


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
    elif isinstance(a, DimExpr):
        a._coerce(b, "for divmod")  # raises the error for mixed scopes
    else:
        a = operator.index(a)
    dividend, quotient = a, 0
    while isinstance(dividend, DimExpr):
        mono, count = dividend._terms[0]
        if isinstance(b, DimExpr):
            dmono, dcount = b._terms[0]
            qmono = _divide_monomial(mono, dmono)
        else:
            qmono, dcount = mono, b
        qcount, rcount = divmod(count, dcount)
        if qmono is None or rcount or not mono:
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
    scope = _scope_of(a, b)
    a, b = (_dim_operand(x, scope, kind) for x in (a, b))
    from plax.core.symbolic_decide import BoundsPrecision, bounds
    lo, hi = bounds(a - b, BoundsPrecision.FOR_GEQ0_OR_LEQ0)
    if lo >= 0:  # a >= b
        return a if kind == "max" else b
    if hi <= 0:  # a <= b
        return b if kind == "max" else a
    return DimExpr._atom(_Op(kind, (a, b)), scope)


def _dim_operand(x, scope, kind: str):
    """``x`` as an operand of ``max_dim``/``min_dim`` with a symbolic one: a DimExpr of
    ``scope`` or an integer (a tracer raises ConcretizationTypeError)."""
    if isinstance(x, DimExpr):
        scope._check_same_scope(x, f"for {kind}")
        return x
    from plax.core.trace import concrete_or_error

    def index(v):
        try:
            return operator.index(v)
        except TypeError:
            raise TypeError("Only integer scalar arrays can be converted to a scalar index, "
                            f"not {v!r}, as an operand of core.{kind}_dim") from None
    return concrete_or_error(index, x, f"an operand of core.{kind}_dim")


def max_dim(a, b):
    """The larger of two dimensions (symbolic when it cannot be decided)."""
    return _minmax("max", a, b)


def min_dim(a, b):
    """The smaller of two dimensions (symbolic when it cannot be decided)."""
    return _minmax("min", a, b)


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


def parse_shape(spec, scope: SymbolicScope, like=None) -> tuple:
    """The dimensions of the shape ``spec`` (``"b, 4"``, ``"2*b + 1, ..."``); the parser
    lives in ``plax.core.symbolic_parse``."""
    from plax.core.symbolic_parse import parse_shape as parse
    return parse(spec, scope, like)


def checked_symbolic_shape(shape) -> tuple:
    """``shape`` (some entries symbolic) with its constant entries as Python ints, after
    checking that no entry can be negative."""
    out = []
    for d in shape:
        if isinstance(d, DimExpr):
            if d.bounds()[0] < 0:
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



def _slice_sign_unknown(what: str, v, error) -> Exception:
    return InconclusiveDimensionOperation(
        f"Cannot determine the sign of the slice {what} '{v}': a symbolic slice bound must be "
        f"known to be >= 0 or < 0 for all values of its dimension variables.\n{error}")


def _slice_bound(v, what: str):
    """A slice start/stop/step as an int or a symbolic dimension (None stays None)."""
    if v is None or type(v) is DimExpr:
        return v
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"slice indices must be integers or None or have an __index__ method, "
                        f"got {what} {v!r}") from None


def clamped_slice(s: slice, size, sign_unknown=_slice_sign_unknown) -> tuple:
    """``(start, limit, stride, flip)`` of the slice ``s`` along an axis of ``size`` (it or
    the bounds symbolic), NumPy's clamping: the elements are ``start, start + stride, ...``
    below ``limit`` (``stride > 0``) of the axis, reversed first when ``flip`` (a negative
    step). Bounds are JAX's forms: ``min(size, v)`` and ``max(0, size + v)``.
    ``sign_unknown(what, v, error)``: the exception when a bound's sign cannot be decided."""
    start, stop, step = (_slice_bound(v, w) for v, w in
                         ((s.start, "start"), (s.stop, "stop"), (s.step, "step")))
    step = 1 if step is None else step
    if type(step) is not DimExpr and step == 0:
        raise ValueError("slice step cannot be zero")

    def negative(v, what) -> bool:
        try:
            return bool(v < 0)
        except InconclusiveDimensionOperation as e:
            raise sign_unknown(what, v, e) from None
    flip = negative(step, "step")

    def bound(v, default, what):
        if v is None:
            return default
        if flip:  # the position, in the reversed axis, of the element before ``v``
            return min_dim(size, -1 - v) if negative(v, what) else max_dim(0, size - 1 - v)
        return max_dim(0, size + v) if negative(v, what) else min_dim(size, v)
    lo, hi = bound(start, 0, "start"), bound(stop, size, "stop")
    return lo, lo + max_dim(0, hi - lo), (-step if flip else step), flip


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
