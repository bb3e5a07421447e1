"""Shape and slicing primitives (plax.lax.shapes) against NumPy, jaxprs and error cases."""
import builtins

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.lax.shapes as L

DTYPES = [np.float32, np.int32, np.bool_, ml_dtypes.bfloat16, np.float16]
NUMERIC = [d for d in DTYPES if d is not np.bool_]
S = builtins.slice


def _val(shape, dtype, offset=0):
    """Distinct-ish values of ``dtype`` (exact in every dtype here)."""
    base = np.arange(offset, offset + int(np.prod(shape, dtype=np.int64))).reshape(shape)
    if dtype is np.bool_:
        return (base % 3 == 0)
    return (base % 97 - 40).astype(dtype)


def _check(out, expected):
    expected = np.asarray(expected)
    got = np.asarray(out)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_array_equal(got.astype(np.float64) if got.dtype == ml_dtypes.bfloat16 else got,
                                  expected.astype(np.float64)
                                  if expected.dtype == ml_dtypes.bfloat16 else expected)


# --- NumPy references -------------------------------------------------------------------
def np_pad(x, val, config):
    """Reference lax.pad: interior padding, then edges (negative edges crop)."""
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        if interior and n > 1:
            shape = list(x.shape)
            shape[axis] = n + (n - 1) * interior
            out = np.full(shape, val, x.dtype)
            idx = [S(None)] * x.ndim
            idx[axis] = S(None, None, interior + 1)
            out[tuple(idx)] = x
            x = out

        def block(k):
            shape = list(x.shape)
            shape[axis] = k
            return np.full(shape, val, x.dtype)

        x = np.concatenate([block(max(lo, 0)), x, block(max(hi, 0))], axis=axis)
        idx = [S(None)] * x.ndim
        idx[axis] = S(-min(lo, 0), x.shape[axis] + min(hi, 0))
        x = x[tuple(idx)]
    return x


def _clamped_starts(shape, starts, sizes):
    out = []
    for d, s, k in zip(shape, starts, sizes):
        s = s + d if s < 0 else s
        out.append(min(max(s, 0), d - k))
    return out


def np_dynamic_slice(x, starts, sizes):
    st = _clamped_starts(x.shape, starts, sizes)
    return x[tuple(S(a, a + k) for a, k in zip(st, sizes))]


def np_dynamic_update_slice(x, upd, starts):
    st = _clamped_starts(x.shape, starts, upd.shape)
    out = x.copy()
    out[tuple(S(a, a + k) for a, k in zip(st, upd.shape))] = upd
    return out


