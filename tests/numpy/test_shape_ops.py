"""plax.numpy shape manipulation against NumPy: values, dtypes, weak types, jaxprs, errors."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, np.int32, np.bool_, BF16]


def _val(shape, dtype, offset=0):
    """Distinct-ish values of ``dtype`` (exact in every dtype here)."""
    base = np.arange(offset, offset + int(np.prod(shape, dtype=np.int64))).reshape(shape)
    if dtype is np.bool_:
        return base % 3 == 0
    return (base % 97 - 40).astype(dtype)


def _check(out, expected):
    expected = np.asarray(expected)
    got = np.asarray(out)
    assert isinstance(out, plax.Array), type(out)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if got.dtype == BF16:
        got, expected = got.astype(np.float64), expected.astype(np.float64)
    np.testing.assert_array_equal(got, expected)


def _check_all(outs, expected):
    assert len(outs) == len(expected)
    for o, e in zip(outs, expected):
        _check(o, e)


# --- one-array functions: (id, input shape, function of (module, x)) -------------------------
UNARY = [
    ("reshape", (2, 3), lambda m, x: m.reshape(x, (3, -1))),
    ("reshape_0d", (), lambda m, x: m.reshape(x, (1, 1))),
    ("reshape_empty", (0, 3), lambda m, x: m.reshape(x, (3, -1))),
    ("reshape_F", (2, 3), lambda m, x: m.reshape(x, (3, 2), order="F")),
    ("ravel", (2, 3), lambda m, x: m.ravel(x)),
    ("ravel_F", (2, 3), lambda m, x: m.ravel(x, order="F")),
    ("transpose", (2, 3, 4), lambda m, x: m.transpose(x)),
    ("transpose_axes", (2, 3, 4), lambda m, x: m.transpose(x, (1, -1, 0))),
    ("transpose_0d", (), lambda m, x: m.transpose(x)),
    ("permute_dims", (2, 3, 4), lambda m, x: m.permute_dims(x, (2, 0, 1))),
    ("matrix_transpose", (4, 2, 3), lambda m, x: m.matrix_transpose(x)),
    ("swapaxes", (2, 3, 4), lambda m, x: m.swapaxes(x, 0, -1)),
    ("moveaxis", (2, 3, 4), lambda m, x: m.moveaxis(x, 0, -1)),
    ("moveaxis_multi", (2, 3, 4), lambda m, x: m.moveaxis(x, (0, 1), (2, 0))),
    ("rollaxis", (2, 3, 4), lambda m, x: m.rollaxis(x, 2, 1)),
    ("expand_dims", (2, 3), lambda m, x: m.expand_dims(x, (0, -1))),
    ("expand_dims_0d", (), lambda m, x: m.expand_dims(x, 0)),
    ("squeeze_all", (1, 2, 1), lambda m, x: m.squeeze(x)),
    ("squeeze_axis", (1, 2, 1), lambda m, x: m.squeeze(x, -1)),
    ("squeeze_0d", (), lambda m, x: m.squeeze(x)),
    ("tile", (2, 3), lambda m, x: m.tile(x, (2, 1, 2))),
    ("tile_0d", (), lambda m, x: m.tile(x, 3)),
    ("tile_zero", (3,), lambda m, x: m.tile(x, 0)),
    ("repeat_flat", (2, 3), lambda m, x: m.repeat(x, 2)),
    ("repeat_axis", (2, 3), lambda m, x: m.repeat(x, 3, axis=-1)),
    ("repeat_seq", (2, 3), lambda m, x: m.repeat(x, [2, 0, 3], axis=1)),
    ("repeat_0d", (), lambda m, x: m.repeat(x, 2)),
    ("repeat_empty", (2, 0), lambda m, x: m.repeat(x, 2, axis=1)),
    ("broadcast_to", (3,), lambda m, x: m.broadcast_to(x, (2, 3))),
    ("broadcast_to_0d", (), lambda m, x: m.broadcast_to(x, (2, 2))),
    ("broadcast_to_empty", (1, 3), lambda m, x: m.broadcast_to(x, (0, 3))),
    ("flip_all", (2, 3), lambda m, x: m.flip(x)),
    ("flip_axes", (2, 3, 2), lambda m, x: m.flip(x, (0, -1))),
    ("flip_0d", (), lambda m, x: m.flip(x)),
    ("fliplr", (2, 3), lambda m, x: m.fliplr(x)),
    ("flipud", (4,), lambda m, x: m.flipud(x)),
    ("roll", (5,), lambda m, x: m.roll(x, -7)),
    ("roll_flat", (2, 3), lambda m, x: m.roll(x, 2)),
    ("roll_axes", (2, 3), lambda m, x: m.roll(x, (1, 2), axis=(0, 1))),
    ("roll_same_axis", (2, 3), lambda m, x: m.roll(x, (1, 1), axis=(1, 1))),
    ("roll_empty", (0,), lambda m, x: m.roll(x, 1)),
    ("rot90", (2, 3), lambda m, x: m.rot90(x)),
    ("rot90_k2", (2, 3), lambda m, x: m.rot90(x, 2)),
    ("rot90_k3_axes", (2, 3, 4), lambda m, x: m.rot90(x, -1, (2, 0))),
    ("atleast_1d", (), lambda m, x: m.atleast_1d(x)),
    ("atleast_2d", (3,), lambda m, x: m.atleast_2d(x)),
    ("atleast_3d_1d", (3,), lambda m, x: m.atleast_3d(x)),
    ("atleast_3d_2d", (2, 3), lambda m, x: m.atleast_3d(x)),
]
# The dtype-independent part of these runs for float32 only, to keep compiles down.
_ALL_DTYPE_IDS = {"reshape", "transpose_axes", "squeeze_all", "tile", "repeat_seq", "flip_axes",
                  "roll_axes", "rot90", "broadcast_to", "expand_dims", "reshape_0d"}


def _unary_params():
    for name, shape, fn in UNARY:
        for dt in (DTYPES if name in _ALL_DTYPE_IDS else [np.float32]):
            yield pytest.param(shape, fn, dt, id=f"{name}-{np.dtype(dt).name}")


@pytest.mark.parametrize("shape,fn,dtype", list(_unary_params()))
def test_unary_vs_numpy(shape, fn, dtype):
    x = _val(shape, dtype)
    _check(fn(jnp, plax.device_put(x)), fn(np, x))


# --- joining -----------------------------------------------------------------------------
JOIN = [
    ("concatenate", [(2, 3), (1, 3)], lambda m, xs: m.concatenate(xs)),
    ("concatenate_axis", [(2, 1), (2, 3), (2, 0)], lambda m, xs: m.concatenate(xs, axis=-1)),
    ("concatenate_none", [(2, 2), (3,)], lambda m, xs: m.concatenate(xs, axis=None)),
    ("concat", [(2,), (3,)], lambda m, xs: m.concat(xs)),
    ("stack", [(2, 3), (2, 3)], lambda m, xs: m.stack(xs)),
    ("stack_last", [(2, 3), (2, 3), (2, 3)], lambda m, xs: m.stack(xs, axis=-1)),
    ("stack_0d", [(), ()], lambda m, xs: m.stack(xs)),
    ("hstack_1d", [(2,), (3,)], lambda m, xs: m.hstack(xs)),
    ("hstack_2d", [(2, 1), (2, 3)], lambda m, xs: m.hstack(xs)),
    ("vstack", [(3,), (2, 3)], lambda m, xs: m.vstack(xs)),
    ("dstack", [(2,), (2,)], lambda m, xs: m.dstack(xs)),
    ("column_stack", [(2,), (2, 2)], lambda m, xs: m.column_stack(xs)),
]


@pytest.mark.parametrize("shapes,fn,dtype", [
    pytest.param(s, f, dt, id=f"{n}-{np.dtype(dt).name}")
    for n, s, f in JOIN for dt in (DTYPES if len(s) == 2 else [np.float32])])
def test_join_vs_numpy(shapes, fn, dtype):
    xs = [_val(s, dtype, 10 * i) for i, s in enumerate(shapes)]
    _check(fn(jnp, [plax.device_put(x) for x in xs]), fn(np, xs))


def test_join_array_argument():
    x = _val((2, 3, 4), np.float32)
    px = plax.device_put(x)
    _check(jnp.concatenate(px, axis=1), np.concatenate(x, axis=1))
    _check(jnp.concatenate(px, axis=None), np.concatenate(x, axis=None))
    _check(jnp.stack(px, axis=1), np.stack(x, axis=1))
    _check(jnp.vstack(px), np.vstack(x))
    _check_all(jnp.unstack(px, axis=1), np.unstack(x, axis=1))


def test_concatenate_promotes_dtypes():
    """Promotion follows JAX (int32 + float32 -> float32), not NumPy."""
    i = np.arange(2, dtype=np.int32)
    f = np.ones(1, np.float32)
    b = np.array([True])
    _check(jnp.concatenate([i, f]), np.concatenate([i, f]).astype(np.float32))
    _check(jnp.concatenate([i, b]), np.concatenate([i, b]))
    _check(jnp.concatenate([i, b], dtype=jnp.float32), np.concatenate([i, b], dtype=np.float32))
    bf = jnp.ones(2, jnp.bfloat16)
    assert jnp.concatenate([bf, jnp.ones(1, jnp.float32)]).dtype == np.float32
    assert jnp.concatenate([bf, i]).dtype == jnp.bfloat16
    # NumPy int64 canonicalises to int32
    assert jnp.concatenate([i, np.ones(2, np.int64)]).dtype == np.int32
    _check(jnp.stack([i, np.full(2, 3.5, np.float32)], dtype=jnp.int32),
           np.array([[0, 1], [3, 3]], np.int32))
    _check(jnp.hstack([i, f], dtype=jnp.bfloat16), np.array([0, 1, 1], BF16))


# --- splitting ---------------------------------------------------------------------------
SPLIT = [
    ("split_n", (6,), lambda m, x: m.split(x, 3)),
    ("split_idx", (6,), lambda m, x: m.split(x, [1, 4])),
    ("split_idx_numpy_slices", (6,), lambda m, x: m.split(x, [4, 1, -1, 10])),
    ("split_axis", (2, 6), lambda m, x: m.split(x, 2, axis=-1)),
    ("split_empty", (0,), lambda m, x: m.split(x, 2)),
    ("split_none", (6,), lambda m, x: m.split(x, [])),
    ("array_split", (7,), lambda m, x: m.array_split(x, 3)),
    ("array_split_more", (2,), lambda m, x: m.array_split(x, 3)),
    ("hsplit", (2, 4), lambda m, x: m.hsplit(x, 2)),
    ("hsplit_1d", (4,), lambda m, x: m.hsplit(x, [1])),
    ("vsplit", (4, 2), lambda m, x: m.vsplit(x, 2)),
    ("dsplit", (1, 1, 4), lambda m, x: m.dsplit(x, [3])),
]


@pytest.mark.parametrize("shape,fn", [pytest.param(s, f, id=n) for n, s, f in SPLIT])
def test_split_vs_numpy(shape, fn):
    x = _val(shape, np.int32)
    _check_all(fn(jnp, plax.device_put(x)), fn(np, x))


def test_split_accepts_concrete_array_indices():
    x = _val((6,), np.float32)
    _check_all(jnp.split(x, jnp.array([2])), np.split(x, [2]))
    _check_all(jnp.split(x, np.array([2, 3])), np.split(x, [2, 3]))


# --- repeat and roll beyond static ints ----------------------------------------------------
@pytest.mark.parametrize("repeats,total,expected", [
    (2, 4, [0, 0, 1, 1]),
    (2, 8, [0, 0, 1, 1, 2, 2, 2, 2]),
    ([1, 2, 0], 5, [0, 1, 1, 2, 2]),
    ([1, 2, 0], 2, [0, 1]),
    ([1, 2, 1], 4, [0, 1, 1, 2]),
])
def test_repeat_total_repeat_length(repeats, total, expected):
    x = jnp.arange(3)
    out = jnp.repeat(x, repeats, total_repeat_length=total)
    _check(out, np.asarray(expected, np.int32))
    if not isinstance(repeats, int):  # the same under tracing, with traced repeats
        f = plax.make_jaxpr(lambda r: jnp.repeat(x, r, total_repeat_length=total))
        assert "sort" in str(f(np.asarray(repeats, np.int32)))
        _check(_eval(lambda r: jnp.repeat(x, r, total_repeat_length=total),
                     np.asarray(repeats, np.int32)), np.asarray(expected, np.int32))


def _eval(fn, *args):
    """Run ``fn`` through make_jaxpr's staging and evaluate the jaxpr (a traced run)."""
    closed = plax.make_jaxpr(fn)(*args)
    from plax.core.jaxpr import eval_jaxpr
    outs = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return outs[0] if len(outs) == 1 else outs


