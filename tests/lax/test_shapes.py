"""Shape and slicing primitives: one table row per use of a primitive (its static
parameters in the row), checked by lax_rows for values against NumPy, jit, vmap (batched
start indices included), derivatives and jaxprs; then dynamic slices with Array indices,
iota, weak types, printed jaxprs, the gather/scatter that batched indices become, and errors.
"""
import builtins

import numpy as np
import pytest

import helpers
from helpers import BF16, BOOL, C64, F16, F32, I32, check
from lax_rows import ALL_GRAD, B, INDEX_CYCLE, REAL_GRAD, Row, table_tests
import plax
from plax import lax
from plax.test_util import check_grads

DTYPES = [F32, I32, BOOL, BF16, F16]
NUMERIC = [d for d in DTYPES if d != BOOL]
S = builtins.slice


def _val(shape, dtype, offset=0):
    """Distinct-ish values of ``dtype`` (exact in every dtype here)."""
    base = np.arange(offset, offset + int(np.prod(shape, dtype=np.int64))).reshape(shape)
    if np.dtype(dtype) == BOOL:
        return (base % 3 == 0)
    return (base % 97 - 40).astype(dtype)


def _check(out, expected):
    check(out, np.asarray(expected), np.asarray(expected).dtype, rtol=0)


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
        s = int(s)
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


def np_dynamic_update_index(x, u, i, axis):
    """Reference lax.dynamic_update_index_in_dim: ``u`` replaces index ``i`` of ``axis``."""
    (start,) = _clamped_starts((x.shape[axis],), (i,), (1,))
    out = x.copy()
    out[(S(None),) * axis + (start,)] = u
    return out


# --- the table ------------------------------------------------------------------------------
def sh(name, fn, shapes, ref, dtypes, call=None, inputs=None, **kw):
    """A shape row: exact comparisons; arguments "real" unless ``inputs`` says otherwise."""
    inputs = inputs or ("real",) * len(shapes)
    return Row(fn, ref, tuple(inputs), tuple(dtypes), shapes=tuple(shapes), call=call,
               name=name, rtol=0, **kw)


def pad(name, shape, config, dtypes, value_arg=False, **kw):
    """A pad row; the padding value is 3 (True for bool), or with ``value_arg`` an argument
    (batched under vmap, and differentiated: its cotangent sums the padded positions)."""
    if value_arg:
        return sh(name, lax.pad, [shape, ()], lambda x, v: np_pad(x, v, config), dtypes,
                  static=(config,), **kw)
    return sh(name, lax.pad, [shape], lambda x: np_pad(x, np.asarray(3, x.dtype), config),
              dtypes, call=lambda x: lax.pad(x, np.asarray(3, x.dtype), config), **kw)


SQ = {"grad": "squared"}  # linear ops: differentiate square(f), so order 2 checks something
V = {"variant": True}     # value, jaxpr (and derivative) checks only: see lax_rows
IDX = ("real", "index")