# --- value cases: (id, input shapes, plax fn, numpy reference) ---------------------------
CASES = [
    ("bid_prepend", [(2, 3)], lambda x: L.broadcast_in_dim(x, (4, 2, 3), (1, 2)),
     lambda x: np.broadcast_to(x, (4, 2, 3))),
    ("bid_scalar", [()], lambda x: L.broadcast_in_dim(x, (2, 3), ()),
     lambda x: np.broadcast_to(x, (2, 3))),
    ("bid_size1_transposed", [(1, 3)], lambda x: L.broadcast_in_dim(x, (3, 2), (1, 0)),
     lambda x: np.broadcast_to(x.T, (3, 2))),
    ("bid_empty", [(0, 3)], lambda x: L.broadcast_in_dim(x, (2, 0, 3), (1, 2)),
     lambda x: np.broadcast_to(x, (2, 0, 3))),
    ("broadcast", [(3,)], lambda x: L.broadcast(x, (2, 2)), lambda x: np.broadcast_to(x, (2, 2, 3))),
    ("broadcast_0d", [()], lambda x: L.broadcast(x, (4,)), lambda x: np.broadcast_to(x, (4,))),
    ("reshape", [(2, 3)], lambda x: L.reshape(x, (3, 2)), lambda x: x.reshape(3, 2)),
    ("reshape_dims", [(2, 3)], lambda x: L.reshape(x, (6,), (1, 0)), lambda x: x.T.reshape(6)),
    ("reshape_dims3", [(2, 3, 2)], lambda x: L.reshape(x, (4, 3), (2, 0, 1)),
     lambda x: x.transpose(2, 0, 1).reshape(4, 3)),
    ("reshape_0d", [()], lambda x: L.reshape(x, (1, 1)), lambda x: x.reshape(1, 1)),
    ("reshape_to_0d", [(1, 1)], lambda x: L.reshape(x, ()), lambda x: x.reshape(())),
    ("reshape_empty", [(0, 3)], lambda x: L.reshape(x, (3, 0)), lambda x: x.reshape(3, 0)),
    ("transpose", [(2, 3, 4)], lambda x: L.transpose(x, (2, 0, 1)), lambda x: x.transpose(2, 0, 1)),
    ("transpose_empty", [(0, 2)], lambda x: L.transpose(x, (1, 0)), lambda x: x.T),
    ("squeeze", [(1, 3, 1)], lambda x: L.squeeze(x, (0, -1)), lambda x: x.reshape(3)),
    ("squeeze_to_0d", [(1,)], lambda x: L.squeeze(x, (0,)), lambda x: x.reshape(())),
    ("expand_dims", [(2, 3)], lambda x: L.expand_dims(x, (0, -1)), lambda x: x[None, :, :, None]),
    ("expand_dims_0d", [()], lambda x: L.expand_dims(x, (0,)), lambda x: x.reshape(1)),
    ("rev", [(2, 3)], lambda x: L.rev(x, (0, 1)), lambda x: x[::-1, ::-1]),
    ("rev_one_axis", [(3, 4)], lambda x: L.rev(x, (1,)), lambda x: x[:, ::-1]),
    ("rev_empty", [(0, 3)], lambda x: L.rev(x, (0,)), lambda x: x),
    ("concat0", [(2, 3), (1, 3), (0, 3)], lambda *xs: L.concatenate(xs, 0),
     lambda *xs: np.concatenate(xs, 0)),
    ("concat1", [(2, 1), (2, 2)], lambda *xs: L.concatenate(xs, 1),
     lambda *xs: np.concatenate(xs, 1)),
    ("pad", [(2, 3)], lambda x: L.pad(x, x[0, 0], [(1, 2, 0), (0, 1, 1)]),
     lambda x: np_pad(x, x[0, 0], [(1, 2, 0), (0, 1, 1)])),
    ("pad_negative", [(5,)], lambda x: L.pad(x, x[0], [(-1, -2, 0)]),
     lambda x: np_pad(x, x[0], [(-1, -2, 0)])),
    ("pad_negative_interior", [(3, 2)], lambda x: L.pad(x, x[0, 0], [(-2, 1, 2), (1, -1, 0)]),
     lambda x: np_pad(x, x[0, 0], [(-2, 1, 2), (1, -1, 0)])),
    ("pad_0d", [()], lambda x: L.pad(x, x, []), lambda x: x),
    ("pad_empty", [(0,)], lambda x: L.pad(x, np.ones((), x.dtype), [(1, 1, 3)]),
     lambda x: np.ones(2, x.dtype)),
    ("slice", [(5, 6)], lambda x: L.slice(x, (1, 0), (4, 6), (2, 3)), lambda x: x[1:4:2, 0:6:3]),
    ("slice_nostride", [(3, 4)], lambda x: L.slice(x, (1, 1), (3, 3)), lambda x: x[1:3, 1:3]),
    ("slice_empty", [(4,)], lambda x: L.slice(x, (1,), (1,)), lambda x: x[1:1]),
    ("slice_0d", [()], lambda x: L.slice(x, (), ()), lambda x: x),
    ("slice_in_dim", [(4, 5)], lambda x: L.slice_in_dim(x, -3, None, 2, -1), lambda x: x[:, -3::2]),
    ("slice_in_dim_none", [(4, 5)], lambda x: L.slice_in_dim(x, None, -1), lambda x: x[:-1]),
    ("index_in_dim", [(4, 5)], lambda x: L.index_in_dim(x, -1, 1, False), lambda x: x[:, -1]),
    ("index_in_dim_keep", [(4, 5)], lambda x: L.index_in_dim(x, 2), lambda x: x[2:3]),
    ("dynamic_slice_static", [(3, 4)], lambda x: L.dynamic_slice(x, (1, -1), (2, 2)),
     lambda x: np_dynamic_slice(x, (1, -1), (2, 2))),
    ("dynamic_slice_clamped", [(3, 4)], lambda x: L.dynamic_slice(x, (5, -9), (2, 3)),
     lambda x: np_dynamic_slice(x, (5, -9), (2, 3))),
    ("dynamic_slice_0d", [()], lambda x: L.dynamic_slice(x, (), ()), lambda x: x),
    ("dynamic_slice_empty", [(0, 3)], lambda x: L.dynamic_slice(x, (0, 1), (0, 2)),
     lambda x: x[:, 1:3]),
    ("dus", [(3, 4), (2, 2)], lambda x, u: L.dynamic_update_slice(x, u, (1, -1)),
     lambda x, u: np_dynamic_update_slice(x, u, (1, -1))),
    ("dus_clamped", [(3, 4), (2, 3)], lambda x, u: L.dynamic_update_slice(x, u, (7, -8)),
     lambda x, u: np_dynamic_update_slice(x, u, (7, -8))),
    ("dus_0d", [(), ()], lambda x, u: L.dynamic_update_slice(x, u, ()), lambda x, u: u),
]