def test_repeat_2d_traced_repeats():
    x = _val((2, 3), np.float32)
    out = _eval(lambda r: jnp.repeat(x, r, axis=1, total_repeat_length=5),
                np.asarray([2, 0, 3], np.int32))
    _check(out, np.repeat(x, [2, 0, 3], axis=1))


@pytest.mark.parametrize("shift", [2, -7, 0])
def test_roll_traced_shift(shift):
    x = _val((2, 5), np.int32)
    out = _eval(lambda s: jnp.roll(x, s, axis=1), np.int32(shift))
    _check(out, np.roll(x, shift, axis=1))
    _check(jnp.roll(x, jnp.asarray(shift)), np.roll(x, shift))


# --- broadcasting ------------------------------------------------------------------------
def test_broadcast_arrays_and_shapes():
    a, b = _val((2, 1), np.float32), _val((3,), np.int32)
    _check_all(jnp.broadcast_arrays(a, b, 1.0), np.broadcast_arrays(a, b, np.float32(1.0)))
    assert jnp.broadcast_arrays(a, b, 1.0)[2].weak_type
    assert jnp.broadcast_arrays() == []
    assert jnp.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert jnp.broadcast_shapes((2, 1), 3) == (2, 3)
    assert jnp.broadcast_shapes((0, 1), (1, 4)) == (0, 4)
    assert jnp.broadcast_shapes() == ()


