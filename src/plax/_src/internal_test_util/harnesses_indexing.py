"""Harnesses of the indexing and layout primitives (catalogue family ``indexing``).

Groups: gather, scatter (plain, add, mul, max, min), pad, select_n, transpose, slice,
complex, conj, real, imag, dynamic_slice, dynamic_update_slice and squeeze, under JAX's
group names, case names and dtypes (the vmap tests of shape_poly_test are named by them).
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax._src import test_util as jtu
from plax._src.internal_test_util.harness_core import (
    CustomArg, Limitation, RandArg, StaticArg, define)

_fmt = jtu.format_shape_dtype_string
_GSM = lax.GatherScatterMode
_GDN = lax.GatherDimensionNumbers
_SDN = lax.ScatterDimensionNumbers
_XLA_BOTH = (True, False)


# --- gather ------------------------------------------------------------------------------

def _take(a, i, axis, mode=None):
    """``jnp.take`` along ``axis``."""
    return jnp.take(a, i, axis=axis, mode=mode)


def _getitem(arr, index):
    """``arr[index]`` on a plax array."""
    return jnp.array(arr)[index]


def _gather(op, idxs, dnums, slice_sizes):
    """``lax.gather`` with static dimension numbers and slice sizes."""
    return lax.gather(op, idxs, dimension_numbers=dnums, slice_sizes=slice_sizes)


def _gather_harnesses():
    """jnp.take of each dtype, take's indices and modes, indexing, lax.gather directly."""
    for dtype in set(jtu.dtypes.all):
        define(lax.gather_p,
               f"dtypes_shape={_fmt((10,), dtype)}_axis=0_enable_xla=True", _take,
               [RandArg((10,), dtype), np.array(2, dtype=np.int32), StaticArg(0)],
               dtype=dtype, enable_xla=True)

    operand = np.arange(1000, dtype=np.float32).reshape((10, 10, 10))
    take_indices = [  # (indices, name, out of bounds)
        (np.array(2, np.int32), "1", False),
        (np.array([2], np.int32), "2", False),
        (np.array([2, 4], np.int32), "3", False),
        (np.array([2, 4], np.uint32), "3_uint32", False),
        (np.array([[2, 4], [5, 6]], np.int32), "4", False),
        (np.array([[0], [1], [10]], np.int32), "5_oob", True),
        (np.array([[0, 1], [2, -1]], np.int32), "6_neg", False),
        (np.array([0, 1, 2, 3, -10], np.int32), "7_neg", False),
        (np.array([[[0], [1]], [[3], [-11]]], np.int32), "8_neg_oob", True),
    ]
    for (indices, iname, oob), axis, xla, mode in itertools.product(
            take_indices, (0, 1, 2), _XLA_BOTH, ("clip", "fill")):
        define(lax.gather_p,
               f"from_take_indices_name={iname!r}_axis={axis}_enable_xla={xla}_mode={mode}",
               _take, [operand, indices, StaticArg(axis), StaticArg(mode)],
               dtype=operand.dtype, enable_xla=xla, index_oob=oob, mode=mode)

    whole = slice(0, 10)
    for index, iname in [((0,), "[0]"), ((0, 1), "[0,1]"),
                         ((whole, 2, whole), "[:,:2,:]"), ((slice(2, 5), 5), "[2:5,5]"),
                         ((-1, -5, -200), "[-1,-5,-200]"), ((slice(5, -2), 300), "[5:-2,300]")]:
        for xla in (False, True):
            define(lax.gather_p, f"from_slicing_name={iname!r}_enable_xla={xla}", _getitem,
                   [operand, StaticArg(index)], dtype=operand.dtype, enable_xla=xla)

    direct = [  # (operand shape, indices, dimension numbers, slice sizes, needs XLA)
        ((5,), [[0], [2]], _GDN((), (0,), (0,)), (1,), False),
        ((10,), [[0], [0], [0]], _GDN((1,), (), (0,)), (2,), True),
        ((10, 5), [[0], [2], [1]], _GDN((1,), (0,), (0,)), (1, 3), True),
        ((10, 6), [[0, 2], [1, 0]], _GDN((1,), (0,), (0, 1)), (1, 3), True),
        ((2, 5), [[[0], [2]], [[1], [1]]], _GDN((), (1,), (1,), (0,), (0,)), (1, 1), True),
        ((2, 3, 10), [[[0], [1]], [[2], [3]], [[4], [5]]],
         _GDN((2,), (), (2,), (0, 1), (1, 0)), (1, 1, 3), True),
    ]
    for shape, idxs, dnums, sizes, needs_xla in direct:
        idxs = np.array(idxs)
        for xla in ((True,) if needs_xla else _XLA_BOTH):
            define(lax.gather_p,
                   f"shape={shape}_idxs_shape={idxs.shape}_dnums={dnums!r}"
                   f"_slice_sizes={sizes}_enable_xla={xla}",
                   _gather, [RandArg(shape, np.float32), idxs, StaticArg(dnums),
                             StaticArg(sizes)], dtype=np.float32, enable_xla=xla)

    # Gathers with leading batch dimensions, as vmap of dynamic_slice makes them.
    batch_2d = _GDN((1,), (0,), (0, 1))
    batch_2d_both = _GDN((), (0, 1), (0, 1))
    batch_3d = _GDN((1, 2), (0,), (0, 1, 2))
    for op_shape, idxs, sizes, dnums in [
            ((4, 6), [[0, 1], [1, 2], [2, 3], [3, 2]], (1, 3), batch_2d),
            ((1, 2), [[0, 1]], (1, 1), batch_2d_both),
            ((2, 6, 3), [[0, 1, 0], [1, 2, 0]], (1, 3, 3), batch_3d),
            ((3, 10), [[0, 0], [1, 8], [2, 0]], (1, 5), batch_2d),
            ((2, 3, 3), [[0, 1, 0], [1, 2, 1]], (1, 3, 2), batch_3d)]:
        idxs = np.array(idxs)
        for xla in _XLA_BOTH:
            define(lax.gather_p,
                   f"batchdims_shape={op_shape}_start_indices_shape={idxs.shape}"
                   f"_slice_sizes={sizes}_enable_xla={xla}",
                   _gather, [RandArg(op_shape, np.float32), idxs, StaticArg(dnums),
                             StaticArg(sizes)], dtype=np.float32, enable_xla=xla)

    # Two and three batch dimensions, as nested vmaps of dynamic_slice make them.
    bd2 = _GDN((2, 3, 4), (), (1, 2))
    bd2_swapped = _GDN((2, 3, 4), (), (2, 1))
    bd3 = _GDN((1, 2, 3, 4), (), (1, 2, 3))
    pairs = [[[0, 1], [1, 0], [0, 1], [1, 0]]]
    for op_shape, idxs, sizes, dnums in [
            ((10, 10, 10), pairs, (2, 2, 2), bd2),
            ((10, 10, 10), [[[-1, 1], [1, -1], [0, -1], [-1, 0]]], (2, 2, 3), bd2),
            ((10, 10, 10), [[[1, 1], [1, 1], [0, 1], [2147483647, 0]]], (2, 3, 3), bd2),
            ((10, 10, 10), pairs, (2, 2, 2), bd2_swapped),
            ((10, 10, 10), pairs, (10, 10, 10), bd2),
            ((10, 10, 10, 10), [[[[0, 1, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0]]]],
             (10, 2, 2, 2), bd3),
            ((10, 10, 10), pairs, (10, 2, 2), bd2)]:
        idxs = np.array(idxs)
        for xla in _XLA_BOTH:
            define("gather",
                   f"op_shape={op_shape}_offset_dims={dnums.offset_dims}"
                   f"_start_index_map={dnums.start_index_map}"
                   f"_start_indices_shape={idxs.shape}_slice_sizes={sizes}_enable_xla={xla}",
                   _gather, [RandArg(op_shape, np.float32), idxs, StaticArg(dnums),
                             StaticArg(sizes)], dtype=np.float32, enable_xla=xla)