# One main case per primitive runs over every dtype; each edge case runs over one dtype
# (rotating through DTYPES), which keeps the number of compiled executables down.
MAIN_CASES = {"bid_prepend", "broadcast", "reshape_dims", "transpose", "squeeze", "expand_dims",
              "rev", "concat0", "pad_negative_interior", "slice", "slice_in_dim",
              "index_in_dim", "dynamic_slice_clamped", "dus"}


def _value_params():
    params = []
    for k, (name, shapes, fn, ref) in enumerate(CASES):
        dts = DTYPES if name in MAIN_CASES else [DTYPES[k % len(DTYPES)]]
        params += [pytest.param(shapes, fn, ref, d, id=f"{name}-{np.dtype(d).name}") for d in dts]
    return params


@pytest.mark.parametrize("shapes,fn,ref,dtype", _value_params())
def test_values(shapes, fn, ref, dtype):
    xs = [_val(s, dtype, offset=7 * k) for k, s in enumerate(shapes)]
    _check(fn(*xs), ref(*xs))


def test_noop_cases_return_operand():
    x = plax.device_put(_val((2, 3), np.float32))
    assert L.broadcast_in_dim(x, (2, 3), (0, 1)) is x
    assert L.reshape(x, (2, 3)) is x
    assert L.reshape(x, (2, 3), (0, 1)) is x
    assert L.transpose(x, (0, 1)) is x
    assert L.squeeze(x, ()) is x
    assert L.expand_dims(x, ()) is x
    assert L.broadcast(x, ()) is x
    assert L.concatenate([x], 0) is x


# --- dynamic slices with traced (Array) indices ---------------------------------------------
@pytest.mark.parametrize("starts,idx_dtype", [
    ((1, 2), np.int32), ((-1, -3), np.int32), ((9, -9), np.int32), ((-1, -3), np.int8),
    ((1, 2), np.int8), ((1, 2), np.uint32), ((9, 7), np.uint32)])
def test_dynamic_slice_array_indices(starts, idx_dtype):
    x = _val((3, 5), np.float32)
    idx = [plax.device_put(np.asarray(s, idx_dtype)) for s in starts]
    _check(L.dynamic_slice(x, idx, (2, 2)), np_dynamic_slice(x, starts, (2, 2)))
    upd = _val((2, 2), np.float32, offset=50)
    _check(L.dynamic_update_slice(x, upd, idx), np_dynamic_update_slice(x, upd, starts))


def test_dynamic_slice_index_vector_and_mixed_dtypes():
    x = _val((3, 5), np.int32)
    vec = plax.device_put(np.array([2, -2], np.int32))
    _check(L.dynamic_slice(x, vec, (1, 2)), np_dynamic_slice(x, (2, -2), (1, 2)))
    _check(L.dynamic_slice(x, np.array([1, 1]), (2, 2)), x[1:3, 1:3])
    # Mixed index dtypes are converted to a common one (JAX would reject them).
    mixed = (plax.device_put(np.int8(-1)), np.int16(3))
    _check(L.dynamic_slice(x, mixed, (1, 2)), np_dynamic_slice(x, (-1, 3), (1, 2)))