# --- pad ---------------------------------------------------------------------------------
SMALL, LARGE = ((0, 2), (3, 1)), ((5, 7), (4, 0))  # LARGE exceeds the axis sizes (3, 2)
PAD_CASES = [
    ("constant", {}, 2), ("constant", {"constant_values": ((7, 8), (9, 10))}, SMALL),
    ("edge", {}, LARGE), ("wrap", {}, SMALL), ("wrap", {}, LARGE),
    ("reflect", {}, SMALL), ("reflect", {}, LARGE), ("reflect", {"reflect_type": "odd"}, LARGE),
    ("symmetric", {}, SMALL), ("symmetric", {}, LARGE),
    ("symmetric", {"reflect_type": "odd"}, LARGE),
    ("linear_ramp", {"end_values": ((10, -4), (3, 20))}, SMALL), ("maximum", {}, SMALL),
    ("minimum", {"stat_length": 2}, SMALL), ("mean", {"stat_length": ((1, 2), (3, 1))}, SMALL),
    ("median", {}, LARGE),
]


@pytest.mark.parametrize("mode,kwargs,width", [
    pytest.param(m, k, w, id=f"{m}-{'-'.join(k) or 'default'}-{w}") for m, k, w in PAD_CASES])
def test_pad_vs_numpy(mode, kwargs, width):
    x = (_val((3, 2), np.float32) * 0.5).astype(np.float32)
    out, expected = jnp.pad(x, width, mode=mode, **kwargs), np.pad(x, width, mode=mode, **kwargs)
    if mode == "linear_ramp":  # float rounding of the ramp differs in the last bit
        assert out.dtype == expected.dtype and out.shape == expected.shape
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6, atol=1e-6)
    else:
        _check(out, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_dtypes(mode, dtype):
    x = _val((4,), dtype)
    _check(jnp.pad(x, (2, 5), mode=mode), np.pad(x, (2, 5), mode=mode))


@pytest.mark.parametrize("mode", ["mean", "median", "linear_ramp"])
def test_pad_integer_rounding(mode):
    x = np.array([1, 2, 4, 7], np.int32)
    _check(jnp.pad(x, 3, mode=mode), np.pad(x, 3, mode=mode))


def test_pad_special_cases():
    _check(jnp.pad(np.arange(3), (1, 2), constant_values=7.7),
           np.pad(np.arange(3, dtype=np.int32), (1, 2), constant_values=7.7))
    _check(jnp.pad(np.arange(3.0, dtype=np.float32), 1, constant_values=jnp.asarray(2.0)),
           np.pad(np.arange(3.0, dtype=np.float32), 1, constant_values=2.0))
    _check(jnp.pad(np.ones(1, np.int32), 2, mode="reflect"), np.pad(np.ones(1, np.int32), 2, "reflect"))
    _check(jnp.pad(np.zeros(0, np.float32), 2), np.pad(np.zeros(0, np.float32), 2))
    _check(jnp.pad(np.ones(3, np.float32), [[1, 2]]), np.pad(np.ones(3, np.float32), [[1, 2]]))
    _check(jnp.pad(np.ones(3, np.float32), jnp.asarray(1)), np.pad(np.ones(3, np.float32), 1))
    _check(jnp.pad(np.ones(3, np.float32), 1, mode="empty"), np.zeros(5, np.float32) + np.pad(
        np.ones(3, np.float32), 1))
    scalar = jnp.pad(jnp.asarray(2.0), 1)  # a 0-d array has nothing to pad
    assert scalar.shape == () and scalar.weak_type


def test_pad_traced_constant():
    x = _val((2, 2), np.float32)
    out = _eval(lambda c: jnp.pad(x, 1, constant_values=c), np.float32(5))
    _check(out, np.pad(x, 1, constant_values=5))


def test_pad_callable_mode_matches_numpy():
    """A callable mode fills each zero-padded line; plax's returns the line (NumPy's edits it)."""
    def fill(vector, width, axis, kwargs):
        vector = vector.at[:width[0]].set(kwargs.get("value", 7) + axis)
        return vector.at[vector.shape[0] - width[1]:].set(-1) if width[1] else vector

    def fill_in_place(vector, width, axis, kwargs):
        vector[:width[0]] = kwargs.get("value", 7) + axis
        if width[1]:
            vector[-width[1]:] = -1

    x = _val((2, 3), np.float32)
    widths = ((1, 2), (2, 1))
    _check(jnp.pad(x, widths, fill, value=3), np.pad(x, widths, fill_in_place, value=3))
    _check(plax.jit(lambda a: jnp.pad(a, 1, fill))(x), np.pad(x, 1, fill_in_place))


# --- sizes -------------------------------------------------------------------------------
def test_ndim_shape_size():
    x = jnp.ones((2, 3))
    assert jnp.ndim(x) == 2 and jnp.ndim([[1, 2]]) == 2 and jnp.ndim(1.0) == 0
    assert jnp.shape(x) == (2, 3) and jnp.shape([[1, 2]]) == (1, 2) and jnp.shape(3) == ()
    assert jnp.size(x) == 6 and jnp.size(x, 1) == 3 and jnp.size(x, (0, 1)) == 6
    assert jnp.size([[1, 2]]) == 2
    assert all(type(v) is int for v in (jnp.ndim(x), jnp.size(x), *jnp.shape(x)))


# --- weak types (as JAX: shape ops keep the operand's weak type) ----------------------------
def test_weak_types_follow_jax():
    w = jnp.asarray(1.0)  # weak f32
    assert w.weak_type
    for out in [jnp.reshape(w, (1, 1)), jnp.ravel(w), jnp.expand_dims(w, 0), jnp.squeeze(w),
                jnp.tile(w, 2), jnp.repeat(w, 2), jnp.broadcast_to(w, (2,)), jnp.flip(w),
                jnp.roll(w, 1), jnp.atleast_2d(w), jnp.pad(jnp.atleast_1d(w), 1),
                jnp.stack([1, 2.5]), jnp.hstack([1, 2]), jnp.concatenate([jnp.atleast_1d(w)] * 2)]:
        assert out.weak_type, out
        assert out.dtype == np.float32 or out.dtype == np.int32
    strong = jnp.ones(1)
    assert not jnp.concatenate([jnp.atleast_1d(w), strong]).weak_type
    assert not jnp.stack([w, w], dtype=jnp.float32).weak_type
    assert not jnp.pad(strong, 1, constant_values=2).weak_type


# --- array methods -----------------------------------------------------------------------
def test_array_methods():
    x = _val((2, 3), np.float32)
    a = plax.device_put(x)
    _check(a.reshape(3, 2), x.reshape(3, 2))
    _check(a.reshape((3, 2)), x.reshape((3, 2)))
    _check(a.reshape(-1), x.reshape(-1))
    _check(a.transpose(), x.transpose())
    _check(a.transpose(1, 0), x.transpose(1, 0))
    _check(a.transpose((1, 0)), x.transpose((1, 0)))
    _check(a.T, x.T)
    _check(a.ravel(), x.ravel())
    _check(a.flatten(), x.flatten())
    _check(a.reshape(1, 2, 3).squeeze(0), x)
    _check(a.swapaxes(0, 1), x.swapaxes(0, 1))
    _check(a.repeat(2, axis=0), x.repeat(2, axis=0))


def test_methods_on_tracers():
    x = _val((2, 3), np.float32)
    out = _eval(lambda t: t.reshape(3, 2).T.flatten(), x)
    _check(out, x.reshape(3, 2).T.flatten())


# --- jaxprs ------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,expected", [
    (lambda x: jnp.reshape(x, (3, -1)), "reshape[dimensions=None new_sizes=(3, 2)"),
    (lambda x: x.T, "transpose[permutation=(1, 0)]"),
    (lambda x: jnp.expand_dims(x, 1), "broadcast_in_dim[broadcast_dimensions=(0, 2)]"),
    (lambda x: jnp.concatenate([x, x], axis=1), "concatenate[dimension=1] a a"),
    (lambda x: jnp.flip(x, 1), "rev[dimensions=(1,)]"),
    (lambda x: jnp.pad(x, ((1, 0), (0, 2))), "pad[padding_config=((1, 0, 0), (0, 2, 0))]"),
    (lambda x: jnp.split(x, 3, axis=1)[1], "slice[limit_indices=(2, 2) start_indices=(0, 1)"),
    (lambda x: jnp.tile(x, 2), "f32[2,6] = reshape"),
    (lambda x: jnp.repeat(x, 2, axis=0), "f32[4,3] = reshape"),
])
def test_jaxprs(fn, expected):
    text = str(plax.make_jaxpr(fn)(np.ones((2, 3), np.float32)))
    assert expected in text, text