# --- scatter -----------------------------------------------------------------------------

_SCATTERS = (lax.scatter, lax.scatter_add, lax.scatter_mul, lax.scatter_max, lax.scatter_min)
_REDUCING_SCATTERS = _SCATTERS[1:]


def _scatter(name, f_lax=lax.scatter_min, *, shape=(5,), indices=np.array([[0], [2]]),
             update_shape=(2,), dnums=_SDN((), (0,), (0,)), sorted_=False, unique=False,
             mode=_GSM.FILL_OR_DROP, dtype=np.float32, xla_options=(True,)):
    """One harness of ``f_lax`` per XLA option; bool is unimplemented for add and mul."""
    no_bool = [Limitation("unimplemented", dtypes=[np.bool_],
                          enabled=f_lax in (lax.scatter_add, lax.scatter_mul))]
    fun = functools.partial(f_lax, indices_are_sorted=sorted_, unique_indices=unique,
                            mode=mode)
    for xla in xla_options:
        case = (f"{name}_shape={_fmt(shape, dtype)}_scatterindices={indices.tolist()}"
                f"_updateshape={update_shape}_dimension_numbers={dnums!r}"
                f"_indicesaresorted={sorted_}_uniqueindices={unique}_mode={mode}"
                f"_enablexla={xla}")
        define(f_lax.__name__, case.replace(" ", ""), fun,
               [RandArg(shape, dtype), StaticArg(indices), RandArg(update_shape, dtype),
                StaticArg(dnums)],
               jax_unimplemented=no_bool, f_lax=f_lax, shape=shape, dtype=dtype,
               scatter_indices=indices, update_shape=update_shape, dimension_numbers=dnums,
               indices_are_sorted=sorted_, unique_indices=unique, mode=mode,
               enable_xla=xla)


