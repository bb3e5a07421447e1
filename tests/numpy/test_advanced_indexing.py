"""Advanced indexing (integer arrays, boolean masks) as one gather, x.at[idx] updates as one
scatter, take and take_along_axis: values against NumPy, out-of-bounds modes, dtypes,
jaxprs, gradients and vmap."""
import warnings

import helpers
import numpy as np
import pytest

import plax
import plax.numpy as jnp
import plax.numpy.indexing as NI
from plax.test_util import check_grads

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
I2 = np.array([0, 1])
COL = np.array([[1], [2]])

GETITEM = {
    "1d": (I2,),
    "2d_array": (np.array([[0, 1], [1, 0], [1, 1]]),),
    "second_axis": (slice(None), np.array([2, 0, 2])),
    "list_in_tuple": ([0, 1], [1, 2]),
    "adjacent_broadcast": (slice(None), COL, I2),
    "separated": (I2, slice(None), I2),
    "separated_by_int": (slice(None), 1, slice(None), I2),
    "adjacent_int": (slice(None), 1, I2),
    "int_first": (1, slice(None), I2),
    "none_between": (I2, None, I2),
    "ellipsis_between": (I2, Ellipsis, I2),
    "none_then_adjacent": (None, I2, 1),
    "negative": (np.array([-1, -2]), slice(None), [0, -1]),
    "mask_1d": (np.array([True, False]),),
    "mask_mid": (slice(None), np.array([True, False, True]), I2),
    "mask_2d": (np.array([[True, False, True], [False, True, True]]),),
    "mask_2d_mid": (slice(None), np.arange(12).reshape(3, 4) % 3 == 0),
    "mask_all_false": (np.zeros((2, 3), bool),),
    "slice_and_array": (slice(1, 2), slice(1, 3), [1, 3]),
    "strided_slice": (slice(None, None, 2), [0, 2], slice(1, 4)),
    "reversed_slice": (slice(None), [2, 0], slice(3, 0, -2)),
    "reversed_first": (slice(None, None, -1), I2),
    "zero_d_arrays": (np.array(1), slice(None), np.array(2)),
    "zero_d_with_array": (np.array(1), np.array([0, 2])),
    "empty": (np.zeros((0,), int), slice(1, 3)),
    "empty_2d": (np.zeros((0, 3), int),),
    "true": (True,),
    "false": (False,),
    "true_with_array": (True, slice(None), I2),
    "ellipsis_true": (Ellipsis, True),
    "ellipsis_array": (Ellipsis, np.array([4, 0])),
}


def _np(x):
    return np.asarray(x)


@pytest.mark.parametrize("idx", list(GETITEM.values()), ids=list(GETITEM))
def test_getitem_matches_numpy(idx):
    out = jnp.asarray(A)[idx]
    want = A[idx]
    assert out.shape == want.shape and out.dtype == want.dtype
    np.testing.assert_array_equal(_np(out), want)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.uint8, helpers.BF16])
def test_getitem_dtypes(dtype):
    a = helpers.sample((3, 4), dtype)
    helpers.check(jnp.asarray(a)[[2, 0, 2], 1:], a[[2, 0, 2], 1:], dtype)
    helpers.check(jnp.asarray(a)[a.astype(np.float32) > 0], a[a.astype(np.float32) > 0], dtype)


def test_index_array_kinds():
    x = jnp.asarray(A)
    want = A[:, [2, 0]]
    for idx in ([2, 0], np.array([2, 0], np.int64), np.array([2, 0], np.uint8),
                jnp.array([2, 0]), jnp.array([2, 0], jnp.int8)):
        np.testing.assert_array_equal(_np(x[:, idx]), want)
    np.testing.assert_array_equal(_np(x[jnp.array(True)]), A[None])
    np.testing.assert_array_equal(_np(x[jnp.array([True, False])]), A[[True, False]])


def test_weak_type_kept():
    x = jnp.asarray(2.0) + jnp.zeros(3)  # not weak
    w = plax.lax.broadcast_in_dim(1.0, (3,), ())
    assert not x[jnp.array([0, 1])].aval.weak_type
    assert w[jnp.array([0, 1])].aval.weak_type