ROWS = [
    # broadcast_in_dim, broadcast, expand_dims
    sh("bid_prepend", lax.broadcast_in_dim, [(2, 3)], lambda x: np.broadcast_to(x, (4, 2, 3)),
       DTYPES, static=((4, 2, 3), (1, 2)), **SQ),
    sh("bid_insert", lax.broadcast_in_dim, [(4, 3)],
       lambda x: np.broadcast_to(x[None, :, None], (2, 4, 5, 3)), [F32],
       static=((2, 4, 5, 3), (1, 3))),
    sh("bid_scalar", lax.broadcast_in_dim, [()], lambda x: np.broadcast_to(x, (2, 3)), [I32],
       static=((2, 3), ()), **SQ),
    sh("bid_size1_transposed", lax.broadcast_in_dim, [(1, 3)],
       lambda x: np.broadcast_to(x.T, (3, 2)), [BOOL], static=((3, 2), (1, 0)), **V),
    sh("bid_size1_prepend", lax.broadcast_in_dim, [(1, 3)],
       lambda x: np.broadcast_to(x, (2, 4, 3)), [I32], static=((2, 4, 3), (1, 2))),
    sh("bid_size1_sum", lax.broadcast_in_dim, [(1, 3)],
       lambda x: np.broadcast_to(x[:, None, :], (2, 4, 3)), [F32], static=((2, 4, 3), (0, 2)),
       grad_dtypes=REAL_GRAD, **SQ, **V),
    sh("bid_empty", lax.broadcast_in_dim, [(0, 3)], lambda x: np.broadcast_to(x, (2, 0, 3)),
       [BF16], static=((2, 0, 3), (1, 2)), **V),
    sh("broadcast", lax.broadcast, [(3,)], lambda x: np.broadcast_to(x, (2, 2, 3)), DTYPES,
       static=((2, 2),), prim="broadcast_in_dim"),
    sh("broadcast_rank2", lax.broadcast, [(4, 3)], lambda x: np.broadcast_to(x, (2, 4, 3)),
       [BOOL], static=((2,),), prim="broadcast_in_dim"),
    sh("broadcast_0d", lax.broadcast, [()], lambda x: np.broadcast_to(x, (4,)), [F32],
       static=((4,),), prim="broadcast_in_dim", **V),
    sh("expand_dims", lax.expand_dims, [(2, 3)], lambda x: x[None, :, :, None], DTYPES,
       static=((0, -1),), prim="broadcast_in_dim"),
    sh("expand_dims_inner", lax.expand_dims, [(4, 3)], lambda x: x[None, :, None], [F32],
       static=((0, 2),), prim="broadcast_in_dim", grad_dtypes=REAL_GRAD, **SQ),
    sh("expand_dims_0d", lax.expand_dims, [()], lambda x: x.reshape(1), [BOOL], static=((0,),),
       prim="broadcast_in_dim", **V),
    # reshape
    sh("reshape", lax.reshape, [(2, 3)], lambda x: x.reshape(3, 2), [I32], static=((3, 2),),
       **SQ, **V),
    sh("reshape_dims", lax.reshape, [(2, 3)], lambda x: x.T.reshape(6), DTYPES,
       static=((6,), (1, 0)), grad_dtypes=ALL_GRAD, **SQ),
    sh("reshape_dims3", lax.reshape, [(2, 3, 2)], lambda x: x.transpose(2, 0, 1).reshape(4, 3),
       [BF16], static=((4, 3), (2, 0, 1)), **V),
    sh("reshape_split", lax.reshape, [(4, 3)], lambda x: x.reshape(3, 2, 2), [F32],
       static=((3, 2, 2),)),
    sh("reshape_dims_merge", lax.reshape, [(4, 3)], lambda x: x.T.reshape(2, 6), [I32],
       static=((2, 6), (1, 0))),
    sh("reshape_0d", lax.reshape, [()], lambda x: x.reshape(1, 1), [F16], static=((1, 1),),
       **V),
    sh("reshape_to_0d", lax.reshape, [(1, 1)], lambda x: x.reshape(()), [F32], static=((),)),
    sh("reshape_empty", lax.reshape, [(0, 3)], lambda x: x.reshape(3, 0), [I32],
       static=((3, 0),), **V),
    # transpose, squeeze, rev
    sh("transpose", lax.transpose, [(2, 3, 4)], lambda x: x.transpose(2, 0, 1), DTYPES,
       static=((2, 0, 1),), grad_dtypes=ALL_GRAD, **SQ),
    sh("transpose_empty", lax.transpose, [(0, 2)], lambda x: x.T, [BF16], static=((1, 0),),
       **V),
    sh("squeeze", lax.squeeze, [(1, 3, 1)], lambda x: x.reshape(3), DTYPES, static=((0, -1),),
       grad_dtypes=REAL_GRAD, **SQ),
    sh("squeeze_inner", lax.squeeze, [(1, 4, 1, 3)], lambda x: x.reshape(4, 3), [F32],
       static=((0, 2),)),
    sh("squeeze_to_0d", lax.squeeze, [(1,)], lambda x: x.reshape(()), [F32], static=((0,),),
       **V),
    sh("rev", lax.rev, [(2, 3)], lambda x: x[::-1, ::-1], DTYPES, static=((0, 1),),
       grad_dtypes=REAL_GRAD, **SQ),
    sh("rev_outer_axes", lax.rev, [(2, 4, 3)], lambda x: x[::-1, :, ::-1], [BOOL],
       static=((0, 2),)),
    sh("rev_one_axis", lax.rev, [(3, 4)], lambda x: x[:, ::-1], [F16], static=((1,),), **V),
    sh("rev_empty", lax.rev, [(0, 3)], lambda x: x, [F32], static=((0,),), **V),
    # concatenate
    sh("concat0", lax.concatenate, [(2, 3), (1, 3), (0, 3)], lambda *xs: np.concatenate(xs, 0),
       DTYPES, call=lambda *xs: lax.concatenate(xs, 0)),
    sh("concat1", lax.concatenate, [(2, 1), (2, 2)], lambda *xs: np.concatenate(xs, 1), [BOOL],
       call=lambda *xs: lax.concatenate(xs, 1), **V),
    # an operand twice: its cotangent is the sum of two slices
    sh("concat_repeated", lax.concatenate, [(4, 3), (4, 2)],
       lambda x, y: np.concatenate([x, y, x], 1), [F32],
       call=lambda x, y: lax.concatenate([x, y, x], 1), grad_dtypes=ALL_GRAD, **SQ),
    sh("concat_axis0", lax.concatenate, [(4, 3), (2, 3)],
       lambda x, y: np.concatenate([y, x], 0), [I32],
       call=lambda x, y: lax.concatenate([y, x], 0)),
    # pad (value_arg: the padding value is an argument, batched and differentiated too)
    pad("pad", (2, 3), ((1, 2, 0), (0, 1, 1)), [BF16, F32], value_arg=True, grad_dtypes=(F32,),
        **SQ, **V),
    pad("pad_negative", (5,), ((-1, -2, 0),), [F16], **V),
    pad("pad_negative_interior", (3, 2), ((-2, 1, 2), (1, -1, 0)), DTYPES),
    pad("pad_negative_both", (2, 3), ((-1, 1, 0), (1, -2, 1)), [F32], grad_dtypes=ALL_GRAD,
        **SQ, **V),
    pad("pad_interior", (2, 3), ((0, 0, 1), (1, 0, 2)), [F32], grad_dtypes=REAL_GRAD, **SQ,
        **V),
    pad("pad_interior_crop", (2, 3), ((1, -1, 1), (0, 2, 0)), [F32], value_arg=True,
        grad_dtypes=REAL_GRAD, **SQ, **V),
    pad("pad_mixed", (4, 3), ((1, 2, 1), (-1, 0, 0)), [F32], value_arg=True),
    pad("pad_interior_negative_1d", (4,), ((-2, 1, 2),), [I32], value_arg=True),
    pad("pad_0d", (), (), [I32], value_arg=True, **V),
    pad("pad_empty", (0,), ((1, 1, 3),), [BOOL], **V),
    # slice and its helpers
    sh("slice", lax.slice, [(5, 6)], lambda x: x[1:4:2, 0:6:3], DTYPES,
       static=((1, 0), (4, 6), (2, 3))),
    sh("slice_strided", lax.slice, [(2, 5)], lambda x: x[0:2, 0:5:2], [F32],
       static=((0, 0), (2, 5), (1, 2)), grad_dtypes=ALL_GRAD, **SQ, **V),
    sh("slice_nostride", lax.slice, [(3, 4)], lambda x: x[1:3, 1:3], [F16],
       static=((1, 1), (3, 3)), **SQ, **V),
    sh("slice_strided_rows", lax.slice, [(4, 3)], lambda x: x[1:4:2, 0:3:2], [F32],
       static=((1, 0), (4, 3), (2, 2))),
    sh("slice_empty", lax.slice, [(4,)], lambda x: x[1:1], [F32], static=((1,), (1,)), **V),
    sh("slice_0d", lax.slice, [()], lambda x: x, [I32], static=((), ()), **V),
    sh("slice_in_dim", lax.slice_in_dim, [(4, 5)], lambda x: x[:, -3::2], DTYPES,
       static=(-3, None, 2, -1), prim="slice"),
    sh("slice_in_dim_none", lax.slice_in_dim, [(4, 5)], lambda x: x[:-1], [BF16],
       static=(None, -1), prim="slice", **V),
    sh("slice_in_dim_inner", lax.slice_in_dim, [(4, 5)], lambda x: x[:, 1:-1], [F32],
       call=lambda x: lax.slice_in_dim(x, 1, -1, axis=1), prim="slice"),
    sh("index_in_dim", lax.index_in_dim, [(4, 5)], lambda x: x[:, -1], DTYPES,
       static=(-1, 1, False), prim="squeeze"),
    sh("index_in_dim_keep", lax.index_in_dim, [(4, 5)], lambda x: x[2:3], [F32], static=(2,),
       prim="slice", **V),
    # dynamic_slice / dynamic_update_slice: static starts (negative ones count from the
    # end; out-of-range ones are clamped) and traced ones (the "index" vocabulary)
    sh("dynamic_slice_static", lax.dynamic_slice, [(3, 4)],
       lambda x: np_dynamic_slice(x, (1, -1), (2, 2)), [I32, F32],
       static=((1, -1), (2, 2)), grad_dtypes=REAL_GRAD, **SQ, **V),
    sh("dynamic_slice_clamped", lax.dynamic_slice, [(3, 4)],
       lambda x: np_dynamic_slice(x, (5, -9), (2, 3)), DTYPES, static=((5, -9), (2, 3)),
       grad_dtypes=REAL_GRAD, **SQ),
    sh("dynamic_slice_0d", lax.dynamic_slice, [()], lambda x: x, [BF16], static=((), ()),
       **V),
    sh("dynamic_slice_empty", lax.dynamic_slice, [(0, 3)], lambda x: x[:, 1:3], [F16],
       static=((0, 1), (0, 2)), **V),
    sh("dynamic_slice_traced", lax.dynamic_slice, [(4, 3), (), ()],
       lambda x, i, j: np_dynamic_slice(x, (i, j), (2, 2)), [F32, BOOL],
       call=lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 2)),
       inputs=("real", "index", "index")),
    sh("dynamic_slice_in_dim_traced", lax.dynamic_slice_in_dim, [(4, 5), ()],
       lambda x, i: np_dynamic_slice(x, (0, i), (4, 2)), [I32],
       call=lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1), inputs=IDX,
       prim="dynamic_slice"),
    sh("dynamic_index_in_dim_traced", lax.dynamic_index_in_dim, [(4, 5), ()],
       lambda x, i: np_dynamic_slice(x, (i, 0), (1, 5))[0], [F32],
       call=lambda x, i: lax.dynamic_index_in_dim(x, i, 0, keepdims=False), inputs=IDX,
       prim="squeeze"),
    sh("dus", lax.dynamic_update_slice, [(3, 4), (2, 2)],
       lambda x, u: np_dynamic_update_slice(x, u, (1, -1)), DTYPES, static=((1, -1),),
       grad_dtypes=ALL_GRAD, **SQ),
    sh("dus_clamped", lax.dynamic_update_slice, [(3, 4), (2, 3)],
       lambda x, u: np_dynamic_update_slice(x, u, (7, -8)), [I32, F32], static=((7, -8),),
       grad_dtypes=REAL_GRAD, **SQ, **V),
    sh("dus_0d", lax.dynamic_update_slice, [(), ()], lambda x, u: u, [BOOL], static=((),),
       **V),
    sh("dus_traced", lax.dynamic_update_slice, [(4, 3), (2, 2), ()],
       lambda x, u, i: np_dynamic_update_slice(x, u, (i, 1)), [F32],
       call=lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)),
       inputs=("real", "real", "index")),
    sh("dynamic_update_index_in_dim_traced", lax.dynamic_update_index_in_dim,
       [(4, 3), (4,), ()], lambda x, u, i: np_dynamic_update_index(x, u, i, 1), [BOOL],
       call=lambda x, u, i: lax.dynamic_update_index_in_dim(x, u, i, 1),
       inputs=("real", "real", "index"), prim="dynamic_update_slice"),
]