_UNIQUE_INDEX_CASES = [  # (operand shape, indices, update shape, dimension numbers)
    ((1,), [0], (), _SDN((), (0,), (0,))),
    ((1, 1), [0], (1,), _SDN((0,), (0,), (0,))),
    ((1, 1, 1), [0], (1, 1), _SDN((0, 1), (0,), (0,))),
    ((1, 50, 3), [32], (1, 3), _SDN((0, 1), (1,), (1,))),
    ((1, 2, 3), [1], (1, 3), _SDN((0, 1), (1,), (1,))),
    ((1, 2, 3), [0], (2, 3), _SDN((0, 1), (0,), (0,))),
    ((1, 2, 3), [1, 2], (1,), _SDN((0,), (1, 2), (1, 2))),
    ((4, 2, 3), [3, 2], (2,), _SDN((0,), (0, 2), (0, 2))),
    ((4, 2, 3, 5), [0, 4], (4, 3), _SDN((0, 1), (1, 3), (1, 3))),
    ((5, 6, 7), [[0, 1], [2, 3]], (2, 7), _SDN((1,), (0, 1), (0, 1))),
    ((5, 6, 7), [[[0], [1]], [[2], [3]]], (5, 2, 2, 7), _SDN((0, 3), (1,), (1,))),
    ((5, 6, 7), [[[0, 1], [2, 3]], [[4, 0], [1, 2]]], (5, 2, 2), _SDN((0,), (1, 2), (1, 2))),
    ((1, 125), [0], (1,), _SDN((0,), (1,), (1,))),
]

_REPEATED_INDEX_CASES = [
    ((1,), [[0], [0]], (2,), _SDN((), (0,), (0,))),
    ((3,), [[1], [0], [1]], (3,), _SDN((), (0,), (0,))),
    ((2, 3), [[[2], [2], [2]]], (2, 1, 3), _SDN((0,), (1,), (1,))),
    ((3, 5, 40), [[1], [1]], (3, 5, 2), _SDN((0, 1), (2,), (2,))),
    ((3, 5, 4), [[1], [1]], (3, 2, 4), _SDN((0, 2), (1,), (1,))),
]