TRACED = [
    ("rows", lambda x, i: x[i]),
    ("slice_then_array", lambda x, i: x[1:, i]),
    ("separated", lambda x, i: x[i, :, i]),
    ("with_scalar", lambda x, i: x[i, 2, 1:]),
    ("strided", lambda x, i: x[::-2, i]),
]


@pytest.mark.parametrize("f", [f for _, f in TRACED], ids=[n for n, _ in TRACED])
def test_traced_indices_under_jit(f):
    a = A[0, :, :3]  # (3, 3)
    for idx in (np.array([0, 2, -1]), np.array([[1, -3]])):
        out = plax.jit(f)(a, idx)
        np.testing.assert_array_equal(_np(out), f(a, idx))


def test_traced_scalar_with_array():
    f = plax.jit(lambda x, i, j: x[i, :, j])
    np.testing.assert_array_equal(_np(f(A[0], np.int32(-1), np.array([1, 3]))), A[0][-1, :, [1, 3]])
    g = plax.jit(lambda x, i, j: x[[i, j], 1:])  # a list of traced scalars is an index array
    np.testing.assert_array_equal(_np(g(A[0, 0], 2, -1)), A[0, 0][[2, -1], 1:])


@pytest.mark.parametrize("idx", [np.array([3, 7, -3, -9]), np.array([5])])
def test_getitem_out_of_bounds_clamps(idx):
    a = np.arange(3.0, dtype=np.float32)
    clamped = a[np.clip(np.where(idx < 0, idx + 3, idx), 0, 2)]
    np.testing.assert_array_equal(_np(jnp.asarray(a)[idx]), clamped)
    np.testing.assert_array_equal(_np(plax.jit(lambda x, i: x[i])(a, idx)), clamped)
    np.testing.assert_array_equal(_np(jnp.asarray(a).at[idx].get()), clamped)


def test_at_get_modes():
    x = jnp.asarray(A[0, 0])  # (4, 5)
    idx = np.array([1, 9, -1, -9])
    got = x.at[idx].get(mode="fill", fill_value=-1.0)
    want = np.where((idx < 4)[:, None] & (idx >= -4)[:, None], A[0, 0][np.clip(idx, -4, 3)], -1)
    np.testing.assert_array_equal(_np(got), want)
    assert np.isnan(_np(x.at[9].get(mode="fill"))).all()
    np.testing.assert_array_equal(_np(x.at[9].get()), A[0, 0, 3])
    np.testing.assert_array_equal(_np(x.at[idx].get(mode="clip")), A[0, 0][[1, 3, 3, 0]])
    np.testing.assert_array_equal(_np(x.at[1:3, [0, 2]].get()), A[0, 0][1:3, [0, 2]])
    got = x.at[np.array([-1])].get(mode="fill", fill_value=0.0, wrap_negative_indices=False)
    np.testing.assert_array_equal(_np(got), np.zeros((1, 5)))


# --- .at updates ---------------------------------------------------------------------------
REPEATED = np.array([1, 3, 1, 0, 3, 3])
UPD = np.array([2.0, -1.0, 3.0, 0.5, 4.0, -2.0], np.float32)


def _reference(method, x, idx, y):
    x = x.copy()
    {"add": np.add, "multiply": np.multiply, "mul": np.multiply, "min": np.minimum,
     "max": np.maximum}[method].at(x, idx, y)
    return x


@pytest.mark.parametrize("method", ["add", "multiply", "mul", "min", "max"])
def test_at_combining_methods_with_repeated_indices(method):
    x = np.linspace(-2, 2, 5).astype(np.float32)
    out = getattr(jnp.asarray(x).at[REPEATED], method)(UPD)
    helpers.check(out, _reference(method, x, REPEATED, UPD), np.float32)


def test_at_set_repeated_indices_picks_one_update():
    x = np.zeros(5, np.float32)
    out = _np(jnp.asarray(x).at[REPEATED].set(UPD))
    for k in range(5):
        cands = UPD[REPEATED == k]
        assert out[k] in (cands if cands.size else [0.0])
    # unique indices: an exact permutation write
    perm = np.array([4, 0, 3])
    np.testing.assert_array_equal(_np(jnp.asarray(x).at[perm].set(UPD[:3], unique_indices=True)),
                                  np.array([-1, 0, 0, 3, 2], np.float32))