def test_allow_negative_indices_false():
    x = _val((4,), np.float32)
    i = plax.device_put(np.int32(-1))
    _check(L.dynamic_slice(x, (i,), (2,), allow_negative_indices=False), x[0:2])
    _check(L.dynamic_slice(x, (i,), (2,)), x[2:4])
    _check(L.dynamic_slice(x, (-1,), (2,), allow_negative_indices=[False]), x[0:2])


@pytest.mark.parametrize("dtype", [np.float32, np.bool_], ids=["float32", "bool"])
def test_dynamic_in_dim_helpers(dtype):
    x = _val((3, 4), dtype)
    i = plax.device_put(np.int32(-2))
    _check(L.dynamic_slice_in_dim(x, i, 2, 1), x[:, 2:4])
    _check(L.dynamic_slice_in_dim(x, 1, 2), x[1:3])
    _check(L.dynamic_index_in_dim(x, i, 1), x[:, 2:3])
    _check(L.dynamic_index_in_dim(x, i, 1, keepdims=False), x[:, 2])
    _check(L.dynamic_index_in_dim(x, 0, -2, False), x[0])
    row = _val((1, 4), dtype, offset=30)
    _check(L.dynamic_update_slice_in_dim(x, row, i, 0), np_dynamic_update_slice(x, row, (-2, 0)))
    col = _val((3,), dtype, offset=60)
    expected = x.copy()
    expected[:, 2] = col
    _check(L.dynamic_update_index_in_dim(x, col, i, 1), expected)
    _check(L.dynamic_update_index_in_dim(x, col[:, None], 2, -1), expected)


# --- iota -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMERIC + [np.complex64, np.uint8],
                         ids=lambda d: np.dtype(d).name)
def test_iota(dtype):
    _check(L.iota(dtype, 5), np.arange(5).astype(dtype))
    _check(L.broadcasted_iota(dtype, (2, 3), 1), np.broadcast_to(np.arange(3), (2, 3)).astype(dtype))


def test_iota_edge_shapes():
    _check(L.iota(np.int32, 0), np.zeros(0, np.int32))
    _check(L.broadcasted_iota(np.float32, (3, 0, 2), 0), np.zeros((3, 0, 2), np.float32))
    _check(L.broadcasted_iota(np.int32, (3, 2), 0), np.array([[0, 0], [1, 1], [2, 2]], np.int32))
    assert not plax.make_jaxpr(lambda: L.iota(np.float32, 3))().jaxpr.outvars[0].aval.weak_type


# --- weak types -------------------------------------------------------------------------
def _weak(fn, *args):
    return plax.make_jaxpr(fn)(*args).jaxpr.outvars[0].aval.weak_type


WEAK_CASES = [
    ("broadcast_in_dim", lambda x: L.broadcast_in_dim(x, (2, 3), ()), True),
    ("reshape", lambda x: L.reshape(L.broadcast(x, (2, 3)), (6,)), True),
    ("transpose", lambda x: L.transpose(L.broadcast(x, (2, 3)), (1, 0)), True),
    ("squeeze", lambda x: L.squeeze(L.broadcast(x, (1,)), (0,)), True),
    ("expand_dims", lambda x: L.expand_dims(x, (0,)), True),
    ("rev", lambda x: L.rev(L.broadcast(x, (3,)), (0,)), True),
    ("slice", lambda x: L.slice(L.broadcast(x, (3,)), (1,), (2,)), True),
    ("dynamic_slice", lambda x: L.dynamic_slice(L.broadcast(x, (3,)), (1,), (1,)), True),
    ("pad_weak_value", lambda x: L.pad(L.broadcast(x, (3,)), 0.0, [(1, 1, 0)]), True),
    ("pad_strong_value", lambda x: L.pad(L.broadcast(x, (3,)), np.float32(0), [(1, 1, 0)]), False),
    ("concat_weak", lambda x: L.concatenate([L.broadcast(x, (2,)), L.broadcast(x, (3,))], 0), True),
    ("concat_mixed", lambda x: L.concatenate([L.broadcast(x, (2,)), np.ones(3, np.float32)], 0),
     False),
    ("dus", lambda x: L.dynamic_update_slice(L.broadcast(x, (3,)), L.broadcast(x, (1,)), (0,)),
     False),
]


@pytest.mark.parametrize("name,fn,weak", WEAK_CASES, ids=[c[0] for c in WEAK_CASES])
def test_weak_type(name, fn, weak):
    assert _weak(fn, 1.0) is weak
    assert _weak(fn, np.float32(1.0)) is False