test_value, test_jit, test_vmap, test_grad, test_jaxpr = table_tests(ROWS)


def test_noop_cases_return_operand():
    x = plax.device_put(_val((2, 3), np.float32))
    assert lax.broadcast_in_dim(x, (2, 3), (0, 1)) is x
    assert lax.reshape(x, (2, 3)) is x
    assert lax.reshape(x, (2, 3), (0, 1)) is x
    assert lax.transpose(x, (0, 1)) is x
    assert lax.squeeze(x, ()) is x
    assert lax.expand_dims(x, ()) is x
    assert lax.broadcast(x, ()) is x
    assert lax.concatenate([x], 0) is x


# --- dynamic slices with traced (Array) indices ---------------------------------------------
@pytest.mark.parametrize("starts,idx_dtype", [
    ((1, 2), np.int32), ((-1, -3), np.int32), ((9, -9), np.int32), ((-1, -3), np.int8),
    ((1, 2), np.int8), ((1, 2), np.uint32), ((9, 7), np.uint32)])
def test_dynamic_slice_array_indices(starts, idx_dtype):
    x = _val((3, 5), np.float32)
    idx = [plax.device_put(np.asarray(s, idx_dtype)) for s in starts]
    _check(lax.dynamic_slice(x, idx, (2, 2)), np_dynamic_slice(x, starts, (2, 2)))
    upd = _val((2, 2), np.float32, offset=50)
    _check(lax.dynamic_update_slice(x, upd, idx), np_dynamic_update_slice(x, upd, starts))