def test_at_subtract_divide_power():
    x = np.arange(1.0, 6.0, dtype=np.float32)
    helpers.check(jnp.asarray(x).at[REPEATED].subtract(UPD), _reference("add", x, REPEATED, -UPD),
                  np.float32)
    prod = _reference("multiply", np.ones(5, np.float32), REPEATED, UPD)
    helpers.check(jnp.asarray(x).at[REPEATED].divide(UPD), x / prod, np.float32)
    helpers.check(jnp.asarray(x).at[REPEATED].power(UPD), x ** prod, np.float32)
    xi = np.arange(6, dtype=np.int32)
    helpers.check(jnp.asarray(xi).at[np.array([1, 1, 3])].divide(2), [0, .25, 2, 1.5, 4, 5],
                  np.float32)
    helpers.check(jnp.asarray(xi).at[np.array([1, 2, 3])].power(2), [0, 1, 4, 9, 4, 5], np.int32)


def test_at_apply():
    x = np.arange(6, dtype=np.float32)
    idx = np.array([4, 1, 9])  # 9 is out of bounds: dropped
    helpers.check(jnp.asarray(x).at[idx].apply(jnp.negative), [0, -1, 2, 3, -4, 5], np.float32)
    helpers.check(jnp.asarray(x).at[1:3].apply(lambda v: v * v), [0, 1, 4, 3, 4, 5], np.float32)
    # repeated indices: func is applied once per occurrence (as JAX and NumPy's ufunc.at)
    helpers.check(jnp.asarray(x).at[np.array([2, 2, -4])].apply(lambda v: v + 1),
                  [0, 1, 5, 3, 4, 5], np.float32)
    helpers.check(jnp.asarray(x).at[plax.ds(1, 2)].apply(jnp.negative),
                  [0, -1, -2, 3, 4, 5], np.float32)
    with pytest.raises(TypeError, match="same shape and dtype"):
        jnp.asarray(np.arange(3)).at[1].apply(jnp.sqrt)


@pytest.mark.parametrize("idx", [
    (np.array([[0, 1], [1, 1]]), slice(None), np.array([2, 0])),
    (slice(None), np.array([True, False, True])),
    (slice(1, None), Ellipsis, np.array([-1, 0])),
    (1, slice(None, None, 2)),
    (None, np.array([0, 0, 1])),
], ids=["separated", "mask", "slice_ellipsis", "basic", "none"])
def test_at_add_index_forms(idx):
    x = A[:, :3, 0].copy()  # (2, 3)
    shape = x[idx].shape
    y = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    want = x.copy()
    np.add.at(want, idx, y)
    helpers.check(jnp.asarray(x).at[idx].add(y), want, np.float32)
    helpers.check(plax.jit(lambda x, y: x.at[idx].add(y))(x, y), want, np.float32)


def test_at_updates_broadcast_and_traced_indices():
    x = np.zeros((3, 4), np.float32)
    out = jnp.asarray(x).at[np.array([0, 2])].set(np.arange(4.0, dtype=np.float32))
    np.testing.assert_array_equal(_np(out)[[0, 2]], np.tile(np.arange(4.0), (2, 1)))
    f = plax.jit(lambda x, i, y: x.at[i, 1:].add(y))
    want = x.copy()
    np.add.at(want, (np.array([2, 2, 0]), slice(1, None)), 1.5)
    np.testing.assert_array_equal(_np(f(x, np.array([-1, 2, 0]), 1.5)), want)
    out = jnp.asarray(x).at[[0, 1], [1, 2]].set([7.0, 8.0])
    np.testing.assert_array_equal(_np(out)[[0, 1], [1, 2]], [7, 8])



def test_at_update_lists_holding_traced_values():
    # gymnax's minatar freeway: new_cars.at[i, :].set([0, i + 1, jnp.abs(s), s]) under jit
    f = plax.jit(lambda s: jnp.zeros((2, 4), jnp.int32).at[1, :].set([0, 2, jnp.abs(s), s]))
    out = f(np.int32(-3))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(_np(out), [[0, 0, 0, 0], [0, 2, 3, -3]])
    g = plax.jit(lambda s: jnp.zeros(3, np.float32).at[:2].add((s, 2 * s)))
    np.testing.assert_array_equal(_np(g(np.float32(1.5))), [1.5, 3.0, 0.0])