# --- jaxprs -----------------------------------------------------------------------------
X23 = np.zeros((2, 3), np.float32)

JAXPR_CASES = [
    (lambda x: L.broadcast_in_dim(x, (4, 2, 3), (1, 2)),
     "b:f32[4,2,3] = broadcast_in_dim[broadcast_dimensions=(1, 2)] a"),
    (lambda x: L.reshape(x, (3, 2)), "reshape[dimensions=None new_sizes=(3, 2) sharding=None] a"),
    (lambda x: L.reshape(x, (3, 2), (1, 0)),
     "b:f32[3,2] = reshape[dimensions=(1, 0) new_sizes=(3, 2) sharding=None] a"),
    (lambda x: L.transpose(x, (1, 0)), "b:f32[3,2] = transpose[permutation=(1, 0)] a"),
    (lambda x: L.squeeze(L.expand_dims(x, (0,)), (-3,)), "c:f32[2,3] = squeeze[dimensions=(0,)] b"),
    (lambda x: L.expand_dims(x, (0, 2)),
     "b:f32[1,2,1,3] = broadcast_in_dim[broadcast_dimensions=(1, 3)] a"),
    (lambda x: L.rev(x, (0,)), "b:f32[2,3] = rev[dimensions=(0,)] a"),
    (lambda x: L.concatenate([x, x], 0), "b:f32[4,3] = concatenate[dimension=0] a a"),
    (lambda x: L.pad(x, 0.0, [(1, -1, 1), (0, 0, 0)]),
     "b:f32[3,3] = pad[padding_config=((1, -1, 1), (0, 0, 0))] a 0.0:f32[]"),
    (lambda x: L.slice(x, (0, 1), (2, 3)),
     "b:f32[2,2] = slice[limit_indices=(2, 3) start_indices=(0, 1) strides=None] a"),
    (lambda x: L.slice_in_dim(x, 0, 2, 1, 1),
     "slice[limit_indices=(2, 2) start_indices=(0, 0) strides=(1, 1)] a"),
    (lambda x: L.index_in_dim(x, 1, 1, False), "c:f32[2] = squeeze[dimensions=(1,)] b"),
    (lambda x: L.dynamic_slice(x, (1, -1), (1, 2)),
     "b:f32[1,2] = dynamic_slice[slice_sizes=(1, 2)] a 1:i32[] 2:i32[]"),
    (lambda x: L.dynamic_slice_in_dim(x, np.int8(1), 2, 1),
     "dynamic_slice[slice_sizes=(2, 2)] a 0:i8[] 1:i8[]"),
    (lambda x: L.dynamic_update_slice(x, L.slice(x, (0, 0), (1, 3)), (0, 0)),
     "dynamic_update_slice a b 0:i32[] 0:i32[]"),
    (lambda x: L.iota(np.int32, 5), "b:i32[5] = iota[dimension=0 dtype=int32 shape=(5,) sharding=None]"),
    (lambda x: L.broadcasted_iota(np.float32, (2, 3), 1),
     "iota[dimension=1 dtype=float32 shape=(2, 3) sharding=None]"),
]


@pytest.mark.parametrize("fn,expected", JAXPR_CASES,
                         ids=[f"{i}-{c[1].split('[')[0].split()[-1]}" for i, c in enumerate(JAXPR_CASES)])
def test_jaxpr(fn, expected):
    assert expected in str(plax.make_jaxpr(fn)(X23))


def test_jaxpr_traced_index_normalisation():
    text = str(plax.make_jaxpr(lambda x, i: L.dynamic_slice(x, (i, 1), (1, 2)))(X23, np.int32(1)))
    assert "lt b 0:i32[]" in text and "add b 2:i32[]" in text and "select_n" in text
    assert "dynamic_slice[slice_sizes=(1, 2)] a e 1:i32[]" in text
    # Unsigned indices are never negative: no normalisation.
    text = str(plax.make_jaxpr(lambda x, i: L.dynamic_slice(x, (i, i), (1, 2)))(X23, np.uint32(1)))
    assert "select_n" not in text and "dynamic_slice[slice_sizes=(1, 2)] a b b" in text
    # Python-int (weak) traced indices are made strong first.
    text = str(plax.make_jaxpr(lambda x, i: L.dynamic_index_in_dim(x, i, 1, False))(X23, 1))
    assert "convert_element_type[new_dtype=int32" in text and "squeeze[dimensions=(1,)]" in text