# Every form JAX 0.10.2 takes (and refuses), checked against NumPy's shapes and values.
RESHAPE_FORMS = [
    ("method, no shape: a size-1 array becomes a scalar", (1, 1), lambda a: a.reshape(), ()),
    ("method, empty tuple", (1,), lambda a: a.reshape(()), ()),
    ("method, ints", (6,), lambda a: a.reshape(2, 3), (2, 3)),
    ("method, a list", (6,), lambda a: a.reshape([3, 2]), (3, 2)),
    ("method, one int", (2, 3), lambda a: a.reshape(6), (6,)),
    ("method, ints with order F", (6,), lambda a: a.reshape(2, 3, order="F"), (2, 3)),
    ("function, shape keyword", (6,), lambda a: jnp.reshape(a, shape=(3, 2)), (3, 2)),
    ("function, order positional", (6,), lambda a: jnp.reshape(a, (3, 2), "F"), (3, 2)),
]


@pytest.mark.parametrize("what, shape, form, want", RESHAPE_FORMS,
                         ids=[f[0] for f in RESHAPE_FORMS])
def test_reshape_forms(what, shape, form, want):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    out = form(jnp.asarray(x))
    order = "F" if "order F" in what or "positional" in what else "C"
    np.testing.assert_array_equal(out, x.reshape(want, order=order))
    assert out.shape == want
    assert plax.jit(form)(x).shape == want


