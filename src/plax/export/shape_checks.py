"""The values of an export's dimension variables, solved from its arguments' shapes, and the
checks a call's shapes must pass (JAX's algorithm, whose error messages these are).

Each symbolic argument dimension is an equation ``spec = size``, where ``size`` stands for
the dimension the function is called with (a *synthetic* variable named like
``args[0].shape[2]``). Rounds over the equations solve those that are linear in one unknown
variable (``k*v + known terms``); an equation with nothing unknown left becomes a check.
The solution and the checks are expressions over the synthetic variables: evaluated with a
call's shapes (ints, or the caller's own symbolic dimensions) they give the variables'
values and decide the checks; lowered, they become ``@main``'s computation of the
variables and its ``shape_assertion``s.
"""
from __future__ import annotations

from plax.core.errors import InconclusiveDimensionOperation
from plax.core.symbolic_shapes import DimExpr, _evaluate, _Var, floordiv, mod

_SHAPE_ERRORS = (". Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
                 "#shape-assertion-errors for more details.")
_UNSOLVABLE = ("https://docs.jax.dev/en/latest/export/shape_poly.html"
               "#dimension-variables-must-be-solvable-from-the-input-shapes")
_MISMATCH = "Input shapes do not match the polymorphic shapes specification. "


class Check:
    """``left == right`` or ``left >= right`` (``kind``), over the synthetic variables, with
    the pieces of its error message (strings and dimensions, evaluated when it fails)."""

    __slots__ = ("kind", "left", "right", "pieces")

    def __init__(self, kind: str, left, right, pieces):
        self.kind, self.left, self.right, self.pieces = kind, left, right, tuple(pieces)

    def holds(self, env) -> bool:
        """Whether it holds for the sizes ``env`` (False where that cannot be decided)."""
        left, right = _evaluate(self.left, env), _evaluate(self.right, env)
        try:
            return bool(left == right) if self.kind == "==" else bool(left >= right)
        except InconclusiveDimensionOperation:
            return False

    def message(self, env) -> str:
        return "".join(p if isinstance(p, str) else str(_evaluate(p, env))
                       for p in self.pieces)

    def message_template(self) -> tuple:
        """The message with ``{i}`` for its i-th distinct dimension, and those dimensions."""
        inputs: list = []
        out = []
        for p in self.pieces:
            if isinstance(p, str):
                out.append(p.replace("{", "{{").replace("}", "}}"))
                continue
            if p not in inputs:
                inputs.append(p)
            out.append("{" + str(inputs.index(p)) + "}")
        return "".join(out), inputs


class Solution:
    """The dimension variables' values (``values``: name -> expression over the synthetic
    variables, which ``synthetic`` lists as (name, argument index, axis)) and ``checks``."""

    __slots__ = ("values", "synthetic", "checks")

    def __init__(self, values, synthetic, checks):
        self.values, self.synthetic, self.checks = values, synthetic, checks

    def sizes(self, shapes) -> dict:
        """The synthetic variables' values for the argument shapes ``shapes``."""
        return {name: shapes[i][axis] for name, i, axis in self.synthetic}

    def for_call(self, shapes) -> dict:
        """The variables' values for a call with argument shapes ``shapes``; ValueError
        (JAX's message) when a check fails."""
        env = self.sizes(shapes)
        for check in self.checks:
            if not check.holds(env):
                raise ValueError(check.message(env))
        return {v: _evaluate(e, env) for v, e in self.values.items()}


def solve(avals, names) -> Solution:
    """Solve the dimension variables of the argument types ``avals`` (``names[j]`` names
    argument j: ``args[0]``...); ValueError when some variable cannot be solved."""
    equations, synthetic, specs = [], [], []
    scope = None
    for j, aval in enumerate(avals):
        if not any(isinstance(d, DimExpr) for d in aval.shape):
            continue
        specs.append(f"{names[j]}.shape = {tuple(aval.shape)}")
        for axis, d in enumerate(aval.shape):
            if isinstance(d, DimExpr):
                scope = d.scope
                dim_name = f"{names[j]}.shape[{axis}]"
                synthetic.append((dim_name, j, axis))
                equations.append((d, dim_name, DimExpr._atom(_Var(dim_name, scope), scope)))
    using = " Using the following polymorphic shapes specifications: " + ",".join(specs) + "."
    env: dict = {}
    solved = [" Obtained dimension variables: "]
    checks: list = []

    def process(spec, dim_name, size) -> bool:
        var = var_k = None
        rest = size
        for mono, k in spec._terms:
            try:
                value = _evaluate(DimExpr._make({mono: k}, spec.scope), env)
            except KeyError:
                if var is None and len(mono) == 1 and mono[0][1] == 1 and \
                        isinstance(mono[0][0], _Var):
                    var, var_k = mono[0][0].name, k
                    continue
                return False
            rest = rest - value
        if var is None:  # nothing left to solve: a check
            value = _evaluate(spec, env)
            checks.append(Check("==", size, value, [
                _MISMATCH + f"Found inconsistency between dimension size {dim_name} (= ",
                size, f") and the specification '{spec}' (= ", value, ")." + using,
                *solved, _SHAPE_ERRORS]))
            return True
        if var_k == 1:
            value = rest
        else:
            value, remainder = floordiv(rest, var_k), mod(rest, var_k)
            checks.append(Check("==", remainder, 0, [
                _MISMATCH + "Division had remainder ", remainder,
                f" when computing the value of '{var}'." + using, *solved, _SHAPE_ERRORS]))
        env[var] = value
        solved.extend([f"'{var}' = ", value, f" from specification '{spec}' for dimension "
                       f"{dim_name} (= ", size, "), "])
        checks.append(Check(">=", value, 1, [
            _MISMATCH + f"Expected value >= 1 for dimension variable '{var}'." + using,
            *solved, _SHAPE_ERRORS]))
        return True

    while equations:
        left = [eq for eq in equations if not process(*eq)]
        if len(left) == len(equations):
            unsolved = set().union(*(spec.variables() for spec, _, _ in left)) - set(env)
            raise ValueError(
                f"Cannot solve for values of dimension variables {unsolved}. We can only "
                "solve linear uni-variate constraints." + using + " Unprocessed "
                "specifications: " + ", ".join(f"'{spec}' for dimension size {dim_name}"
                                               for spec, dim_name, _ in left) +
                f". Please see {_UNSOLVABLE} for more details.")
        equations = left
    if scope is not None:
        checks.extend(_constraint_checks(scope, env, using, solved))
    return Solution(dict(sorted(env.items())), synthetic, checks)


def _constraint_checks(scope, env, using, solved) -> list:
    """Checks of the scope's constraints (``b >= 4``, ``a == 2*b``) on the solved values."""
    out = []
    for c in scope._explicit_constraints:
        if not isinstance(c.diff, DimExpr) or not c.diff.variables() <= set(env):
            continue
        value = _evaluate(c.diff, env)
        relation = "equal" if c.cmp == "==" else "greater or equal"
        out.append(Check(c.cmp, value, 0, [
            f"Input shapes do not match the symbolic shape constraint {c.text}. Expected "
            f"'{c.diff}' to be {relation} to 0, but found ", value, ". " + using,
            *solved, _SHAPE_ERRORS]))
    return out
