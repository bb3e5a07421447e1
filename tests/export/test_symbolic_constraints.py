"""Symbolic dimensions with constraints between expressions (``a >= b``, ``4*d == a - m``),
bounds found by eliminating terms, the syntax's errors and JAX's printed order."""
import math
import re

import numpy as np
import pytest

import plax
from plax import export
from plax.core.symbolic_decide import bounds as dim_bounds
from plax.errors import InconclusiveDimensionOperation

INF = math.inf


# Each case: constraints, the shape parsed under them, the expression (of those dimensions)
# and its bounds, worked out by hand.
@pytest.mark.parametrize("constraints, names, expr, bounds", [
    ((), "a", lambda a: 5 * a - 2, (3, INF)),
    ((), "a, b", lambda a, b: 2 * a - 3 * b, (-INF, INF)),
    ((), "a", lambda a: a - 2 * (a // 2), (0, 1)),
    ((), "a", lambda a: 11 // (a + 1), (0, 5)),
    ((), "a", lambda a: (a + 1) % -2, (-1, 0)),
    ((), "a, b", lambda a, b: plax.core.max_dim(a, b) - a, (0, INF)),
    (("a >= 5", "a <= 10"), "a", lambda a: a, (5, 10)),
    (("a >= b",), "a, b", lambda a, b: a - b, (0, INF)),
    (("a1 >= a2", "a2 >= a3"), "a1, a3", lambda a1, a3: a1 - a3, (0, INF)),
    (("2 * a >= 5", "3 * a <= 10"), "a", lambda a: 5 * a - 2, (13, 13)),  # a == 3
    (("a + 2 <= b", "b <= a + 5"), "a, b", lambda a, b: b - a, (2, 5)),
    (("4 * a == b",), "a, b", lambda a, b: b - 3 * a, (1, INF)),
    (("b == a + 1",), "a, b", lambda a, b: b - a, (1, 1)),
    (("mod(b, 4) == 0",), "b", lambda b: b - 4 * (b // 4), (0, 0)),
    (("max(a, b) == 5", "min(a, b) == 3"), "a", lambda a: a, (3, 5)),
])
def test_bounds_under_constraints(constraints, names, expr, bounds):
    dims = export.symbolic_shape(names, constraints=constraints)
    assert dim_bounds(expr(*dims)) == bounds


def test_an_equality_rewrites_its_left_side_where_expressions_are_built():
    a, b, c, d = export.symbolic_shape("a, b, c, d",
                                       constraints=("b == a", "c == a + b", "d == 5"))
    assert (str(b), str(c), d) == ("a", "2*a", 5)
    s, = export.symbolic_shape("s", constraints=["mod(s, 8) == 0"])
    assert 8 * (s // 8) == s and s >= s // 8


@pytest.mark.parametrize("constraints, match", [
    ("a >= 4", "The symbolic constraints should be a sequence of strings"),
    (("a != 0",), "Constraint parsing error: must contain one of '==' or '>=' or '<='"),
    (("a == a + 1",), re.escape("Unsatisfiable explicit constraint: a == a + 1")),
    (("a <= 0",), "Unsatisfiable constraint: a <= 0"),
    (("a >= b + 5", "a <= b + 4"), "Unsatisfiable constraint"),
    (("a + b == 3",), "The left-hand-side must be of the form `term \\* coefficient`"),
])
def test_bad_constraints_raise(constraints, match):
    with pytest.raises(ValueError, match=match):
        a, b = export.symbolic_shape("a, b", constraints=constraints)
        a >= b


def test_an_inconclusive_comparison_names_the_constraints():
    a, = export.symbolic_shape("a", constraints=("a >= 5",))
    with pytest.raises(InconclusiveDimensionOperation,
                       match=re.compile("'a' >= '6' is inconclusive.*with constraints.*a >= 5",
                                        re.DOTALL)):
        a >= 6
    with pytest.raises(InconclusiveDimensionOperation, match="Possible division by 0"):
        (a // (a - 6)).bounds()


@pytest.mark.parametrize("text", [
    "- a*b^2 - 2*a^2*b", "b - a", "- b + a", "a*floordiv(b, 8)*mod(b, 4)",
    "mod(a, 4) + floordiv(a, 4) + a", "floordiv(a, - 2)", "a^2 + 3*a - 1", "- mod(a, 4) + 3",
])
def test_expressions_print_in_jax_order_and_parse_back(text):
    e, = export.symbolic_shape(text)
    assert str(e) == text


@pytest.mark.parametrize("spec, like, match", [
    ("a + a a", None, "expecting ','"), ("a ^ a", None, "integer power"),
    ("mod(a)", None, "expecting ','"), ("2.5", None, "unexpected character"),
    ("_", None, "no 'like' shape was given"), ("b, ...", None, "no 'like' shape was given"),
    ("3", (4,), "different size 3 for known dimension"),
    ("b, 6, c, _", (4, 6, 7), "we parsed 3 already and 'like' shape has only 3 dimensions"),
    ("..., 3", (2, 3), "expecting the end after '...'"),
])
def test_syntax_errors(spec, like, match):
    with pytest.raises(ValueError, match="syntax error in symbolic shape .*" + match):
        export.symbolic_shape(spec, like=like)


def test_placeholders_take_the_sizes_of_like():
    assert export.symbolic_shape("2, _", like=(2, 3)) == (2, 3)
    assert export.symbolic_shape("...", like=(2, 3)) == (2, 3)
    assert export.symbolic_shape(" ( 2 , 3 ) ") == (2, 3)
    assert export.symbolic_shape("+ 2") == (2,)


def test_divmod_by_a_negative_constant_is_exported_with_floor_semantics():
    b, = export.symbolic_shape("b")
    assert (str(b // -2), str(b % -2)) == ("floordiv(b, - 2)", "mod(b, - 2)")
    assert divmod(0, b) == (0, 0)

    def f(x):
        n = x.shape[0]
        return plax.numpy.stack([plax.numpy.asarray(d) for d in (n // -2, n % -2, (n - 7) // 3)])
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((b,), np.float32))
    for n in (1, 4, 5):
        np.testing.assert_array_equal(exp.call(np.zeros(n, np.float32)),
                                      [n // -2, n % -2, (n - 7) // 3])


def test_a_constraint_between_variables_is_checked_at_call():
    a, b = export.symbolic_shape("a, b", constraints=("a >= b",))
    exp = export.export(plax.jit(lambda x, y: x.sum() + y.sum()))(
        plax.ShapeDtypeStruct((a,), np.float32), plax.ShapeDtypeStruct((b,), np.float32))
    assert exp.call(np.ones(3, np.float32), np.ones(2, np.float32)) == 5
    with pytest.raises(ValueError, match=re.escape(
            "symbolic shape constraint a >= b. Expected '- b + a' to be greater or equal to 0, "
            "but found -1")):
        exp.call(np.ones(2, np.float32), np.ones(3, np.float32))


def test_an_equality_constraint_is_checked_at_call():
    a, = export.symbolic_shape("a", constraints=("mod(a, 2) == 0",))
    exp = export.export(plax.jit(lambda x: x.reshape((a // 2, 2))))(
        plax.ShapeDtypeStruct((a,), np.float32))
    assert exp.call(np.ones(6, np.float32)).shape == (3, 2)
    with pytest.raises(ValueError, match=re.escape(
            # (mod(a, 2) == 0 also stands for 2*floordiv(a, 2) == a, checked first)
            "symbolic shape constraint 2*floordiv(a, 2) == a. Expected '2*floordiv(a, 2) - a' "
            "to be equal to 0, but found -1")):
        exp.call(np.ones(5, np.float32))