def _scatter_harnesses():
    """Each dtype, shapes and dimension numbers, modes, and the cases without XLA."""
    for dtype, f_lax in itertools.product(jtu.dtypes.all, _SCATTERS):
        _scatter("dtypes", f_lax, dtype=dtype)

    for shape, indices, update_shape, dnums in [
            ((10,), [[0], [0], [0]], (3, 2), _SDN((1,), (), (0,))),
            ((10, 5), [[0], [2], [1]], (3, 3), _SDN((1,), (0,), (0,))),
            ((2, 3, 10), [[[0], [1]], [[2], [3]], [[4], [5]]], (3, 2, 3),
             _SDN((2,), (), (2,), (0, 1), (1, 0)))]:
        _scatter("shapes_and_dimension_numbers", shape=shape, indices=np.array(indices),
                 update_shape=update_shape, dnums=dnums)

    _scatter("indices_are_sorted", sorted_=True)

    for mode in (_GSM.PROMISE_IN_BOUNDS, _GSM.FILL_OR_DROP):
        for f_lax in _REDUCING_SCATTERS + (lax.scatter,):
            _scatter("modes_in_bounds", f_lax, mode=mode)
            _scatter("modes_out_of_bounds", f_lax, mode=mode, shape=(1, 5),
                     indices=np.array([10]), update_shape=(1,),
                     dnums=_SDN((0,), (1,), (1,)), xla_options=_XLA_BOTH)

    real_dtypes = set(jtu.dtypes.all) - set(jtu.dtypes.complex) - set(jtu.dtypes.boolean)
    modes = (_GSM.PROMISE_IN_BOUNDS, _GSM.FILL_OR_DROP)
    for name, f_lists, cases, unique in [
            ("no_xla_unique_indices", _REDUCING_SCATTERS + (lax.scatter,),
             _UNIQUE_INDEX_CASES, True),
            ("no_xla_non_unique_indices", _REDUCING_SCATTERS, _REPEATED_INDEX_CASES, False)]:
        for dtype, f_lax, (shape, indices, update_shape, dnums), mode in itertools.product(
                real_dtypes, f_lists, cases, modes):
            _scatter(name, f_lax, shape=shape, unique=unique, indices=np.array(indices),
                     update_shape=update_shape, mode=mode, dtype=dtype, dnums=dnums,
                     xla_options=_XLA_BOTH)


# --- pad, select_n, transpose --------------------------------------------------------------

def _pad_harnesses():
    """Edge, interior and negative paddings of a (2, 3) operand, each dtype."""
    shape = (2, 3)
    paddings = [
        [(0, 0, 0), (0, 0, 0)], [(1, 1, 0), (2, 2, 0)], [(1, 2, 1), (0, 1, 0)],
        [(0, 0, 0), (-1, -1, 0)], [(0, 0, 0), (-2, -2, 4)], [(0, 0, 0), (-2, -3, 1)],
    ]
    for dtype, pads, xla in itertools.product(jtu.dtypes.all, paddings, _XLA_BOTH):
        define(lax.pad_p, f"inshape={_fmt(shape, dtype)}_pads={pads}_enable_xla={xla}",
               lax.pad, [RandArg(shape, dtype), np.array(0, dtype), StaticArg(pads)],
               rng_factory=jtu.rand_small, arg_shape=shape, dtype=dtype, pads=pads,
               enable_xla=xla)


def _select_n_pair(name, *, shape_pred=(2, 3), shape_args=(2, 3), dtype=np.float32):
    """A boolean predicate over two cases, and an int32 one over three."""
    params = dict(shape_pred=shape_pred, shape_args=shape_args, dtype=dtype)
    cases = f"_shapeargs={_fmt(shape_args, dtype)}"
    define(lax.select_n_p, f"{name}_shapepred={_fmt(shape_pred, np.bool_)}{cases}",
           lax.select_n, [RandArg(shape_pred, np.bool_)] + [RandArg(shape_args, dtype)] * 2,
           **params)
    # The int32 predicate has the cases' shape whatever shape_pred says (as JAX's).
    which = CustomArg(lambda rng: jtu.rand_int(rng, high=3)(shape_args, np.int32))
    define(lax.select_n_p, f"{name}_shapepred={_fmt(shape_pred, np.int32)}{cases}",
           lax.select_n, [which] + [RandArg(shape_args, dtype)] * 3, **params)