RESHAPE_REFUSED = [
    (lambda a: a.reshape(), TypeError, r"into shape \(\) \(size 1\)"),
    (lambda a: a.reshape(4), TypeError, r"into shape 4 \(size 4\)"),
    (lambda a: a.reshape(2.0, 3), TypeError, r"integer type, got \(2.0, 3\)\."),
    (lambda a: a.reshape(None), TypeError, r"integer type, got \[None\]\."),
    (lambda a: a.reshape(shape=(2, 3)), TypeError, "unexpected keyword argument 'shape'"),
    (lambda a: jnp.reshape(a), TypeError, "missing 1 required positional argument: 'shape'"),
    (lambda a: jnp.reshape(a, newshape=(2, 3)), TypeError,
     "unexpected keyword argument 'newshape'"),
    (lambda a: a.reshape(2, 3, order="K"), ValueError, "Unexpected value for 'order' argument"),
]


@pytest.mark.parametrize("form, error, match", RESHAPE_REFUSED)
def test_reshape_refusals_as_jax(form, error, match):
    with pytest.raises(error, match=match):
        form(jnp.arange(6.0))


def test_jaxpr_roll_static_is_slices():
    text = str(plax.make_jaxpr(lambda x: jnp.roll(x, 1, axis=1))(np.ones((2, 3), np.float32)))
    assert "concatenate[dimension=1]" in text and "dynamic_slice" not in text


