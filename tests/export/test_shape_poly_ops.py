"""NumPy operations on symbolic shapes under plax.export: slices whose bounds and steps are
dimension expressions, compared with NumPy for several sizes of the exported function."""
import numpy as np
import pytest

import plax
from plax import export
from plax.core.symbolic_shapes import max_dim, min_dim
from plax.errors import InconclusiveDimensionOperation

C, B = export.symbolic_shape("c, b")
SIZES = [(16, 8), (5, 3), (1, 1), (9, 4)]


def _check(f, *, spec="c, b", sizes=SIZES, dtype=np.float32):
    """``f`` exported once for the shape ``spec`` agrees with ``f`` on NumPy arrays."""
    shape = export.symbolic_shape(spec, scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, dtype))
    for size in sizes:
        x = np.arange(np.prod(size), dtype=dtype).reshape(size)
        np.testing.assert_array_equal(exp.call(x), f(x))


# (start, stop, step) as functions of the size b of the second axis; the slice is of the
# first axis (size c), so bounds fall inside, beyond and before it
_BOUNDS = {
    "None": lambda b: None, "0": lambda b: 0, "2": lambda b: 2, "b": lambda b: b,
    "2b+2": lambda b: 2 * b + 2, "-2": lambda b: -2, "-b": lambda b: -b,
    "-2b-2": lambda b: -2 * b - 2, "1": lambda b: 1, "-1": lambda b: -1,
}
_SLICES = [
    ("-b", "None", "None"), ("b", "None", "None"), ("None", "-b", "None"),
    ("2", "2b+2", "2"), ("None", "None", "b"), ("-2b-2", "2b+2", "b"),
    ("None", "None", "-1"), ("-2", "None", "-2"), ("b", "-2b-2", "-b"),
    ("2b+2", "0", "-1"), ("-b", "2", "-b"), ("0", "b", "-1"), ("2b+2", "-2", "1"),
    ("-2b-2", "-b", "2"), ("None", "-2b-2", "-2"),
]


@pytest.mark.parametrize("start, stop, step", _SLICES)
def test_slices_with_symbolic_bounds_and_steps(start, stop, step):
    lo, hi, st = _BOUNDS[start], _BOUNDS[stop], _BOUNDS[step]
    _check(lambda x: x[lo(x.shape[1]):hi(x.shape[1]):st(x.shape[1])])


def test_symbolic_bounds_on_a_constant_axis_and_several_axes():
    _check(lambda x: x[:x.shape[0] - 1, ::-x.shape[0]], spec="b, 5",
           sizes=[(1, 5), (3, 5), (7, 5)])


@pytest.mark.parametrize("index, error, match", [
    (lambda b: slice(None, None, 0 * b), ValueError, "slice step cannot be zero"),
    (lambda b: slice(b - 3, None), InconclusiveDimensionOperation,
     "Cannot determine the sign of the slice start"),
    (lambda b: slice(None, 4 - b, -1), InconclusiveDimensionOperation,
     "Cannot determine the sign of the slice stop"),
    (lambda b: slice(None, None, b - 2), InconclusiveDimensionOperation,
     "Cannot determine the sign of the slice step"),
])
def test_slices_with_undecidable_or_zero_steps_raise(index, error, match):
    spec = plax.ShapeDtypeStruct((C, B), np.float32)
    with pytest.raises(error, match=match):
        export.export(plax.jit(lambda x: x[index(x.shape[1])]))(spec)