def _transpose(name, *, shape=(2, 3), permutation=(1, 0), dtype=np.float32):
    """``transpose_p`` bound with ``permutation``."""
    define(lax.transpose_p,
           f"{name}_shape={_fmt(shape, dtype)}_permutation={permutation}".replace(" ", ""),
           lambda x: lax.transpose_p.bind(x, permutation=permutation),
           [RandArg(shape, dtype)], shape=shape, dtype=dtype, permutation=permutation)


def _select_transpose_harnesses():
    for dtype in jtu.dtypes.all:
        _select_n_pair("dtypes", dtype=dtype)
    _select_n_pair("shapes", shape_pred=(), shape_args=(18,))
    for dtype in jtu.dtypes.all:
        _transpose("dtypes", dtype=dtype)
    for perm in [(0, 1, 2), (1, 2, 0)]:
        _transpose("permutations", shape=(2, 3, 4), permutation=perm)


# --- slice, complex numbers ----------------------------------------------------------------

def _slice(name, shape=(3,), start=(1,), limit=(2,), strides=None, dtype=np.float32):
    define(lax.slice_p,
           f"{name}_a={_fmt(shape, dtype)}_start_indices={start}_limit_indices={limit}"
           f"_strides={strides}",
           lax.slice,
           [RandArg(shape, dtype), StaticArg(start), StaticArg(limit), StaticArg(strides)],
           dtype=dtype, shape=shape, start_indices=start, limit_indices=limit)


def _complex(name, *, shapes=((3, 4), (3, 4)), dtype=np.float32):
    define(lax.complex_p,
           f"{name}_lhs={_fmt(shapes[0], dtype)}_rhs={_fmt(shapes[1], dtype)}",
           lax.complex_p.bind, [RandArg(shapes[0], dtype), RandArg(shapes[1], dtype)],
           shapes=shapes, dtype=dtype)


def _conj(name, *, shape=(3, 4), dtype=np.float32, **kwargs):
    define(lax.conj_p, f"{name}_operand={_fmt(shape, dtype)}_kwargs={kwargs}".replace(" ", ""),
           lambda x: lax.conj_p.bind(x, **kwargs), [RandArg(shape, dtype)],
           shape=shape, dtype=dtype, **kwargs)


def _slice_complex_harnesses():
    for dtype in jtu.dtypes.all:
        _slice("dtypes", dtype=dtype)
    for shape, start, limit, strides in [
            ((3,), (1,), (2,), None), ((7,), (4,), (7,), None), ((5,), (1,), (5,), (2,)),
            ((8,), (1,), (6,), (2,)), ((5, 3), (1, 1), (3, 2), None),
            ((5, 3), (1, 1), (3, 1), None), ((7, 5, 3), (4, 0, 1), (7, 1, 3), None),
            ((5, 3), (1, 1), (2, 1), (1, 1)), ((5, 3), (1, 1), (5, 3), (2, 1))]:
        _slice("shapes", shape=shape, start=start, limit=limit, strides=strides)

    for dtype in jtu.dtypes.floating:
        _complex("dtypes", dtype=dtype)
    for shapes in [((3, 2), (3, 1)), ((3, 1), (3, 2))]:
        _complex("broadcast", shapes=shapes)

    for dtype in jtu.dtypes.floating + jtu.dtypes.complex:
        _conj("dtypes", dtype=dtype)
    _conj("kwargs", _input_dtype=np.float32)

    shape = (2, 3)
    for dtype, prim in itertools.product(jtu.dtypes.complex, (lax.real_p, lax.imag_p)):
        define(prim, f"dtypes_shape={_fmt(shape, dtype)}", prim.bind,
               [RandArg(shape, dtype)], shape=shape, dtype=dtype, prim=prim)


# --- dynamic_slice, dynamic_update_slice, squeeze ------------------------------------------

