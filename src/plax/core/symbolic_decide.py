"""Bounds of symbolic dimensions, by eliminating terms against known inequalities.

Comparisons (``a >= b``), ``max_dim``/``min_dim`` and shape checks ask for the bounds of an
expression. The known facts are inequalities ``c >= 0`` and equalities ``c == 0`` over
dimension expressions: the scope's explicit constraints, and the implicit ones of each term
(a variable is ``>= 1``; ``0 <= mod(x, n) <= n - 1`` for ``n > 0``;
``x == n*floordiv(x, n) + mod(x, n)``; ``max(x, y) >= x``; a product lies between the
products of its factors' bounds; ...). A fact whose only non-constant term is ``t`` becomes an
interval for ``t``; any other is kept under its largest term.

The bounds of ``e`` whose largest term is ``t*k`` come from each fact ``c`` holding ``t``:
the combination ``e*s + c*r`` (``r > 0``, signs chosen to cancel ``t``) has only smaller
terms, so its bounds, found the same way, bound ``e``. A ``max``/``min`` term is also
bounded through its operands. New facts are combined once with the facts already known
(eliminating each of their terms), which is how ``a >= b, b >= c`` gives ``a >= c``.
The procedure is JAX's, so that the bounds (and its incompleteness) are the same.
"""
from __future__ import annotations

import enum
import math

from plax.core.errors import InconclusiveDimensionOperation
from plax.core.symbolic_shapes import DimExpr, _Op, _sorted, _Var

_INF = math.inf


class Comparator(enum.Enum):
    """A fact ``c == 0`` (EQ) or ``c >= 0`` (GEQ)."""
    EQ = 1
    GEQ = 2


class BoundsPrecision(enum.Enum):
    """How tight the bounds need be: the search stops once they decide the question."""
    FOR_GEQ0_OR_LEQ0 = 0  # max/min: is the difference >= 0 or <= 0
    FOR_GEQ0_OR_LT0 = 1  # comparisons: is the difference >= 0 or < 0
    BEST = 2

    def _bounds_are_sufficient(self, lo, hi) -> bool:
        if self is BoundsPrecision.FOR_GEQ0_OR_LEQ0:
            return lo >= 0 or hi <= 0
        if self is BoundsPrecision.FOR_GEQ0_OR_LT0:
            return lo >= 0 or hi < 0
        return False


def bounds(e, prec: BoundsPrecision = BoundsPrecision.BEST) -> tuple:
    """``(lower, upper)`` bounds of the dimension ``e`` (ints, or -inf/inf)."""
    if not isinstance(e, DimExpr):
        return int(e), int(e)
    return Decision.for_scope(e.scope).bounds(e, prec, add_implicit_constraints=True)


def _sgn(x) -> int:
    return 1 if x >= 0 else -1


