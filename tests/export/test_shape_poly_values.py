"""Symbolic dimensions used as values under a polymorphic export: returned from a function,
combined with floats, NumPy values and arrays, divided with ``/`` and raised to powers."""
import operator

import numpy as np
import pytest

import plax
from plax import export
from plax.errors import InconclusiveDimensionOperation
from plax.higher_order.run_state import run_state

B, = export.symbolic_shape("b")


def _run(f, n=3):
    """``f(x)`` exported for ``x: i32[b]`` and called with ``b = n``; with the output."""
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((B,), np.int32))
    return exp.call(np.arange(n, dtype=np.int32))


@pytest.mark.parametrize("f, expected", [
    (lambda x: x.shape[0], 3),
    (lambda x: 2 * x.shape[0] + 1, 7),
    (lambda x: (x.shape[0], x.shape[0] ** 2), (3, 9)),
])
def test_a_returned_dimension_is_its_value(f, expected):
    np.testing.assert_array_equal(_run(f), expected)


OPS = [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
       operator.truediv]
OTHERS = [2.0, np.float32(2), np.array(2.0, np.float32), np.arange(1.0, 5.0, dtype=np.float32),
          np.arange(1, 5, dtype=np.int32), 2, np.int32(2), np.array(2, np.int32)]


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("other", OTHERS, ids=repr)
@pytest.mark.parametrize("swap", [False, True])
def test_dimension_with_other_operands_matches_numpy(op, other, swap):
    def f(x):
        d = 2 * x.shape[0]
        return op(other, d) if swap else op(d, other)
    d = 6
    expected = op(other, d) if swap else op(d, other)
    got = _run(f)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)
    assert np.shape(got) == np.shape(expected)


def test_operations_with_integers_stay_dimensions():
    assert str(B + np.int32(2)) == "b + 2" and str(np.int32(2) * B) == "2*b"
    assert str(B ** 3) == "b^3" and B ** 0 == 1


@pytest.mark.parametrize("f, expected", [
    (lambda x: 2 ** x.shape[0], 8), (lambda x: x.shape[0] ** x.shape[0], 27),
    (lambda x: x.shape[0] / 2, 1.5), (lambda x: 6 / x.shape[0], 2.0),
])
def test_powers_and_true_division_give_values(f, expected):
    np.testing.assert_allclose(_run(f), expected)


@pytest.mark.parametrize("power, match", [
    (-2, "cannot be raised to negative powers: 'b' \\*\\* '-2'"),
    (1.5, "cannot be raised to non-integer powers: 'b' \\*\\* '1.5'"),
])
def test_bad_powers_raise(power, match):
    with pytest.raises(ValueError, match=match):
        B ** power


def test_a_dimension_as_a_value_outside_export_raises():
    with pytest.raises(NotImplementedError, match="outside a shape-polymorphic export"):
        B + 2.0


def test_integer_numpy_operands_keep_dimensions():
    two = np.array(2, np.int32)
    assert str(two % B) == "mod(2, b)" and str(B // two) == "floordiv(b, 2)"
    assert tuple(map(str, divmod(two, B))) == ("floordiv(2, b)", "mod(2, b)")


def test_an_array_of_a_symbolic_shape():
    f = lambda x: plax.numpy.array([x.shape[0], 2.5])  # noqa: E731
    np.testing.assert_array_equal(_run(f, n=4), [4.0, 2.5])
    np.testing.assert_array_equal(_run(lambda x: plax.numpy.sum(plax.numpy.array(x.shape))), 3)


def test_a_polymorphic_function_without_results():
    a, = export.symbolic_shape("a", constraints=["a >= 8"])

    def f(x):
        assert x.shape[0] >= 6  # decided from the constraint
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((a,), np.int32))
    assert exp.out_avals == () and exp.call(np.zeros(9, np.int32)) is None
    with pytest.raises(ValueError, match="symbolic shape constraint a >= 8"):
        exp.call(np.zeros(7, np.int32))


def test_the_value_of_a_dimension_is_weakly_typed():
    def f(x):
        assert plax.numpy.array(x.shape[0]).aval.weak_type
        assert (x.shape[0] + 1.5).aval.weak_type
        return x
    _run(f)


@pytest.mark.parametrize("slc", [np.s_[:], np.s_[-3:], np.s_[1:-1]], ids=str)
def test_reference_slices_of_a_symbolic_axis(slc):
    def body(ref):
        ref[slc] = ref[slc] * 2 + 1
    f = run_state(body)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((B,), np.float32))
    for n in (3, 7):
        x = np.arange(n, dtype=np.float32)
        want = x.copy()
        want[slc] = want[slc] * 2 + 1
        np.testing.assert_array_equal(exp.call(x), want)


@pytest.mark.parametrize("shape, new, expected", [
    ((2 * B,), (2, -1), (2, B)), ((B, 3), (-1,), (3 * B,)), ((B, 4), (B, 2, -1), (B, 2, 2)),
    ((2 * B + 2,), (-1, 2), (B + 1, 2)),
])
def test_reshape_with_minus_one_of_symbolic_shapes(shape, new, expected):
    out = plax.eval_shape(lambda x: x.reshape(new), plax.ShapeDtypeStruct(shape, np.float32))
    assert out.shape == expected


def test_reshape_with_minus_one_that_may_not_divide_raises():
    with pytest.raises(TypeError, match=r"product of specified axis sizes \(2\) does not "
                                        "evenly divide b"):
        plax.eval_shape(lambda x: x.reshape(2, -1), plax.ShapeDtypeStruct((B,), np.float32))