@pytest.mark.parametrize("expr, value", [
    (lambda: max_dim(min_dim(B, C), min_dim(2, C)) <= C, True),
    (lambda: min_dim(C, 2) + max_dim(0, min_dim(C, B) - min_dim(C, 2)) <= C, True),
    (lambda: (max_dim(0, min_dim(C, B) - min_dim(C, 2)) + B - 1) // B >= 0, True),
    (lambda: max_dim(0, C - B) + max_dim(0, min_dim(C, 2 * B) - max_dim(0, C - B)) > C, False),
])
def test_comparisons_through_nested_min_and_max(expr, value):
    assert expr() is value


@pytest.mark.parametrize("index", [
    lambda x: x[1], lambda x: x[-2], lambda x: x[5], lambda x: x[np.array([0, -1, 1])],
    lambda x: x[plax.numpy.arange(x.shape[0])[::-1] - 1],
])
def test_integer_and_array_indices_on_a_symbolic_axis(index):
    # out-of-bounds indices clamp, as in JAX (NumPy would raise), so the reference clamps
    def ref(x):
        return index(np.concatenate([x, np.repeat(x[-1:], 8, 0)]) if x.shape[0] < 6 else x)
    shape = export.symbolic_shape("b, 3", scope=C.scope)
    exp = export.export(plax.jit(index))(plax.ShapeDtypeStruct(shape, np.float32))
    for n in (1, 2, 7):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        got = exp.call(x)
        np.testing.assert_array_equal(got, plax.jit(index)(x))
        if n == 7:
            np.testing.assert_array_equal(got, ref(x))


# arange(start, stop, step) with dimension expressions of b (the size of the argument)
@pytest.mark.parametrize("args", [
    lambda b: (b,), lambda b: (0, b + 1), lambda b: (0, 5 * b + 1, 2), lambda b: (b, 5 * b + 2, 2),
    lambda b: (0, b - 3, 2), lambda b: (0, -b, 2), lambda b: (b, 0, -1), lambda b: (b, -1, -1),
    lambda b: (5 * b + 1, 0, -2), lambda b: (b - 3, 0, -2), lambda b: (0, 10, b),
    lambda b: (0, 0, b), lambda b: (10, 0, -b), lambda b: (b, 1, -b),
])
def test_arange_with_symbolic_arguments(args):
    shape = export.symbolic_shape("b", scope=C.scope)
    f = lambda x: plax.numpy.arange(*args(x.shape[0]))  # noqa: E731
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for n in (1, 2, 3, 6):
        got = exp.call(np.zeros(n, np.float32))
        np.testing.assert_array_equal(got, np.arange(*args(n)))
        assert got.dtype == np.int32


def test_arange_with_symbolic_arguments_as_floats():
    shape = export.symbolic_shape("b", scope=C.scope)
    f = lambda x: plax.numpy.arange(1, 2 * x.shape[0], 3, np.float32)  # noqa: E731
    got = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32)).call(np.zeros(5))
    np.testing.assert_array_equal(got, np.arange(1, 10, 3, np.float32))
    assert got.dtype == np.float32


@pytest.mark.parametrize("args, error, match", [
    (lambda b: (0., b), ValueError, "must be either dimension expressions or integers"),
    (lambda b: (0, b, 0.5), ValueError, "must be either dimension expressions or integers"),
    (lambda b: (0, b, 0), ValueError, "has step == 0"),
    (lambda b: (0, b, b - 2), InconclusiveDimensionOperation,
     "must be resolved statically if it is > 0 or < 0"),
])
def test_arange_with_symbolic_arguments_raises(args, error, match):
    shape = export.symbolic_shape("b", scope=C.scope)
    with pytest.raises(error, match=match):
        export.export(plax.jit(lambda x: plax.numpy.arange(*args(x.shape[0]))))(
            plax.ShapeDtypeStruct(shape, np.float32))


# einsum with symbolic sizes: (subscripts, operand shape specs, NumPy shapes for b = 1, 3)
@pytest.mark.parametrize("subscripts, specs", [
    ("...i->...", ["b, 4"]), ("...ij,...jk->...ik", ["b, 4, 5", "b, 5, 6"]),
    ("ij,jk->ik", ["3, b", "b, 5"]), ("ab,bc,cd->ad", ["b, 2", "2, 3", "3, 4"]),
    ("ii->i", ["b, b"]), ("ij,ij->j", ["b, 2", "1, 2"]),
])
def test_einsum_with_symbolic_sizes(subscripts, specs):
    shapes = [export.symbolic_shape(s, scope=C.scope) for s in specs]
    f = lambda *xs: plax.numpy.einsum(subscripts, *xs)  # noqa: E731
    exp = export.export(plax.jit(f))(*[plax.ShapeDtypeStruct(s, np.float32) for s in shapes])
    rng = np.random.RandomState(0)
    for n in (1, 3):
        xs = [rng.randn(*[n if d == "b" else int(d) for d in s.split(", ")]).astype(np.float32)
              for s in specs]
        np.testing.assert_allclose(exp.call(*xs), np.einsum(subscripts, *xs), rtol=1e-5,
                                   atol=1e-5)