def test_at_out_of_bounds_updates():
    x = np.arange(6, dtype=np.float32)
    idx = np.array([9, -1, -9, 2])
    helpers.check(jnp.asarray(x).at[idx].set(100.0), [0, 1, 100, 3, 4, 100], np.float32)
    helpers.check(jnp.asarray(x).at[idx].add(10.0, mode="clip"), [10, 1, 12, 3, 4, 25],
                  np.float32)
    helpers.check(jnp.asarray(x).at[7].set(1.0), x, np.float32)
    with pytest.raises(ValueError, match="Unknown gather mode"):
        jnp.asarray(x).at[idx].set(1.0, mode="wrap")


def test_at_promotion_and_casting():
    xi = jnp.arange(6, dtype=jnp.int32)
    i = np.array([1, 1, 3])
    with pytest.warns(FutureWarning, match="scatter inputs have incompatible types"):
        out = xi.at[i].add(1.5)  # computed in float32, then cast back
    helpers.check(out, [0, 4, 2, 4, 4, 5], np.int32, weak=False)
    with pytest.warns(FutureWarning, match="cannot safely cast value from dtype=int32 to dtype=bool"):
        out = jnp.zeros(3, bool).at[1].set(1)
    helpers.check(out, [False, True, False], np.bool_)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        helpers.check(jnp.zeros(3).at[1].set(np.int64(3)), [0, 3, 0], np.float32)
        helpers.check(xi.at[i].add(2), [0, 5, 2, 5, 4, 5], np.int32)
        helpers.check(jnp.zeros(3, jnp.bfloat16).at[0].add(1.0), [1, 0, 0], helpers.BF16)
    weak = plax.lax.broadcast_in_dim(2.0, (2,), ())
    # the result keeps the operand's dtype and weak type, whatever the updates
    assert weak.at[0].add(1).aval.weak_type and weak.at[0].add(np.float32(1)).aval.weak_type
    helpers.check(jnp.zeros(3, bool).at[np.array([0, 0])].max(True), [True, False, False],
                  np.bool_)
    with pytest.raises(TypeError, match="add does not accept dtype bool"):
        jnp.zeros(3, bool).at[0].add(True)


def test_at_update_shape_errors():
    x = jnp.zeros((3, 4))
    with pytest.raises(ValueError, match="Cannot broadcast to shape with fewer dimensions"):
        x.at[np.array([0, 1])].set(np.ones((1, 2, 4)))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        x.at[np.array([0, 1])].set(np.ones(3))