# --- errors ------------------------------------------------------------------------------
ERRORS = [
    (lambda: jnp.reshape(jnp.arange(6), (4,)), TypeError,
     r"cannot reshape array of shape \(6,\) \(size 6\) into shape \(4,\) \(size 4\)"),
    (lambda: jnp.reshape(jnp.arange(6), (-1, 4)), TypeError, r"does not evenly divide 6"),
    (lambda: jnp.reshape(jnp.arange(6), (-1, -1)), TypeError, "only specify one unknown"),
    (lambda: jnp.reshape(jnp.arange(6), (2.0, 3)), TypeError, "integer type"),
    (lambda: jnp.reshape(jnp.arange(6), (2, 3), order="A"), NotImplementedError,
     "np.reshape order=A is not implemented"),
    (lambda: jnp.reshape([1, 2], (2,)), TypeError, "reshape requires ndarray or scalar"),
    (lambda: jnp.transpose(jnp.ones((2, 3)), (0, 2)), ValueError,
     "axis 2 is out of bounds for array of dimension 2"),
    (lambda: jnp.transpose(jnp.ones((2, 3)), (0, 0)), TypeError, "permutation"),
    (lambda: jnp.swapaxes(jnp.ones((2, 3)), 0, 5), ValueError, "axis 5 is out of bounds"),
    (lambda: jnp.moveaxis(jnp.ones((2, 3)), (0, 1), (1,)), ValueError, "Inconsistent number"),
    (lambda: jnp.matrix_transpose(jnp.ones(3)), ValueError, "at least two-dimensional"),
    (lambda: jnp.expand_dims(jnp.ones((2, 3)), 3), ValueError, "axis 3 is out of bounds"),
    (lambda: jnp.expand_dims(jnp.ones((2, 3)), (1, 1)), ValueError, "repeated axis"),
    (lambda: jnp.squeeze(jnp.ones((1, 2)), 1), ValueError,
     r"cannot select an axis to squeeze out which has size not equal to one.*\(1, 2\)"),
    (lambda: jnp.squeeze(jnp.ones((1, 2)), 2), ValueError, "axis 2 is out of bounds"),
    (lambda: jnp.concatenate([jnp.ones(2), jnp.ones((2, 2))]), TypeError,
     r"different numbers of dimensions: got \(2,\), \(2, 2\)"),
    (lambda: jnp.concatenate([jnp.ones((2, 2)), jnp.ones((3, 3))]), TypeError,
     "differ in dimensions other than the one being concatenated"),
    (lambda: jnp.concatenate([jnp.ones(2)], axis=1), ValueError, "axis 1 is out of bounds"),
    (lambda: jnp.concatenate([]), ValueError, "Need at least one array to concatenate"),
    (lambda: jnp.concatenate([jnp.asarray(1.0)] * 2), ValueError, "Zero-dimensional"),
    (lambda: jnp.concatenate([jnp.ones(2), [1.0]]), TypeError, "position 1"),
    (lambda: jnp.stack([jnp.ones(2), jnp.ones(3)]), ValueError,
     r"must have the same shape. Got \(2,\), \(3,\)"),
    (lambda: jnp.stack([]), ValueError, "Need at least one array to stack"),
    (lambda: jnp.split(jnp.arange(6), 4), ValueError,
     "array split does not result in an equal division"),
    (lambda: jnp.split(jnp.arange(6), 0), ValueError, "larger than 0"),
    (lambda: jnp.split(jnp.ones((2, 6)), 2, axis=2), ValueError, "axis 2 is out of bounds"),
    (lambda: jnp.hsplit(jnp.ones(()), 2), ValueError, "1 or more dimensions"),
    (lambda: jnp.tile(jnp.ones(2), -1), ValueError, "nonnegative"),
    (lambda: jnp.repeat(jnp.arange(3), -1), ValueError, "negative"),
    (lambda: jnp.repeat(jnp.arange(3), [1, 2]), ValueError, "2 entries but axis 0"),
    (lambda: jnp.repeat(jnp.arange(3), 2, axis=1), ValueError, "axis 1 is out of bounds"),
    (lambda: jnp.broadcast_to(jnp.arange(3), (2, 2)), ValueError,
     r"Incompatible shapes for broadcasting.*\(3,\).*\(2, 2\)"),
    (lambda: jnp.broadcast_to(jnp.ones((2, 3)), (3,)), ValueError, "fewer dimensions"),
    (lambda: jnp.broadcast_arrays(jnp.ones(2), jnp.ones(3)), ValueError,
     "Incompatible shapes for broadcasting"),
    (lambda: jnp.broadcast_shapes((2,), (3,)), ValueError, "Incompatible shapes"),
    (lambda: jnp.flip(jnp.ones((2, 3)), 2), ValueError, "axis 2 is out of bounds"),
    (lambda: jnp.fliplr(jnp.ones(3)), ValueError, "axis 1 is out of bounds"),
    (lambda: jnp.roll(jnp.ones((2, 3)), 1, axis=2), ValueError, "axis 2 is out of bounds"),
    (lambda: jnp.rot90(jnp.ones(3)), ValueError, "ndim at least two"),
    (lambda: jnp.rot90(jnp.ones((2, 3)), 1, (0, 0)), ValueError, "Axes must be different"),
    (lambda: jnp.pad(jnp.ones(3), -1), ValueError, "negative"),
    (lambda: jnp.pad(jnp.ones(3), 1.5), TypeError, "integral type"),
    (lambda: jnp.pad(jnp.ones(3), ((1, 2), (3, 4))), ValueError, r"unsupported shape \(2, 2\)"),
    (lambda: jnp.pad(jnp.ones(3), 1, mode="foo"), NotImplementedError, "mode 'foo'"),
    (lambda: jnp.pad(jnp.ones(3), 1, mode="edge", constant_values=1), ValueError,
     "unsupported keyword arguments for mode 'edge'"),
    (lambda: jnp.pad(jnp.ones(0), 1, mode="wrap"), ValueError, "empty axis"),
    (lambda: jnp.pad(jnp.ones(3), 1, mode="reflect", reflect_type="x"), ValueError, "reflect_type"),
    (lambda: jnp.atleast_1d(1, [2]), TypeError, "position 1"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS)
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_traced_static_arguments_raise():
    from plax.core.errors import ConcretizationTypeError
    x = np.ones(6, np.float32)
    with pytest.raises(ConcretizationTypeError, match="total_repeat_length"):
        plax.make_jaxpr(lambda r: jnp.repeat(x, r))(np.ones(6, np.int32))
    with pytest.raises(ConcretizationTypeError, match="indices_or_sections"):
        plax.make_jaxpr(lambda i: jnp.split(x, i))(np.array([2], np.int32))


def test_a_shape_may_be_any_sequence_of_length_and_items():
    # as JAX reads a shape: an object with __len__ and __getitem__ only (JAX's tests pass one
    # for the shape of a Python scalar) is a sequence; a NumPy integer is one entry
    class Shape:
        def __init__(self, *dims):
            self.dims = dims

        def __len__(self):
            return len(self.dims)

        def __getitem__(self, i):
            return self.dims[i]
    assert jnp.reshape(jnp.ones(1), Shape()).shape == ()
    assert jnp.reshape(jnp.arange(6), Shape(2, 3)).shape == (2, 3)
    assert jnp.zeros(Shape(4)).shape == (4,) and jnp.zeros(np.int64(3)).shape == (3,)
    assert jnp.broadcast_to(1.0, Shape(2)).shape == (2,)