def _ceil_div(a, b):
    return -((-a) // b)


def _floor_limit(a, b):
    """``floor(a / b)``, or its limit where ``a`` or ``b`` is infinite (``b != 0``)."""
    differ = (a >= 0) != (b >= 0)
    if abs(b) != _INF:
        return a // b if abs(a) != _INF else (-_INF if differ else _INF)
    if abs(a) != _INF:
        return -1 if differ else 0
    return -_INF if differ else _INF


def _mul0(a, b):
    return 0 if a == 0 or b == 0 else a * b


def _terms(x) -> tuple:
    return x._terms if isinstance(x, DimExpr) else (((), x),) if x else ()


def _combine(t1, f1, t2, f2) -> tuple:
    """``t1*f1 + t2*f2`` on (monomial, coefficient) pairs, largest term first."""
    acc: dict = {}
    for terms, f in ((t1, f1), (t2, f2)):
        for m, c in terms:
            acc[m] = acc.get(m, 0) + c * f
    return _sorted(acc.items())


class Decision:
    """The known facts of one scope, and the bounds they give (JAX's
    ``_DecisionByElimination``)."""

    def __init__(self, scope):
        self.scope = scope
        self._implicit_done: set = set()  # monomials whose implicit facts are in
        self._term_bounds: dict = {}  # monomial -> (lo, hi)
        self._by_lead: dict = {}  # monomial -> {(Comparator, its coefficient, DimExpr)}

    def initialize(self) -> "Decision":
        """Adds the scope's explicit constraints, in the order they were written."""
        for c in self.scope._explicit_constraints:
            if isinstance(c.diff, DimExpr):
                self.add_implicit_constraints_expr(c.diff)
            cmp = Comparator.EQ if c.cmp == "==" else Comparator.GEQ
            self.combine_and_add_constraint(cmp, c.diff, 0, c.text)
            self.scope._bounds_cache.clear()
        return self

    @staticmethod
    def for_scope(scope) -> "Decision":
        """A fresh state holding the scope's constraints (their processing is cached)."""
        if not scope._initialized or not scope._explicit_constraints:
            return Decision(scope).initialize()
        if scope._decision_initial_state is None:
            scope._decision_initial_state = Decision(scope).initialize()
        base = scope._decision_initial_state
        out = Decision(scope)
        out._implicit_done = set(base._implicit_done)
        out._term_bounds = dict(base._term_bounds)
        out._by_lead = {t: set(cs) for t, cs in base._by_lead.items()}
        return out

    # --- adding facts ------------------------------------------------------------------------
    def combine_and_add_constraint(self, cmp: Comparator, e1, e2, text=None) -> None:
        """Adds ``e1 >= e2`` (or ``e1 == e2``) and its combinations with known facts."""
        if cmp is Comparator.GEQ and (e1 == _INF or e2 == -_INF):
            return
        e1, e2 = (int(x) if isinstance(x, float) else x for x in (e1, e2))
        e = e1 - e2
        if not isinstance(e, DimExpr):
            if e < 0:
                raise ValueError(f"Unsatisfiable constraint: {text or f'{e1} >= {e2}'}")
            return
        self._record(cmp, e, text)
        for cmp2, derived in self._consequences(cmp, e, text):
            self._record(cmp2, derived, None)

    def _record(self, cmp: Comparator, e: DimExpr, text) -> None:
        rest = [(m, k) for m, k in e._terms if m]
        if len(rest) == 1:  # n + k*t (>= | ==) 0: an interval for t
            (mono, k), = rest
            n = dict(e._terms).get((), 0)
            lo, hi = self._term_bounds.get(mono, (-_INF, _INF))
            if cmp is Comparator.EQ:
                if n % k:
                    raise ValueError(f"Unsatisfiable constraint: {text}")
                lo, hi = max(lo, -(n // k)), min(hi, -(n // k))
            elif k > 0:
                lo = max(lo, -(n // k))
            else:
                hi = min(hi, (-n) // k)
            if lo > hi:
                raise ValueError(f"Unsatisfiable constraint: {text}")
            self._term_bounds[mono] = (lo, hi)
            return
        mono, k = e._terms[0]
        self._by_lead.setdefault(mono, set()).add((cmp, k, e))

    def _consequences(self, cmp: Comparator, e: DimExpr, text) -> set:
        out = set()
        for mono, k in e._terms:
            if not mono:
                continue
            for c_cmp, c, c_s, t_s in self._partners(mono, k, only_smaller=False):
                if t_s < 0 and cmp is not Comparator.EQ:
                    continue
                new_cmp = Comparator.EQ if cmp is c_cmp is Comparator.EQ else Comparator.GEQ
                new = e * t_s + c * c_s
                if isinstance(new, DimExpr):
                    out.add((new_cmp, new))
                elif new < 0 or (new_cmp is Comparator.EQ and new != 0):
                    raise ValueError(f"Unsatisfiable constraints: {text or f'{e} >= 0'}")
        return out

    def _partners(self, mono, k, only_smaller: bool) -> list:
        """The facts ``c`` that cancel the term ``mono*k``: ``(cmp, c, c_s, t_s)`` with
        ``c_s > 0`` and no ``mono`` left in ``mono*k*t_s + c*c_s``; with ``only_smaller``,
        only those whose other terms are all smaller than ``mono``."""
        out = []
        t = DimExpr({mono: 1}, self.scope)
        lo, hi = self._term_bounds.get(mono, (-_INF, _INF))
        if lo == hi:
            out.append((Comparator.EQ, t - int(lo), abs(k), -_sgn(k)))
        else:
            if lo > -_INF:
                out.append((Comparator.GEQ, t - int(lo), abs(k), -_sgn(k)))
            if hi < _INF:
                out.append((Comparator.GEQ, int(hi) - t, abs(k), _sgn(k)))
        groups = [self._by_lead.get(mono, ())] if only_smaller else self._by_lead.values()
        for group in groups:
            for c_cmp, _, c in group:
                c_k = dict(c._terms).get(mono)
                if c_k is not None:
                    out.append((c_cmp, c, abs(k), -c_k * _sgn(k)))
        return out

    def combine_term_with_existing(self, t, t_k: int, *, scope, only_smaller_than_t=True):
        """JAX's name for ``_partners``, on a ``_DimTerm``."""
        del scope
        return self._partners(t._mono, t_k, only_smaller_than_t)

    # --- implicit facts of terms ---------------------------------------------------------------
    def add_implicit_constraints_expr(self, e: DimExpr) -> None:
        for mono, _ in e._terms:
            if mono:
                self._add_implicit_term(mono)

    def _add_implicit_term(self, mono) -> None:
        if mono in self._implicit_done:
            return
        self._implicit_done.add(mono)
        scope, geq = self.scope, Comparator.GEQ
        t = DimExpr._make({mono: 1}, scope)
        if len(mono) > 1 or mono[0][1] != 1:  # a product: from its factors' bounds
            candidates = [1]
            for atom, p in mono:
                self._add_implicit_term(((atom, 1),))
                lo, hi = self.bounds(DimExpr._make({((atom, 1),): 1}, scope),
                                     BoundsPrecision.BEST)
                candidates = [_mul0(c, b) for c in candidates for b in (lo ** p, hi ** p)]
            self.combine_and_add_constraint(geq, t, min(candidates))
            self.combine_and_add_constraint(geq, max(candidates), t)
            return
        atom = mono[0][0]
        if isinstance(atom, _Var):
            self.combine_and_add_constraint(geq, t, 1)
            return
        assert isinstance(atom, _Op)
        for x in atom.args:
            if isinstance(x, DimExpr):
                self.add_implicit_constraints_expr(x)
        x, y = atom.args
        if atom.kind == "mod":
            lo, hi = self.bounds(y, BoundsPrecision.FOR_GEQ0_OR_LT0)
            if lo > 0:
                self.combine_and_add_constraint(geq, t, 0)
                self.combine_and_add_constraint(geq, y - 1, t)
                self.combine_and_add_constraint(geq, hi - 1, t)
            elif hi < 0:
                self.combine_and_add_constraint(geq, t, y + 1)
                self.combine_and_add_constraint(geq, t, lo + 1)
                self.combine_and_add_constraint(geq, 0, t)
        elif atom.kind == "floordiv":
            (xlo, xhi), (ylo, yhi) = (self.bounds(v, BoundsPrecision.BEST) for v in (x, y))
            if ylo <= 0 <= yhi:
                raise InconclusiveDimensionOperation(
                    f"Possible division by 0 in division by {y}")
            candidates = [_floor_limit(a, b) for a in (xlo, xhi) for b in (ylo, yhi)]
            self.combine_and_add_constraint(geq, t, min(candidates))
            self.combine_and_add_constraint(geq, max(candidates), t)
            if ylo >= 0:
                if xlo >= 0:
                    self.combine_and_add_constraint(geq, t, 0)
                m = DimExpr._make({((_Op("mod", (x, y)), 1),): 1}, scope)
                if isinstance(m, DimExpr):
                    self.add_implicit_constraints_expr(m)
                self.combine_and_add_constraint(Comparator.EQ, x, y * t + m)
        else:  # max, min
            pick = max if atom.kind == "max" else min
            (xlo, xhi), (ylo, yhi) = (self.bounds(v, BoundsPrecision.BEST) for v in (x, y))
            self.combine_and_add_constraint(geq, t, pick(xlo, ylo))
            self.combine_and_add_constraint(geq, pick(xhi, yhi), t)
            for v in (x, y):
                if atom.kind == "max":
                    self.combine_and_add_constraint(geq, t, v)
                else:
                    self.combine_and_add_constraint(geq, v, t)

    # --- bounds --------------------------------------------------------------------------------
    def bounds(self, e, prec: BoundsPrecision, add_implicit_constraints=False) -> tuple:
        """Lower and upper bounds of ``e`` from the known facts (cached in the scope)."""
        if not isinstance(e, DimExpr):
            return int(e), int(e)
        cached = self.scope._bounds_cache.get(e)
        if cached is not None:
            lo, hi, cached_prec = cached
            if prec._bounds_are_sufficient(lo, hi) or cached_prec.value >= prec.value:
                return lo, hi
        if add_implicit_constraints:
            self.add_implicit_constraints_expr(e)
        lo, hi = self._bounds_of_terms(e._terms, prec)
        lo = int(lo) if lo > -_INF else lo
        hi = int(hi) if hi < _INF else hi
        self.scope._bounds_cache[e] = (lo, hi, prec)
        return lo, hi

    def _bounds_of_terms(self, terms: tuple, prec: BoundsPrecision) -> tuple:
        if not terms:
            return 0, 0
        mono, k = terms[0]
        if not mono:
            return k, k
        lo, hi = -_INF, _INF
        for c_cmp, c, c_s, t_s in self._partners(mono, k, only_smaller=True):
            # terms*t_s = rest - c*c_s, with c >= 0 (or == 0) and rest free of mono
            rlo, rhi = self._bounds_of_terms(_combine(terms, t_s, c._terms, c_s),
                                             BoundsPrecision.BEST)
            if rhi < _INF:
                if t_s > 0:
                    hi = min(hi, rhi // t_s)
                else:
                    lo = max(lo, _ceil_div(rhi, t_s))
            if rlo > -_INF and c_cmp is Comparator.EQ:
                if t_s > 0:
                    lo = max(lo, _ceil_div(rlo, t_s))
                else:
                    hi = min(hi, rlo // t_s)
            if prec._bounds_are_sufficient(lo, hi):
                return lo, hi
        atom = mono[0][0] if len(mono) == 1 and mono[0][1] == 1 else None
        if isinstance(atom, _Op) and atom.kind in ("max", "min"):
            # k*max(x, y) + rest is between the bounds of k*x + rest and k*y + rest
            (xlo, xhi), (ylo, yhi) = (
                self._bounds_of_terms(_combine(terms[1:], 1, _terms(v), k),
                                      BoundsPrecision.BEST) for v in atom.args)
            pick = max if (k > 0) == (atom.kind == "max") else min
            lo, hi = max(lo, pick(xlo, ylo)), min(hi, pick(xhi, yhi))
        return lo, hi