def test_dynamic_slice_index_vector_and_mixed_dtypes():
    x = _val((3, 5), np.int32)
    vec = plax.device_put(np.array([2, -2], np.int32))
    _check(lax.dynamic_slice(x, vec, (1, 2)), np_dynamic_slice(x, (2, -2), (1, 2)))
    _check(lax.dynamic_slice(x, np.array([1, 1]), (2, 2)), x[1:3, 1:3])
    # Mixed index dtypes are converted to a common one (JAX would reject them).
    mixed = (plax.device_put(np.int8(-1)), np.int16(3))
    _check(lax.dynamic_slice(x, mixed, (1, 2)), np_dynamic_slice(x, (-1, 3), (1, 2)))


def test_allow_negative_indices_false():
    x = _val((4,), np.float32)
    i = plax.device_put(np.int32(-1))
    _check(lax.dynamic_slice(x, (i,), (2,), allow_negative_indices=False), x[0:2])
    _check(lax.dynamic_slice(x, (i,), (2,)), x[2:4])
    _check(lax.dynamic_slice(x, (-1,), (2,), allow_negative_indices=[False]), x[0:2])


@pytest.mark.parametrize("dtype", [np.float32, np.bool_], ids=["float32", "bool"])
def test_dynamic_in_dim_helpers(dtype):
    x = _val((3, 4), dtype)
    i = plax.device_put(np.int32(-2))
    _check(lax.dynamic_slice_in_dim(x, i, 2, 1), x[:, 2:4])
    _check(lax.dynamic_slice_in_dim(x, 1, 2), x[1:3])
    _check(lax.dynamic_index_in_dim(x, i, 1), x[:, 2:3])
    _check(lax.dynamic_index_in_dim(x, i, 1, keepdims=False), x[:, 2])
    _check(lax.dynamic_index_in_dim(x, 0, -2, False), x[0])
    row = _val((1, 4), dtype, offset=30)
    _check(lax.dynamic_update_slice_in_dim(x, row, i, 0), np_dynamic_update_slice(x, row, (-2, 0)))
    col = _val((3,), dtype, offset=60)
    expected = x.copy()
    expected[:, 2] = col
    _check(lax.dynamic_update_index_in_dim(x, col, i, 1), expected)
    _check(lax.dynamic_update_index_in_dim(x, col[:, None], 2, -1), expected)


# --- iota -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMERIC + [C64, np.dtype(np.uint8)], ids=lambda d: d.name)
def test_iota(dtype):
    _check(lax.iota(dtype, 5), np.arange(5).astype(dtype))
    _check(lax.broadcasted_iota(dtype, (2, 3), 1), np.broadcast_to(np.arange(3), (2, 3)).astype(dtype))


def test_iota_edge_shapes():
    _check(lax.iota(np.int32, 0), np.zeros(0, np.int32))
    _check(lax.broadcasted_iota(np.float32, (3, 0, 2), 0), np.zeros((3, 0, 2), np.float32))
    _check(lax.broadcasted_iota(np.int32, (3, 2), 0), np.array([[0, 0], [1, 1], [2, 2]], np.int32))
    assert not plax.make_jaxpr(lambda: lax.iota(np.float32, 3))().jaxpr.outvars[0].aval.weak_type


def test_iota_under_vmap_and_float0_tangent():
    check(plax.vmap(lambda x: lax.add(x, lax.iota(np.int32, 3)))(np.arange(6, dtype=np.int32)
                                                                   .reshape(2, 3)),
          np.arange(6).reshape(2, 3) + np.arange(3), I32, rtol=0)
    _, t = plax.jvp(lambda x: lax.add(lax.iota(np.int32, 3), x), (np.arange(3, dtype=np.int32),),
                    (np.zeros(3, plax.float0),))
    assert np.asarray(t).dtype == plax.float0 and np.shape(t) == (3,)