def test_jaxpr_noops_have_no_equations():
    for fn in (lambda x: L.reshape(x, (2, 3)), lambda x: L.broadcast(x, ()),
               lambda x: L.transpose(x, (0, 1)), lambda x: L.squeeze(x, ())):
        assert not plax.make_jaxpr(fn)(X23).jaxpr.eqns


# --- errors -----------------------------------------------------------------------------
X = np.zeros((2, 3), np.float32)

ERROR_CASES = [
    (lambda: L.broadcast_in_dim(X, (4, 2), (0, 1)), TypeError, r"must either be 1, or be equal.*\(2, 3\)"),
    (lambda: L.broadcast_in_dim(X, (4, 2, 3), (1,)), TypeError, "length equal to operand ndim"),
    (lambda: L.broadcast_in_dim(X, (4, 2, 3), (1, 3)), TypeError, "distinct output dimensions"),
    (lambda: L.broadcast_in_dim(X, (2, 3, 3), (1, 1)), TypeError, "distinct output dimensions"),
    (lambda: L.broadcast_in_dim(X, (4, -2, 3), (1, 2)), TypeError, "shape must have every element"),
    (lambda: L.broadcast(X, (-1,)), TypeError, "nonnegative"),
    (lambda: L.broadcast_in_dim(X, (2.5, 3), (0, 1)), TypeError, "1D sequences of concrete values of integer type"),
    (lambda: L.reshape(X, (4, 2)), ValueError, r"total size must be unchanged.*\(2, 3\)"),
    (lambda: L.reshape(X, (-1, 6)), TypeError, "nonnegative"),
    (lambda: L.reshape(X, (3, 2), (0,)), TypeError, "permutation of operand dimensions"),
    (lambda: L.reshape(X, (3, 2), (0, 0)), TypeError, "permutation of operand dimensions"),
    (lambda: L.transpose(X, (0,)), TypeError, r"isn't a permutation.*\(2, 3\)"),
    (lambda: L.transpose(X, (0, 2)), TypeError, "isn't a permutation"),
    (lambda: L.transpose(X, (-1, 0)), TypeError, "isn't a permutation"),
    (lambda: L.squeeze(X, (0,)), ValueError, "size not equal to one"),
    (lambda: L.squeeze(X, (2,)), ValueError, "out of bounds"),
    (lambda: L.squeeze(np.zeros((1, 1)), (0, -2)), ValueError, "not unique"),
    (lambda: L.expand_dims(X, (0, 0)), ValueError, "repeated axis"),
    (lambda: L.expand_dims(X, (5,)), ValueError, "out of bounds"),
    (lambda: L.rev(X, (0, 0)), TypeError, "must be unique"),
    (lambda: L.rev(X, (2,)), TypeError, "less than operand ndim"),
    (lambda: L.rev(X, (-1,)), TypeError, "nonnegative"),
    (lambda: L.concatenate([X, X.astype(np.int32)], 0), TypeError, "same dtypes, got float32, int32"),
    (lambda: L.concatenate([X, X[0]], 0), TypeError, "different numbers of dimensions"),
    (lambda: L.concatenate([X, X[:1, :2]], 0), TypeError, r"differ in dimensions other.*\(1, 2\)"),
    (lambda: L.concatenate([X, X], 2), TypeError, "dimension out of bounds"),
    (lambda: L.concatenate([X, X], -1), TypeError, "dimension out of bounds"),
    (lambda: L.concatenate([np.float32(1), np.float32(2)], 0), TypeError, "out of bounds"),
    (lambda: L.concatenate([], 0), ValueError, "non-empty"),
    (lambda: L.pad(X, np.int32(0), [(1, 1, 0), (0, 0, 0)]), TypeError, "same dtype: got float32 and int32"),
    (lambda: L.pad(X, np.zeros(2, np.float32), [(1, 1, 0), (0, 0, 0)]), ValueError, "must be a scalar"),
    (lambda: L.pad(X, 0.0, [(1, 1, 0)]), ValueError, r"length of padding_config.*\(2, 3\)"),
    (lambda: L.pad(X, 0.0, [(1, 1, -1), (0, 0, 0)]), ValueError, "interior padding"),
    (lambda: L.pad(X, 0.0, [(-3, 0, 0), (0, 0, 0)]), ValueError, r"not at least 0.*\(-1, 3\)"),
    (lambda: L.pad(X, 0.0, [(1, 1), (0, 0, 0)]), ValueError, "triples"),
    (lambda: L.slice(X, (0,), (1,)), ValueError, r"start_indices must have length.*\(2, 3\)"),
    (lambda: L.slice(X, (0, 0), (1,)), TypeError, "limit_indices must have the same length"),
    (lambda: L.slice(X, (0, 0), (3, 1)), TypeError, r"less than or equal to operand shape"),
    (lambda: L.slice(X, (-1, 0), (1, 1)), TypeError, "nonnegative"),
    (lambda: L.slice(X, (1, 0), (0, 1)), TypeError, "greater than or equal to start_indices"),
    (lambda: L.slice(X, (0, 0), (1, 1), (0, 1)), TypeError, "strides must be positive"),
    (lambda: L.slice(X, (0, 0), (1, 1), (1,)), TypeError, "strides must have length"),
    (lambda: L.index_in_dim(X, 5, 1), IndexError, "out of bounds for axis 1 with size 3"),
    (lambda: L.slice_in_dim(X, 0, 1, 1, 3), ValueError, "axis 3 is out of bounds"),
    (lambda: L.dynamic_slice(X, (0,), (1, 2)), ValueError, r"one start index per.*\(2, 3\)"),
    (lambda: L.dynamic_slice(X, (0, 1), (1,)), ValueError, "slice_sizes must have one size"),
    (lambda: L.dynamic_slice(X, (0, 1), (3, 2)), TypeError, r"less than or equal to operand shape"),
    (lambda: L.dynamic_slice(X, (0, 1), (-1, 1)), TypeError, "nonnegative"),
    (lambda: L.dynamic_slice(X, (0.5, 1), (1, 1)), TypeError, "integer scalars"),
    (lambda: L.dynamic_slice(X, (True, 1), (1, 1)), TypeError, "integer scalars"),
    (lambda: L.dynamic_slice(X, (np.zeros(2, np.int32), 1), (1, 1)), TypeError, "integer scalars"),
    (lambda: L.dynamic_slice(X, (0, 1), (1.5, 1)), TypeError, "1D sequences of concrete values of integer type"),
    (lambda: L.dynamic_slice(X, (0, 0), (1, 1), allow_negative_indices=[True]), TypeError,
     "allow_negative_indices"),
    (lambda: L.dynamic_update_slice(X, np.zeros((3, 1), np.float32), (0, 1)), TypeError,
     r"smaller than operand shape.*\(3, 1\)"),
    (lambda: L.dynamic_update_slice(X, np.zeros((1, 1), np.int32), (0, 1)), TypeError,
     "same dtypes, got float32, int32"),
    (lambda: L.dynamic_update_slice(X, np.zeros((1,), np.float32), (0, 1)), TypeError, "same rank"),
    (lambda: L.dynamic_update_slice(X, np.zeros((1, 1), np.float32), (0,)), ValueError,
     "one start index per"),
    (lambda: L.iota(np.int32, -1), TypeError, "nonnegative"),
    (lambda: L.iota(np.bool_, 3), TypeError, "does not accept dtype bool"),
    (lambda: L.iota("not-a-dtype", 3), TypeError, "not a dtype"),
    (lambda: L.broadcasted_iota(np.int32, (2, 3), 2), ValueError, "between 0 and len"),
    (lambda: L.broadcasted_iota(np.int32, (2, 3), -1), ValueError, "between 0 and len"),
]


@pytest.mark.parametrize("fn,exc,match", ERROR_CASES, ids=[str(i) for i in range(len(ERROR_CASES))])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_errors_also_raised_when_staging():
    with pytest.raises(TypeError, match="isn't a permutation"):
        plax.make_jaxpr(lambda x: L.transpose(x, (0, 0)))(X)
    with pytest.raises(TypeError, match="same dtypes"):
        plax.make_jaxpr(lambda x, y: L.concatenate([x, y], 0))(X, X.astype(np.int32))