# --- take, take_along_axis -------------------------------------------------------------
B = np.arange(12.0, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("mode,axis,want", [
    (None, None, [5, 5, 1]),
    ("fill", 1, [[np.nan, np.nan, 1], [np.nan, np.nan, 5], [np.nan, np.nan, 9]]),
    ("clip", 1, [[3, 0, 1], [7, 4, 5], [11, 8, 9]]),
    ("wrap", 1, [[1, 1, 1], [5, 5, 5], [9, 9, 9]]),
    ("clip", 0, B[[2, 0, 1]]),
])
def test_take_modes(mode, axis, want):
    helpers.check(NI.take(B, np.array([5, -7, 1]), axis=axis, mode=mode), np.asarray(want),
                  np.float32)


def test_take_values_and_fill():
    for axis in (0, 1, -1):
        for idx in (np.array([[0, 2], [1, -1]]), 2, np.zeros((0,), np.int32)):
            helpers.check(NI.take(B, idx, axis=axis), np.take(B, idx, axis=axis), np.float32)
    helpers.check(NI.take(np.arange(3), np.array([5])), [np.iinfo(np.int32).min], np.int32)
    helpers.check(NI.take(np.arange(3, dtype=np.uint8), np.array([5])), [255], np.uint8)
    helpers.check(NI.take(np.zeros(3, bool), np.array([5])), [True], np.bool_)
    helpers.check(NI.take(np.arange(3), np.array([5, 1]), fill_value=-7), [-7, 1], np.int32)
    helpers.check(NI.take(np.zeros((0, 3)), np.zeros(0, np.int32), axis=0), np.zeros((0, 3)),
                  np.float32)
    f = plax.jit(lambda a, i: NI.take(a, i, axis=1))
    helpers.check(f(B, np.array([3, -1, 0])), B[:, [3, -1, 0]], np.float32)


def test_take_errors():
    with pytest.raises(NotImplementedError, match="'raise' mode"):
        NI.take(B, np.array([1]), mode="raise")
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        NI.take(B, np.array([1]), axis=2)
    with pytest.raises(IndexError, match="non-empty take"):
        NI.take(np.zeros((0, 3)), np.array([1]), axis=0)
    with pytest.raises(ValueError, match="integer type"):  # a ValueError, as in JAX
        NI.take(B, np.array([1.0]))
    with pytest.raises(NotImplementedError, match="'out' argument"):
        NI.take(B, np.array([1]), out=np.zeros(1))


def test_take_along_axis():
    idx = np.argsort(-B, axis=1)
    helpers.check(NI.take_along_axis(B, idx, axis=1), np.take_along_axis(B, idx, axis=1),
                  np.float32)
    helpers.check(NI.take_along_axis(B, idx[:, :2], axis=-1), np.take_along_axis(B, idx[:, :2], 1),
                  np.float32)
    col = np.array([[1, 0]]).T  # (2, 1)
    helpers.check(NI.take_along_axis(B[:2], col, axis=0), np.take_along_axis(B[:2], col, 0),
                  np.float32)
    helpers.check(NI.take_along_axis(B, np.array([[0, 1]]), axis=1), B[:, :2], np.float32)
    helpers.check(NI.take_along_axis(B[:1], np.array([[0, 1], [1, 2]]), axis=1),
                  [[0, 1], [1, 2]], np.float32)
    helpers.check(NI.take_along_axis(B, np.array([5, 1]), axis=None), [5, 1], np.float32)
    oob = np.array([[5], [-1], [1]])
    helpers.check(NI.take_along_axis(B, oob, axis=1), [[np.nan], [7], [9]], np.float32)
    helpers.check(NI.take_along_axis(B, oob, axis=1, mode="clip"), [[3], [7], [9]], np.float32)
    helpers.check(NI.take_along_axis(B, oob, axis=1, fill_value=-1), [[-1], [7], [9]], np.float32)
    f = plax.jit(lambda a, i: NI.take_along_axis(a, i, axis=1))
    helpers.check(f(B, idx), np.take_along_axis(B, idx, 1), np.float32)
    # An empty batch dimension gives an empty result (no gather of size-0 slices).
    empty = NI.take_along_axis(np.zeros((0, 3), np.float32), np.zeros((0, 2), np.int32), axis=1)
    assert empty.shape == (0, 2) and empty.dtype == np.float32


def test_take_along_axis_errors():
    with pytest.raises(ValueError, match="same number of dimensions; 1 vs. 2"):
        NI.take_along_axis(B, np.array([1]), axis=1)
    with pytest.raises(ValueError, match="must be 1D if axis=None"):
        NI.take_along_axis(B, np.array([[1]]), axis=None)
    with pytest.raises(TypeError, match="must have an integer type, got float32"):
        NI.take_along_axis(B, np.array([[0.0]], np.float32), axis=1)
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        NI.take_along_axis(B, np.array([[0, 1], [1, 2]]), axis=1)
    with pytest.raises(ValueError, match="Unknown gather mode"):
        NI.take_along_axis(B, np.array([[0]]), axis=1, mode="wrap")


# --- jaxprs ------------------------------------------------------------------------------
def _count(jaxpr_text, name):
    return sum(line.split("=", 1)[-1].strip().startswith(name + "[")
               for line in jaxpr_text.splitlines())


@pytest.mark.parametrize("f", [
    lambda x, i: x[i],
    lambda x, i: x[:, i, 1:3],
    lambda x, i: x[i, ::2, i],
    lambda x, i: x[None, i, 1],
    lambda x, i: x[np.array([True, False]), i],
], ids=["rows", "window", "strided_separated", "none_int", "mask"])
def test_getitem_is_one_gather(f):
    text = str(plax.make_jaxpr(f)(A[:, :, :, 0], np.array([0, 1])))
    assert _count(text, "gather") == 1, text
    assert "mode=GatherScatterMode.PROMISE_IN_BOUNDS" in text
    assert "dynamic_slice" not in text and "slice[" not in text


def test_getitem_gather_params():
    text = str(plax.make_jaxpr(lambda x, i: x[:, i, 1:3])(A[0], np.array([0, 1])))
    assert ("GatherDimensionNumbers(offset_dims=(0, 2), collapsed_slice_dims=(1,), "
            "start_index_map=(1, 2)") in text
    assert "slice_sizes=(3, 1, 2)" in text


@pytest.mark.parametrize("method,prim", [("set", "scatter"), ("add", "scatter-add"),
                                         ("mul", "scatter-mul"), ("min", "scatter-min"),
                                         ("max", "scatter-max")])
def test_at_is_one_scatter(method, prim):
    text = str(plax.make_jaxpr(lambda x, i: getattr(x.at[i, 1:], method)(2.0))(
        jnp.zeros((3, 4)), np.array([0, 2])))
    assert _count(text, prim) == 1 and "mode=GatherScatterMode.FILL_OR_DROP" in text, text
    assert sum(_count(text, p) for p in ("scatter", "scatter-add", "scatter-mul", "scatter-min",
                                         "scatter-max", "gather")) == 1


def test_basic_at_scatter_flags_and_take_jaxpr():
    text = str(plax.make_jaxpr(lambda x: x.at[1:3].set(2.0))(jnp.zeros(6)))
    assert "indices_are_sorted=True" in text and "unique_indices=True" in text
    text = str(plax.make_jaxpr(lambda x: NI.take(x, np.array([1, 2]), axis=1))(B))
    assert _count(text, "gather") == 1 and "fill_value=nan" in text
    assert "mode=GatherScatterMode.FILL_OR_DROP" in text
    text = str(plax.make_jaxpr(lambda x, i: NI.take_along_axis(x, i, axis=1))(B, np.zeros((3, 1), np.int32)))
    assert "operand_batching_dims=(0,), start_indices_batching_dims=(0,)" in text


# --- gradients and vmap ------------------------------------------------------------------
X = helpers.sample((4, 5), np.float32)
IDX = np.array([0, 2, 2, -1])


@pytest.mark.parametrize("f", [
    lambda x: x[IDX, 1:4],
    lambda x: x[:, IDX],
    lambda x: x[X > 0],
    lambda x: NI.take(x, IDX, axis=1),
    lambda x: NI.take_along_axis(x, np.array([[0], [1], [4], [2]]), axis=1),
], ids=["rows", "cols", "mask", "take", "take_along_axis"])
def test_grad_getitem(f):
    check_grads(lambda x: f(jnp.asarray(x)), (X,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("method,order", [("add", 2), ("set", 2), ("mul", 1), ("max", 1)])
def test_grad_at(method, order):
    y = helpers.sample((4, 5), np.float32, "nonzero", seed=1)
    idx = np.array([0, 2, 3, 1]) if method in ("set", "max") else IDX
    check_grads(lambda x, y: getattr(jnp.asarray(x).at[idx], method)(y), (X, y), order=order,
                modes=("fwd", "rev"))


XB = helpers.sample((3, 4, 5), np.float32)
IB = np.array([[0, 1], [2, 3], [1, 1]])


@pytest.mark.parametrize("f", [
    lambda x, i: jnp.asarray(x)[i],
    lambda x, i: jnp.asarray(x)[1:, i],
    lambda x, i: NI.take(x, i, axis=0),
    lambda x, i: NI.take_along_axis(x, i[None, :], axis=1),
], ids=["rows", "cols", "take", "take_along_axis"])
def test_vmap_getitem(f):
    helpers.check_vmap_axes(f, XB, IB)


def test_vmap_separated_and_at():
    x4 = helpers.sample((3, 4, 5, 4), np.float32)
    helpers.check_vmap_axes(lambda x, i: jnp.asarray(x)[i, 1:3, i], x4, IB)
    helpers.check_vmap_axes(lambda x, i, y: jnp.asarray(x).at[i].add(y), XB, IB,
                            helpers.sample((3, 2, 5), np.float32))
    helpers.check_vmap_axes(lambda x, i, y: jnp.asarray(x).at[:, i].set(y), XB, IB[:, :1],
                            helpers.sample((3, 4, 1), np.float32), unbatched=False)


# --- errors ------------------------------------------------------------------------------
def test_index_errors():
    x = jnp.asarray(A[0])
    with pytest.raises(IndexError, match="Too many indices: array is 3-dimensional, but 4"):
        x[[0], [0], [0], [0]]
    with pytest.raises(IndexError, match="Too many indices"):
        x.at[0, 0, 0, np.array([0])].set(1.0)
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type, got indexer "
                                        "with type float32"):
        x[jnp.array([1.0])]
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type"):
        x[1.0]
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type"):
        x[np.array([0.5]), 1]
    with pytest.raises(TypeError, match="non-tuple sequence for multidimensional indexing"):
        x[[0, 1]]
    with pytest.raises(IndexError, match="boolean index did not match shape of indexed array in "
                                         r"index 1: got \(2,\), expected \[4\]"):
        x[:, np.array([True, False])]
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        x[np.array([0, 1]), np.array([0, 1, 2])]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., np.array([0]), ...]
    with pytest.raises(TypeError, match="string indexing"):
        x["a"]


def test_traced_boolean_mask_errors():
    x = jnp.asarray(A[0, 0])
    with pytest.raises(plax.errors.NonConcreteBooleanIndexError,
                       match=r"Array boolean indices must be concrete; got bool\[4,5\]"):
        plax.jit(lambda m: x[m])(x > 3)
    with pytest.raises(IndexError, match="Array boolean indices must be concrete"):
        plax.jit(lambda m: x.at[m].set(0.0))(x > 3)
    with pytest.raises(IndexError, match="Array boolean indices must be concrete"):
        plax.vmap(lambda m: x[0][m])(np.ones((2, 5), bool))


def test_empty_operand_axis():
    e = jnp.zeros((0, 3))
    assert e[np.zeros(0, np.int32)].shape == (0, 3)
    assert e[:, np.array([0, 2])].shape == (0, 2)
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        e[np.array([0])]
    np.testing.assert_array_equal(_np(e.at[np.zeros(0, np.int32)].set(1.0)), np.zeros((0, 3)))
    # The empty result keeps the operand's dtype, key arrays and weak types included.
    keys = plax.random.split(plax.random.key(0), 0)
    picked = plax.jit(lambda k, i: k[i])(keys, np.zeros(0, np.int32))
    assert picked.shape == (0,) and picked.dtype == keys.dtype
    weak = plax.lax.broadcast(2.0, (0,))[np.zeros(0, np.int32)]
    assert weak.shape == (0,) and weak.aval.weak_type


# (shape, index) where NumPy's layout rules matter: an Ellipsis (even of no axes) or a None
# between advanced entries puts the broadcast axes first; an empty mask selects nothing
NUMPY_LAYOUT_CASES = [
    ((3, 4, 5), (slice(None), np.array([0, 1]), Ellipsis, np.array([0, 1]))),
    ((3, 4, 5), (slice(None), np.array([0, 1]), None, np.array([0, 1]))),
    ((3, 4, 5), (slice(None), np.array([0, 1]), np.array([0, 1]))),
    ((3,), np.empty((0,), bool)),
    ((3, 4), np.empty((0, 4), bool)),
    ((3, 4, 5), np.empty((3, 0), bool)),
]


@pytest.mark.parametrize("shape,idx", NUMPY_LAYOUT_CASES)
def test_numpy_layout_of_advanced_indices(shape, idx):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(jnp.asarray(x)[idx], x[idx])
    want = x.copy()
    np.add.at(want, idx, 1.0)
    np.testing.assert_array_equal(jnp.asarray(x).at[idx].add(1.0), want)


def test_weak_typed_updates_and_empty_axis_errors():
    from plax._src.lax.lax import _convert_element_type
    from plax.core.dtypes import is_weakly_typed
    x = _convert_element_type(jnp.arange(5), float, weak_type=True)  # float: float32 here
    assert x.dtype == np.float32 and is_weakly_typed(x)
    for update in (x.at[0].set, x.at[0].add, x.at[0].mul):
        y = update(1.0)
        assert y.dtype == np.float32 and is_weakly_typed(y)
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 0"):
        plax.jit(lambda i: jnp.ones((2, 0))[0, i])(0)