# --- weak types -------------------------------------------------------------------------
def _weak(fn, *args):
    return plax.make_jaxpr(fn)(*args).jaxpr.outvars[0].aval.weak_type


WEAK_CASES = [
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3), ()), True),
    ("reshape", lambda x: lax.reshape(lax.broadcast(x, (2, 3)), (6,)), True),
    ("transpose", lambda x: lax.transpose(lax.broadcast(x, (2, 3)), (1, 0)), True),
    ("squeeze", lambda x: lax.squeeze(lax.broadcast(x, (1,)), (0,)), True),
    ("expand_dims", lambda x: lax.expand_dims(x, (0,)), True),
    ("rev", lambda x: lax.rev(lax.broadcast(x, (3,)), (0,)), True),
    ("slice", lambda x: lax.slice(lax.broadcast(x, (3,)), (1,), (2,)), True),
    ("dynamic_slice", lambda x: lax.dynamic_slice(lax.broadcast(x, (3,)), (1,), (1,)), True),
    ("pad_weak_value", lambda x: lax.pad(lax.broadcast(x, (3,)), 0.0, [(1, 1, 0)]), True),
    ("pad_strong_value", lambda x: lax.pad(lax.broadcast(x, (3,)), np.float32(0), [(1, 1, 0)]), False),
    ("concat_weak", lambda x: lax.concatenate([lax.broadcast(x, (2,)), lax.broadcast(x, (3,))], 0), True),
    ("concat_mixed", lambda x: lax.concatenate([lax.broadcast(x, (2,)), np.ones(3, np.float32)], 0),
     False),
    ("dus", lambda x: lax.dynamic_update_slice(lax.broadcast(x, (3,)), lax.broadcast(x, (1,)), (0,)),
     False),
]


@pytest.mark.parametrize("name,fn,weak", WEAK_CASES, ids=[c[0] for c in WEAK_CASES])
def test_weak_type(name, fn, weak):
    assert _weak(fn, 1.0) is weak
    assert _weak(fn, np.float32(1.0)) is False


# --- jaxprs -----------------------------------------------------------------------------
X23 = np.zeros((2, 3), np.float32)

JAXPR_CASES = [
    (lambda x: lax.broadcast_in_dim(x, (4, 2, 3), (1, 2)),
     "b:f32[4,2,3] = broadcast_in_dim[broadcast_dimensions=(1, 2)] a"),
    (lambda x: lax.reshape(x, (3, 2)), "reshape[dimensions=None new_sizes=(3, 2) sharding=None] a"),
    (lambda x: lax.reshape(x, (3, 2), (1, 0)),
     "b:f32[3,2] = reshape[dimensions=(1, 0) new_sizes=(3, 2) sharding=None] a"),
    (lambda x: lax.transpose(x, (1, 0)), "b:f32[3,2] = transpose[permutation=(1, 0)] a"),
    (lambda x: lax.squeeze(lax.expand_dims(x, (0,)), (-3,)), "c:f32[2,3] = squeeze[dimensions=(0,)] b"),
    (lambda x: lax.expand_dims(x, (0, 2)),
     "b:f32[1,2,1,3] = broadcast_in_dim[broadcast_dimensions=(1, 3)] a"),
    (lambda x: lax.rev(x, (0,)), "b:f32[2,3] = rev[dimensions=(0,)] a"),
    (lambda x: lax.concatenate([x, x], 0), "b:f32[4,3] = concatenate[dimension=0] a a"),
    (lambda x: lax.pad(x, 0.0, [(1, -1, 1), (0, 0, 0)]),
     "b:f32[3,3] = pad[padding_config=((1, -1, 1), (0, 0, 0))] a 0.0:f32[]"),
    (lambda x: lax.slice(x, (0, 1), (2, 3)),
     "b:f32[2,2] = slice[limit_indices=(2, 3) start_indices=(0, 1) strides=None] a"),
    (lambda x: lax.slice_in_dim(x, 0, 2, 1, 1),
     "slice[limit_indices=(2, 2) start_indices=(0, 0) strides=(1, 1)] a"),
    (lambda x: lax.index_in_dim(x, 1, 1, False), "c:f32[2] = squeeze[dimensions=(1,)] b"),
    (lambda x: lax.dynamic_slice(x, (1, -1), (1, 2)),
     "b:f32[1,2] = dynamic_slice[slice_sizes=(1, 2)] a 1:i32[] 2:i32[]"),
    (lambda x: lax.dynamic_slice_in_dim(x, np.int8(1), 2, 1),
     "dynamic_slice[slice_sizes=(2, 2)] a 0:i8[] 1:i8[]"),
    (lambda x: lax.dynamic_update_slice(x, lax.slice(x, (0, 0), (1, 3)), (0, 0)),
     "dynamic_update_slice a b 0:i32[] 0:i32[]"),
    (lambda x: lax.iota(np.int32, 5), "b:i32[5] = iota[dimension=0 dtype=int32 shape=(5,) sharding=None]"),
    (lambda x: lax.broadcasted_iota(np.float32, (2, 3), 1),
     "iota[dimension=1 dtype=float32 shape=(2, 3) sharding=None]"),
]