def _dynamic_slice(name, shape=(3,), start=(1,), limit=(2,), dtype=np.float32):
    """``dynamic_slice`` at dynamic ``start`` of the static size ``limit - start``."""
    sizes = tuple(hi - lo for lo, hi in zip(start, limit))
    for xla in (False, True):
        define(lax.dynamic_slice_p,
               f"{name}_a={_fmt(shape, dtype)}_start_indices={start}"
               f"_limit_indices={limit}_enablexla={xla}",
               lax.dynamic_slice,
               [RandArg(shape, dtype), np.array(list(start)), StaticArg(sizes)],
               dtype=dtype, shape=shape, start_indices=start, limit_indices=limit,
               enable_xla=xla)


def _dynamic_update_slice(name, shape=(3,), start=(1,), dtype=np.float32, update_shape=(1,)):
    for xla in (False, True):
        define(lax.dynamic_update_slice_p,
               f"{name}_operand={_fmt(shape, dtype)}_update={_fmt(update_shape, dtype)}"
               f"_start_indices={start}_enable_xla={xla}",
               lax.dynamic_update_slice,
               [RandArg(shape, dtype), RandArg(update_shape, dtype), np.array(start)],
               dtype=dtype, shape=shape, start_indices=start, update_shape=update_shape,
               enable_xla=xla)


def _squeeze(name, shape=(1, 2), dimensions=(0,), dtype=np.float32):
    define(lax.squeeze_p, f"{name}_inshape={_fmt(shape, dtype)}_dimensions={dimensions}",
           lax.squeeze, [RandArg(shape, dtype), StaticArg(dimensions)],
           dtype=dtype, arg_shape=shape, dimensions=dimensions)


def _dynamic_harnesses():
    u32, u8 = (lambda v: np.array(v, np.uint32)), (lambda v: np.array(v, np.uint8))
    for dtype in jtu.dtypes.all:
        _dynamic_slice("dtypes", dtype=dtype)
    in_bounds = [
        ((3,), (1,), (2,)), ((7,), (4,), (7,)), ((5,), (1,), (5,)), ((8,), (1,), (6,)),
        ((5, 3), (1, 1), (3, 2)), ((7, 5, 3), (4, 0, 1), (7, 1, 3)), ((5, 3), (1, 1), (2, 1)),
        ((3,), (u32(1),), (u32(2),)), ((3,), (u8(1),), (u8(2),)),
    ]
    # Out-of-bounds starts are clamped by dynamic_slice.
    out_of_bounds = [((5,), (lo,), (hi,)) for lo, hi in [
        (-1, 0), (-1, 1), (-4, -2), (-5, -2), (-6, -5), (-10, -9), (-100, -99), (5, 6),
        (10, 11), (3, 6)]]
    for shape, start, limit in in_bounds + out_of_bounds:
        _dynamic_slice("shapes", shape=shape, start=start, limit=limit)

    for dtype in jtu.dtypes.all:
        _dynamic_update_slice("dtypes", dtype=dtype)
    for shape, start, update_shape in [
            ((3,), (1,), (1,)), ((5, 3), (1, 1), (3, 1)), ((7, 5, 3), (4, 1, 0), (2, 0, 1)),
            ((3,), (u32(1),), (1,)), ((3,), (u8(1),), (1,)),
            ((3,), (-1,), (1,)), ((3,), (10,), (1,)), ((3,), (10,), (2,))]:
        _dynamic_update_slice("shapes", shape=shape, start=start, update_shape=update_shape)

    for dtype in set(jtu.dtypes.all):
        _squeeze("dtypes", dtype=dtype)
    for shape, dims in [((1,), (0,)), ((1,), (-1,)), ((2, 1, 4), (1,)), ((2, 1, 4), (-2,)),
                        ((2, 1, 3, 1), (1,)), ((2, 1, 3, 1), (1, 3)), ((2, 1, 3, 1), (3,)),
                        ((2, 1, 3, 1), (1, -1))]:
        _squeeze("shapes", shape=shape, dimensions=dims)


_gather_harnesses()
_scatter_harnesses()
_pad_harnesses()
_select_transpose_harnesses()
_slice_complex_harnesses()
_dynamic_harnesses()