def test_einsum_contracting_unequal_symbolic_sizes_raises():
    x, y = export.symbolic_shape("2, b0", scope=C.scope), export.symbolic_shape("2, b1",
                                                                                scope=C.scope)
    with pytest.raises(AssertionError, match="Incompatible reduction dimensions"):
        export.export(plax.jit(lambda a, b: plax.numpy.einsum("ab,cb->ac", a, b)))(
            plax.ShapeDtypeStruct(x, np.float32), plax.ShapeDtypeStruct(y, np.float32))


@pytest.mark.parametrize("f, ref", [
    (lambda x: plax.lax.index_in_dim(x, -1, axis=0, keepdims=False), lambda x: x[-1]),
    (lambda x: plax.lax.index_in_dim(x, x.shape[0] - 1, axis=0), lambda x: x[-1:]),
    (lambda x: plax.lax.slice_in_dim(x, 0, x.shape[0] - 1), lambda x: x[:-1]),
    (lambda x: plax.lax.slice_in_dim(x, 1, None, 2), lambda x: x[1::2]),
    (lambda x: plax.lax.dynamic_slice_in_dim(x, 0, x.shape[0], axis=0), lambda x: x),
    (lambda x: plax.numpy.average(x), np.average),
    (lambda x: plax.numpy.average(x, axis=0), lambda x: np.average(x, axis=0)),
])
def test_lax_slices_and_average_with_symbolic_sizes(f, ref):
    shape = export.symbolic_shape("b, 3", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for n in (1, 2, 5):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(exp.call(x), ref(x), rtol=1e-6)


def test_eigh_of_one_matrix_of_symbolic_size():
    # one matrix: the custom call's batch shape is empty, its sizes symbolic
    shape = export.symbolic_shape("n, n", scope=C.scope)
    exp = export.export(plax.jit(lambda a: plax.numpy.linalg.eigvalsh(a)))(
        plax.ShapeDtypeStruct(shape, np.float32))
    for n in (1, 3, 4):
        a = np.random.RandomState(n).randn(n, n).astype(np.float32)
        a = a + a.T
        np.testing.assert_allclose(exp.call(a), np.linalg.eigvalsh(a), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["promise_in_bounds", "clip", "fill"])
def test_gather_with_symbolic_slice_sizes(mode):
    # each window is a whole row of the (3, b) operand: its slice size is symbolic
    dn = plax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                         start_index_map=(0, 1))
    starts = np.array([[2, 0], [0, 0], [1, 0]], np.int32)

    def f(x):
        return plax.lax.gather(x, starts, dn, slice_sizes=(1, x.shape[1]), mode=mode)
    shape = export.symbolic_shape("3, b", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for n in (1, 4):
        x = np.arange(3 * n, dtype=np.float32).reshape(3, n)
        np.testing.assert_array_equal(exp.call(x), x[[2, 0, 1]])


@pytest.mark.parametrize("method, out", [
    ("nearest", lambda s: (2 * s[0], s[1] + 1)), ("linear", lambda s: (2 * s[0], s[1])),
    ("linear", lambda s: (6, 5)), ("cubic", lambda s: (s[0], 2 * s[1] - 1)),
])
def test_image_resize_to_symbolic_sizes(method, out):
    # the exported resize agrees with the resize of each concrete image
    f = lambda x: plax.image.resize(x, out(x.shape), method)  # noqa: E731
    shape = export.symbolic_shape("c, b", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for size in [(2, 3), (5, 4), (1, 1)]:
        x = np.random.RandomState(size[0]).rand(*size).astype(np.float32)
        np.testing.assert_allclose(exp.call(x), f(x), rtol=1e-5, atol=1e-6)
        if method == "nearest":  # output j takes input floor((j + 0.5) * m / n)
            rows = ((np.arange(2 * size[0]) + 0.5) * size[0] / (2 * size[0])).astype(int)
            cols = ((np.arange(size[1] + 1) + 0.5) * size[1] / (size[1] + 1)).astype(int)
            np.testing.assert_array_equal(exp.call(x), x[rows][:, cols])


def test_take_clips_indices_on_a_symbolic_axis():
    f = lambda x: plax.numpy.take(x, np.array([0, 5, -1, 2]), axis=0, mode="clip")  # noqa
    _check(f, sizes=[(3, 2), (8, 1), (1, 3)])


def _np_conv1d_same(x, w, stride):
    """NumPy reference: a 'SAME' 1-D convolution (cross-correlation), x (N, W, I), w (K, I, O)."""
    n, size, _ = x.shape
    k = w.shape[0]
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    xp = np.pad(x, ((0, 0), (total // 2, total - total // 2), (0, 0)))
    return np.stack([np.einsum("nki,kio->no", xp[:, j * stride:j * stride + k], w)
                     for j in range(out)], axis=1)


@pytest.mark.parametrize("spec, stride", [("1, b, 3", 1), ("1, b, 3", 2), ("b, 5, 3", 2),
                                          ("c, b, 3", 3)])
def test_conv_with_same_padding_of_symbolic_sizes(spec, stride):
    w = np.random.RandomState(0).randn(4, 3, 2).astype(np.float32)

    def f(x):
        return plax.lax.conv_general_dilated(x, w, (stride,), "SAME",
                                             dimension_numbers=("NWC", "WIO", "NWC"))
    shape = export.symbolic_shape(spec, scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for b in (1, 4, 7):
        size = [b if d == "b" else 2 if d == "c" else int(d) for d in spec.split(", ")]
        x = np.random.RandomState(b).randn(*size).astype(np.float32)
        np.testing.assert_allclose(exp.call(x), _np_conv1d_same(x, w, stride), rtol=1e-4,
                                   atol=1e-4)


def test_conv_transpose_of_a_symbolic_size():
    w = np.random.RandomState(0).randn(4, 3, 2).astype(np.float32)
    f = lambda x: plax.lax.conv_transpose(x, w, (2,), "SAME")  # noqa: E731
    shape = export.symbolic_shape("2, b, 3", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for b in (1, 5):
        x = np.random.RandomState(b).randn(2, b, 3).astype(np.float32)
        got = exp.call(x)
        assert got.shape == (2, 2 * b, 2)
        np.testing.assert_allclose(got, f(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("f, ref", [
    (lambda x: plax.numpy.tril(x, k=x.shape[1] - 3), lambda x: np.tril(x, k=x.shape[1] - 3)),
    (lambda x: plax.numpy.triu(x, k=-x.shape[0]), lambda x: np.triu(x, k=-x.shape[0])),
    (lambda x: plax.numpy.tri(x.shape[0], x.shape[1], k=1 - x.shape[0]) * x,
     lambda x: np.tri(*x.shape, k=1 - x.shape[0]) * x),
])
def test_triangles_with_symbolic_diagonals(f, ref):
    shape = export.symbolic_shape("c, b", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for size in [(3, 4), (1, 1), (5, 2)]:
        x = np.arange(1, 1 + np.prod(size), dtype=np.float32).reshape(size)
        np.testing.assert_array_equal(exp.call(x), ref(x))


@pytest.mark.parametrize("f, ref", [
    (lambda x: plax.numpy.split(x, (2,)), lambda x: np.split(x, (2,))),
    (lambda x: plax.numpy.split(x, (x.shape[0] - 2, x.shape[0] + 3)),
     lambda x: np.split(x, (x.shape[0] - 2, x.shape[0] + 3))),
    (lambda x: plax.numpy.array_split(x, (-x.shape[0] // 2 - 1, 1)),
     lambda x: np.array_split(x, (-x.shape[0] // 2 - 1, 1))),
])
def test_split_at_symbolic_indices(f, ref):
    shape = export.symbolic_shape("b + 2", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for n in (3, 4, 8):
        x = np.arange(n, dtype=np.float32)
        for got, want in zip(exp.call(x), ref(x), strict=True):
            np.testing.assert_array_equal(got, want)


def test_split_into_symbolic_sections_raises():
    shape = export.symbolic_shape("b", scope=C.scope)
    with pytest.raises(ValueError, match="symbolic number of sections is not supported"):
        export.export(plax.jit(lambda x: plax.numpy.split(x, x.shape[0] // 2)))(
            plax.ShapeDtypeStruct(shape, np.float32))
    with pytest.raises(ValueError, match="give the split indices instead"):
        export.export(plax.jit(lambda x: plax.numpy.array_split(x, 2)))(
            plax.ShapeDtypeStruct(shape, np.float32))


@pytest.mark.parametrize("axis", [0, 1, None])
def test_repeat_a_symbolic_number_of_times(axis):
    f = lambda x: plax.numpy.repeat(x, x.shape[0], axis=axis)  # noqa: E731
    shape = export.symbolic_shape("b, 2", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for n in (1, 3):
        x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        np.testing.assert_array_equal(exp.call(x), np.repeat(x, n, axis=axis))
    with pytest.raises(ValueError, match="non-constant `repeats` is supported only"):
        export.export(plax.jit(lambda x: plax.numpy.repeat(x, x.shape[0],
                                                           total_repeat_length=8)))(
            plax.ShapeDtypeStruct(shape, np.float32))


def test_linspace_with_a_symbolic_number_of_samples():
    b, = export.symbolic_shape("b", constraints=("b >= 2",))
    f = lambda x: plax.numpy.linspace(0, 100, x.shape[0], retstep=True)  # noqa: E731
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((b,), np.float32))
    for n in (2, 7):
        got, step = exp.call(np.zeros(n, np.float32))
        want, want_step = np.linspace(0, 100, n, retstep=True)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(step, want_step, rtol=1e-6)
    with pytest.raises(InconclusiveDimensionOperation, match="inconclusive"):
        export.export(plax.jit(lambda x: plax.numpy.linspace(0, 1, x.shape[0])))(
            plax.ShapeDtypeStruct((B,), np.float32))


@pytest.mark.parametrize("mode, kwargs, widths", [
    ("constant", {"constant_values": 7}, lambda b: [[b, 0], [b - 1, 1]]),
    ("edge", {}, lambda b: [[b, 1], [2, b]]), ("wrap", {}, lambda b: [[b, 0], [1, 6]]),
    ("maximum", {}, lambda b: [[b, 0], [b, 1]]),
    ("mean", {"stat_length": ((1, 2), (2, 2))}, lambda b: [[b, 0], [1, 1]]),
    ("linear_ramp", {"end_values": 3}, lambda b: [[b, 2], [0, b]]),
    ("symmetric", {}, lambda b: [[b, 0], [3, 1]]),
])
def test_pad_by_symbolic_widths(mode, kwargs, widths):
    f = lambda x: plax.numpy.pad(x, widths(x.shape[0]), mode=mode, **kwargs)  # noqa: E731
    shape = export.symbolic_shape("b, 5", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    for n in (1, 3):
        x = np.arange(5 * n, dtype=np.float32).reshape(n, 5) ** 1.5
        np.testing.assert_allclose(exp.call(x), np.pad(x, widths(n), mode=mode, **kwargs),
                                   rtol=1e-5)


def test_pad_with_symbolic_stat_length_and_undecidable_reflection():
    shape = export.symbolic_shape("b, 5", scope=C.scope)
    f = lambda x: plax.numpy.pad(x, [[x.shape[0], 0], [2, 2]], mode="maximum",  # noqa: E731
                                 stat_length=((x.shape[0] // 2 + 1, 2), (2, 2)))
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.float32))
    x = np.random.RandomState(0).rand(4, 5).astype(np.float32)
    np.testing.assert_array_equal(exp.call(x), np.pad(x, [[4, 0], [2, 2]], mode="maximum",
                                                      stat_length=((3, 2), (2, 2))))
    with pytest.raises(ValueError, match="Shape polymorphism is supported for jnp.pad"):
        export.export(plax.jit(lambda x: plax.numpy.pad(x, [[x.shape[0] - 1, 0], [0, 0]],
                                                        mode="reflect")))(
            plax.ShapeDtypeStruct(shape, np.float32))


def test_one_hot_with_a_symbolic_number_of_classes():
    f = lambda x: plax.nn.one_hot(x, x.shape[0] + 1, axis=0)  # noqa: E731
    shape = export.symbolic_shape("b", scope=C.scope)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct(shape, np.int32))
    for n in (1, 4):
        x = (np.arange(n, dtype=np.int32) * 3) % (n + 2) - 1
        np.testing.assert_array_equal(exp.call(x), np.eye(n + 2)[x + 1].T[1:])


def test_squeeze_of_symbolic_shapes():
    shape = export.symbolic_shape("b, 1", scope=C.scope)
    exp = export.export(plax.jit(lambda x: plax.numpy.squeeze(x, 1)))(
        plax.ShapeDtypeStruct(shape, np.float32))
    np.testing.assert_array_equal(exp.call(np.ones((3, 1), np.float32)), np.ones(3))
    with pytest.raises(ValueError, match="jnp.squeeze with axis=None is not supported"):
        export.export(plax.jit(plax.numpy.squeeze))(plax.ShapeDtypeStruct(shape, np.float32))