@pytest.mark.parametrize("fn,expected", JAXPR_CASES,
                         ids=[f"{i}-{c[1].split('[')[0].split()[-1]}" for i, c in enumerate(JAXPR_CASES)])
def test_jaxpr_text(fn, expected):
    assert expected in str(plax.make_jaxpr(fn)(X23))


def test_jaxpr_traced_index_normalisation():
    text = str(plax.make_jaxpr(lambda x, i: lax.dynamic_slice(x, (i, 1), (1, 2)))(X23, np.int32(1)))
    assert "lt b 0:i32[]" in text and "add b 2:i32[]" in text and "select_n" in text
    assert "dynamic_slice[slice_sizes=(1, 2)] a e 1:i32[]" in text
    # Unsigned indices are never negative: no normalisation.
    text = str(plax.make_jaxpr(lambda x, i: lax.dynamic_slice(x, (i, i), (1, 2)))(X23, np.uint32(1)))
    assert "select_n" not in text and "dynamic_slice[slice_sizes=(1, 2)] a b b" in text
    # Python-int (weak) traced indices are made strong first.
    text = str(plax.make_jaxpr(lambda x, i: lax.dynamic_index_in_dim(x, i, 1, False))(X23, 1))
    assert "convert_element_type[new_dtype=int32" in text and "squeeze[dimensions=(1,)]" in text


def test_jaxpr_noops_have_no_equations():
    for fn in (lambda x: lax.reshape(x, (2, 3)), lambda x: lax.broadcast(x, ()),
               lambda x: lax.transpose(x, (0, 1)), lambda x: lax.squeeze(x, ())):
        assert not plax.make_jaxpr(fn)(X23).jaxpr.eqns


# --- vmap beyond the table -------------------------------------------------------------------
def _batch(shape, dtype=np.float32, seed=0):
    return helpers.sample((B,) + tuple(shape), dtype, seed=seed)


def test_vmap_out_axes_and_nesting():
    x = helpers.sample((2, B, 4, 3), np.float32)
    f = lambda x: lax.transpose(lax.rev(x, (0,)), (1, 0))  # noqa: E731
    helpers.check_vmap(f, x[0], in_axes=1, out_axes=-1)
    nested = plax.vmap(plax.vmap(f, in_axes=1), in_axes=0)(x)
    want = np.stack([np.stack([np.asarray(f(x[i, :, j])) for j in range(4)])
                     for i in range(2)])
    np.testing.assert_array_equal(np.asarray(nested), want)


def test_concatenate_operands_batched_at_different_axes():
    x, y = _batch((4, 3)), _batch((4, 2), seed=1)
    helpers.check_vmap(lambda x, y: lax.concatenate([x, y], 1), x, np.moveaxis(y, 0, 2),
                       in_axes=(0, 2))


def test_pad_batched_value_only():
    x, p = helpers.sample((4, 3), np.float32), _batch((), seed=3)
    cfg = ((1, -1, 1), (0, 2, 0))
    out = plax.vmap(lambda p: lax.pad(x, p, cfg))(p)
    want = np.stack([np_pad(x, p[i], cfg) for i in range(B)])
    check(out, want, F32, rtol=0)


# --- batched start indices become gather / scatter --------------------------------------------
def test_dynamic_slice_batched_index_is_a_gather():
    x = np.arange(6.0, dtype=np.float32)
    i = np.array([0, 3, 5, -2], np.int32)
    f = plax.vmap(lambda x, i: lax.dynamic_slice(x, (i,), (2,)), in_axes=(None, 0))
    text = str(plax.make_jaxpr(f)(x, i))
    assert "gather[" in text and "mode=GatherScatterMode.CLIP" in text
    assert "dynamic_slice" not in text
    starts = np.clip(np.where(i < 0, i + 6, i), 0, 4)
    check(f(x, i), np.stack([x[s:s + 2] for s in starts]), np.float32)


def test_dynamic_slice_unbatched_index_stays_a_dynamic_slice():
    f = plax.vmap(lambda x, i: lax.dynamic_slice(x, (i,), (2,)), in_axes=(0, None))
    text = str(plax.make_jaxpr(f)(_batch((6,)), np.int32(2)))
    assert "dynamic_slice[" in text and "gather" not in text


def test_dynamic_update_slice_batched_index_is_a_scatter():
    x, u = _batch((6,)), _batch((2,), seed=1)
    f = plax.vmap(lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)))
    text = str(plax.make_jaxpr(f)(x, u, INDEX_CYCLE))
    assert "scatter[" in text and "dynamic_update_slice" not in text
    want = x.copy()
    for b, s in enumerate(np.clip(np.where(INDEX_CYCLE < 0, INDEX_CYCLE + 6, INDEX_CYCLE), 0, 4)):
        want[b, s:s + 2] = u[b]
    check(f(x, u, INDEX_CYCLE), want, np.float32)
    out = plax.vmap(lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)),
                    in_axes=(None, None, 0))(np.float32(1) * x[0], u[0], INDEX_CYCLE)
    assert not out.aval.weak_type


# --- derivatives through batched slices ------------------------------------------------------------
def _loss_slice(x, i):
    return (lax.dynamic_slice(x, (i, 1), (2, 2)) ** 2).sum()


def _loss_update(x, u, i):
    return (lax.dynamic_update_slice(x, u * u, (i, 0)) * x).sum()


def test_vmap_of_grad_through_dynamic_slice():
    x = _batch((4, 3))
    g = plax.vmap(plax.grad(_loss_slice))(x, INDEX_CYCLE)
    want = np.stack([np.asarray(plax.grad(_loss_slice)(x[b], INDEX_CYCLE[b])) for b in range(B)])
    check(g, want, np.float32)


def test_grad_of_vmap_through_dynamic_slice():
    x = _batch((4, 3))
    total = lambda x: plax.vmap(_loss_slice)(x, INDEX_CYCLE).sum()  # noqa: E731
    g = plax.grad(total)(x)
    want = np.stack([np.asarray(plax.grad(_loss_slice)(x[b], INDEX_CYCLE[b])) for b in range(B)])
    check(g, want, np.float32)
    check_grads(lambda x: plax.vmap(lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)))(
        x, INDEX_CYCLE), (x,), order=2, modes=("fwd", "rev"))
    # An unbatched operand: the per-example cotangents add up in one scatter-add.
    shared = lambda x: plax.vmap(_loss_slice, in_axes=(None, 0))(x, INDEX_CYCLE).sum()  # noqa: E731
    want = sum(np.asarray(plax.grad(_loss_slice)(x[0], i)) for i in INDEX_CYCLE)
    check(plax.grad(shared)(x[0]), want, np.float32)


def test_vmap_of_grad_through_dynamic_update_slice():
    x, u = _batch((4, 3)), _batch((2, 3), seed=1)
    g = plax.vmap(plax.grad(_loss_update, (0, 1)))(x, u, INDEX_CYCLE)
    per = [plax.grad(_loss_update, (0, 1))(x[b], u[b], INDEX_CYCLE[b]) for b in range(B)]
    for k in range(2):
        check(g[k], np.stack([np.asarray(p[k]) for p in per]), np.float32)


def test_grad_of_vmap_through_dynamic_update_slice():
    x, u = _batch((4, 3)), _batch((2, 3), seed=1)
    total = lambda x, u: plax.vmap(_loss_update)(x, u, INDEX_CYCLE).sum()  # noqa: E731
    g = plax.grad(total, (0, 1))(x, u)
    per = [plax.grad(_loss_update, (0, 1))(x[b], u[b], INDEX_CYCLE[b]) for b in range(B)]
    for k in range(2):
        check(g[k], np.stack([np.asarray(p[k]) for p in per]), np.float32)
    f = plax.vmap(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0)))
    check_grads(lambda x, u: f(x, u, INDEX_CYCLE), (x, u), order=2, modes=("fwd", "rev"))


# --- errors -----------------------------------------------------------------------------
X = np.zeros((2, 3), np.float32)

ERROR_CASES = [
    (lambda: lax.broadcast_in_dim(X, (4, 2), (0, 1)), TypeError, r"must either be 1, or be equal.*\(2, 3\)"),
    (lambda: lax.broadcast_in_dim(X, (4, 2, 3), (1,)), TypeError, "length equal to operand ndim"),
    (lambda: lax.broadcast_in_dim(X, (4, 2, 3), (1, 3)), TypeError, "distinct output dimensions"),
    (lambda: lax.broadcast_in_dim(X, (2, 3, 3), (1, 1)), TypeError, "distinct output dimensions"),
    (lambda: lax.broadcast_in_dim(X, (4, -2, 3), (1, 2)), TypeError, "shape must have every element"),
    (lambda: lax.broadcast(X, (-1,)), TypeError, "nonnegative"),
    (lambda: lax.broadcast_in_dim(X, (2.5, 3), (0, 1)), TypeError, "1D sequences of concrete values of integer type"),
    (lambda: lax.reshape(X, (4, 2)), ValueError, r"total size must be unchanged.*\(2, 3\)"),
    (lambda: lax.reshape(X, (-1, 6)), TypeError, "nonnegative"),
    (lambda: lax.reshape(X, (3, 2), (0,)), TypeError, "permutation of operand dimensions"),
    (lambda: lax.reshape(X, (3, 2), (0, 0)), TypeError, "permutation of operand dimensions"),
    (lambda: lax.transpose(X, (0,)), TypeError, r"isn't a permutation.*\(2, 3\)"),
    (lambda: lax.transpose(X, (0, 2)), TypeError, "isn't a permutation"),
    (lambda: lax.transpose(X, (-1, 0)), TypeError, "isn't a permutation"),
    (lambda: lax.squeeze(X, (0,)), ValueError, "size not equal to one"),
    (lambda: lax.squeeze(X, (2,)), ValueError, "out of bounds"),
    (lambda: lax.squeeze(np.zeros((1, 1)), (0, -2)), ValueError, "not unique"),
    (lambda: lax.expand_dims(X, (0, 0)), ValueError, "repeated axis"),
    (lambda: lax.expand_dims(X, (5,)), ValueError, "out of bounds"),
    (lambda: lax.rev(X, (0, 0)), TypeError, "must be unique"),
    (lambda: lax.rev(X, (2,)), TypeError, "less than operand ndim"),
    (lambda: lax.rev(X, (-1,)), TypeError, "nonnegative"),
    (lambda: lax.concatenate([X, X.astype(np.int32)], 0), TypeError, "same dtypes, got float32, int32"),
    (lambda: lax.concatenate([X, X[0]], 0), TypeError, "different numbers of dimensions"),
    (lambda: lax.concatenate([X, X[:1, :2]], 0), TypeError, r"differ in dimensions other.*\(1, 2\)"),
    (lambda: lax.concatenate([X, X], 2), TypeError, "dimension out of bounds"),
    (lambda: lax.concatenate([X, X], -1), TypeError, "dimension out of bounds"),
    (lambda: lax.concatenate([np.float32(1), np.float32(2)], 0), TypeError, "out of bounds"),
    (lambda: lax.concatenate([], 0), ValueError, "non-empty"),
    (lambda: lax.pad(X, np.int32(0), [(1, 1, 0), (0, 0, 0)]), TypeError, "same dtype: got float32 and int32"),
    (lambda: lax.pad(X, np.zeros(2, np.float32), [(1, 1, 0), (0, 0, 0)]), ValueError, "must be a scalar"),
    (lambda: lax.pad(X, 0.0, [(1, 1, 0)]), ValueError, r"length of padding_config.*\(2, 3\)"),
    (lambda: lax.pad(X, 0.0, [(1, 1, -1), (0, 0, 0)]), ValueError, "interior padding"),
    (lambda: lax.pad(X, 0.0, [(-3, 0, 0), (0, 0, 0)]), ValueError, r"not at least 0.*\(-1, 3\)"),
    (lambda: lax.pad(X, 0.0, [(1, 1), (0, 0, 0)]), ValueError, "triples"),
    (lambda: lax.slice(X, (0,), (1,)), ValueError, r"start_indices must have length.*\(2, 3\)"),
    (lambda: lax.slice(X, (0, 0), (1,)), TypeError, "limit_indices must have the same length"),
    (lambda: lax.slice(X, (0, 0), (3, 1)), TypeError, r"less than or equal to operand shape"),
    (lambda: lax.slice(X, (-1, 0), (1, 1)), TypeError, "nonnegative"),
    (lambda: lax.slice(X, (1, 0), (0, 1)), TypeError, "greater than or equal to start_indices"),
    (lambda: lax.slice(X, (0, 0), (1, 1), (0, 1)), TypeError, "strides must be positive"),
    (lambda: lax.slice(X, (0, 0), (1, 1), (1,)), TypeError, "strides must have length"),
    (lambda: lax.index_in_dim(X, 5, 1), IndexError, "out of bounds for axis 1 with size 3"),
    (lambda: lax.slice_in_dim(X, 0, 1, 1, 3), ValueError, "axis 3 is out of bounds"),
    (lambda: lax.dynamic_slice(X, (0,), (1, 2)), ValueError, r"one start index per.*\(2, 3\)"),
    (lambda: lax.dynamic_slice(X, (0, 1), (1,)), ValueError, "slice_sizes must have one size"),
    (lambda: lax.dynamic_slice(X, (0, 1), (3, 2)), TypeError, r"less than or equal to operand shape"),
    (lambda: lax.dynamic_slice(X, (0, 1), (-1, 1)), TypeError, "nonnegative"),
    (lambda: lax.dynamic_slice(X, (0.5, 1), (1, 1)), TypeError, "integer scalars"),
    (lambda: lax.dynamic_slice(X, (True, 1), (1, 1)), TypeError, "integer scalars"),
    (lambda: lax.dynamic_slice(X, (np.zeros(2, np.int32), 1), (1, 1)), TypeError, "integer scalars"),
    (lambda: lax.dynamic_slice(X, (0, 1), (1.5, 1)), TypeError, "1D sequences of concrete values of integer type"),
    (lambda: lax.dynamic_slice(X, (0, 0), (1, 1), allow_negative_indices=[True]), TypeError,
     "allow_negative_indices"),
    (lambda: lax.dynamic_update_slice(X, np.zeros((3, 1), np.float32), (0, 1)), TypeError,
     r"smaller than operand shape.*\(3, 1\)"),
    (lambda: lax.dynamic_update_slice(X, np.zeros((1, 1), np.int32), (0, 1)), TypeError,
     "same dtypes, got float32, int32"),
    (lambda: lax.dynamic_update_slice(X, np.zeros((1,), np.float32), (0, 1)), TypeError, "same rank"),
    (lambda: lax.dynamic_update_slice(X, np.zeros((1, 1), np.float32), (0,)), ValueError,
     "one start index per"),
    (lambda: lax.iota(np.int32, -1), TypeError, "nonnegative"),
    (lambda: lax.iota(np.bool_, 3), TypeError, "does not accept dtype bool"),
    (lambda: lax.iota("not-a-dtype", 3), TypeError, "not a dtype"),
    (lambda: lax.broadcasted_iota(np.int32, (2, 3), 2), ValueError, "between 0 and len"),
    (lambda: lax.broadcasted_iota(np.int32, (2, 3), -1), ValueError, "between 0 and len"),
]


@pytest.mark.parametrize("fn,exc,match", ERROR_CASES, ids=[str(i) for i in range(len(ERROR_CASES))])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_errors_also_raised_when_staging():
    with pytest.raises(TypeError, match="isn't a permutation"):
        plax.make_jaxpr(lambda x: lax.transpose(x, (0, 0)))(X)
    with pytest.raises(TypeError, match="same dtypes"):
        plax.make_jaxpr(lambda x, y: lax.concatenate([x, y], 0))(X, X.astype(np.int32))
