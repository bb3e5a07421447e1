"""Harnesses of the reductions and windowed operations (the catalogue's "windows" family).

Groups: ``select_and_scatter_add``, ``select_and_gather_add``, ``reduce``, the
``reduce_window_<op>`` groups, the ``reduce_<op>`` reducers, ``clamp``, ``dot_general``,
``concatenate``, ``conv_general_dilated``, ``rng_bit_generator``, ``iota_2x32_shape``,
``reduce_precision`` and ``approx_top_k``. Group, case names, dtypes and limitations are
JAX's (the test ids come from them); each group is generated from a small parameter table.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.random.threefry import iota_2x32
from plax._src import config
from plax._src import test_util as jtu
from plax._src.internal_test_util.harness_core import Limitation, RandArg, StaticArg, define
from plax._src.lax import windowed_reductions as _windowed

_fmt = jtu.format_shape_dtype_string
_ALL = jtu.dtypes.all
_COMPLEX = (np.complex64, np.complex128)
_WIDE = (np.float64, np.int64, np.complex128)  # need x64


def _identity(dtype, largest: bool):
    """The identity of min (``largest``) or of max, as a 0-d array of ``dtype``."""
    if dtypes.issubdtype(dtype, np.inexact):
        return np.array(np.inf if largest else -np.inf, dtype)
    if dtypes.issubdtype(dtype, np.integer):
        info = dtypes.iinfo(dtype)
        return np.array(info.max if largest else info.min, dtype)
    return np.array(largest, np.bool_)


def _dims(*sizes):
    return dict(window_dimensions=sizes)


# --- select_and_scatter_add / select_and_gather_add -----------------------------------------

def _windows_out_shape(shape, window, strides, padding):
    """The shape of the windowed reduction's result (no dilations)."""
    return tuple((n + lo + hi - w) // s + 1
                 for n, w, s, (lo, hi) in zip(shape, window, strides, padding))


def _scatter_add(name, *, shape=(2, 4, 6), dtype=np.float32, select_prim=lax.ge_p,
                 window_dimensions=(2, 2, 2), window_strides=(1, 1, 1),
                 padding=((0, 0), (0, 0), (0, 0)), nb_inactive_dims=0):
    source_shape = _windows_out_shape(shape, window_dimensions, window_strides, padding)
    define(
        lax.select_and_scatter_add_p,
        f"{name}_shape={_fmt(shape, dtype)}_selectprim={select_prim}"
        f"_windowdimensions={window_dimensions}_windowstrides={window_strides}"
        f"_padding={padding!s}",
        _windowed._select_and_scatter_add,
        [RandArg(source_shape, dtype), RandArg(shape, dtype), StaticArg(select_prim),
         StaticArg(window_dimensions), StaticArg(window_strides), StaticArg(padding)],
        jax_unimplemented=[Limitation("works only for 2 or more inactive dimensions",
                                      devices="tpu", enabled=nb_inactive_dims < 2)],
        shape=shape, dtype=dtype, select_prim=select_prim,
        window_dimensions=window_dimensions, window_strides=window_strides, padding=padding)


for _dt in _ALL:
    if _dt not in _COMPLEX:
        _scatter_add("dtypes", dtype=_dt)
_scatter_add("select_prim", select_prim=lax.le_p)
_scatter_add("padding", padding=((1, 1), (1, 1), (1, 1)))
_scatter_add("window_dimensions", window_dimensions=(1, 2, 3))
_scatter_add("window_strides", window_strides=(1, 2, 3))
for _dt in _ALL:
    if _dt not in (np.bool_, np.int8, np.uint8) + _COMPLEX:
        _scatter_add("tpu_dtypes", dtype=_dt, nb_inactive_dims=2, window_strides=(1, 2, 1),
                     window_dimensions=(1, 3, 1))


def _gather_add(name, *, shape=(4, 6), dtype=np.float32, select_prim=lax.le_p,
                padding="VALID", window_dimensions=(2, 2), window_strides=(1, 1),
                base_dilation=(1, 1), window_dilation=(1, 1)):
    if isinstance(padding, str):
        padding = tuple(lax.padtype_to_pads(shape, window_dimensions, window_strides, padding))
    define(
        lax.select_and_gather_add_p,
        f"{name}_shape={_fmt(shape, dtype)}_selectprim={select_prim}"
        f"_windowdimensions={window_dimensions}_windowstrides={window_strides}"
        f"_padding={padding!s}_basedilation={base_dilation}_windowdilation={window_dilation}",
        _windowed._select_and_gather_add,
        [RandArg(shape, dtype), RandArg(shape, dtype)]
        + [StaticArg(v) for v in (select_prim, window_dimensions, window_strides, padding,
                                  base_dilation, window_dilation)],
        shape=shape, dtype=dtype, window_dimensions=window_dimensions,
        window_strides=window_strides, padding=padding, base_dilation=base_dilation,
        window_dilation=window_dilation)


for _dt in jtu.dtypes.all_floating:
    for _prim in (lax.ge_p, lax.le_p):
        _gather_add("dtypes", dtype=_dt, select_prim=_prim)
_gather_add("select_prim", select_prim=lax.ge_p)
_gather_add("window_dimensions", window_dimensions=(2, 3))
_gather_add("window_strides", window_strides=(2, 3))
_gather_add("padding", padding="SAME")
for _base, _win in (((2, 3), (1, 1)), ((1, 1), (2, 3)), ((2, 3), (3, 2))):
    _gather_add("dilations", base_dilation=_base, window_dilation=_win)


# --- reduce -----------------------------------------------------------------------------------

def _reduce(name, nr_operands, computation, *, dimensions=(0,), dtype=np.float32,
            shape=(4, 6), init_value=3):
    """``lax.reduce`` of the first ``nr_operands`` of (x of ``dtype``, an int32 array)."""
    def reducer(*args):
        inits = (np.array(init_value, dtype), np.array(0, np.int32))[:nr_operands]
        return lax.reduce(args[:nr_operands], inits, computation, dimensions)

    define(
        lax.reduce_p,
        f"gen_{name}_shape={_fmt(shape, dtype)}_initvalue={init_value}"
        f"_nr_operands={nr_operands}_dimensions={dimensions}".replace(" ", ""),
        reducer, [RandArg(shape, dtype), RandArg(shape, np.int32)],
        shape=shape, dtype=dtype, init_value=init_value, computation=computation,
        dimensions=dimensions)


def _add_first(ops, inits):
    return (lax.add(ops[0], inits[0]),)


def _max_min(ops, inits):
    return lax.max(ops[0], inits[0]), lax.min(ops[1], inits[1])


for _dt in _ALL:
    for _name, _n, _comp in (("add_scalar", 1, _add_first), ("max_min", 2, _max_min)):
        if not (_dt == np.bool_ and _name == "add_scalar"):
            _reduce(_name, _n, _comp, dtype=_dt)
        if _dt == np.int32:
            for _d in ((1,), (0, 1)):
                _reduce(_name, _n, _comp, dtype=_dt, dimensions=_d)


# --- reduce_window_<min|max|add|mul> ----------------------------------------------------------

def _reduce_window(name, *, shape=(4, 6), dtype=np.float32, computation=lax.add, init_value=0,
                   window_dimensions=(2, 2), window_strides=(1, 1), padding=((0, 0), (0, 0)),
                   base_dilation=(1, 1), window_dilation=(1, 1), requires_xla=False):
    """One harness per ``enable_xla`` (only True when ``requires_xla``)."""
    init = np.array(init_value, dtype=dtype)
    for enable_xla in ((True,) if requires_xla else (True, False)):
        define(
            f"reduce_window_{computation.__name__}",
            f"{name}_shape={_fmt(shape, dtype)}_initvalue={init_value}"
            f"_windowdimensions={window_dimensions}_windowstrides={window_strides}"
            f"_padding={padding!s}_basedilation={base_dilation}"
            f"_windowdilation={window_dilation}_enablexla={enable_xla}".replace(" ", ""),
            lax.reduce_window,
            [RandArg(shape, dtype)]
            + [StaticArg(v) for v in (init, computation, window_dimensions, window_strides,
                                      padding, base_dilation, window_dilation)],
            jax_unimplemented=[], shape=shape, dtype=dtype, init_value=init,
            computation=computation, window_dimensions=window_dimensions,
            window_strides=window_strides, padding=padding, base_dilation=base_dilation,
            window_dilation=window_dilation, enable_xla=enable_xla)


def _needs_xla(op: str, dtype) -> bool:
    """Whether the reduction has no path without XLA for ``dtype`` (JAX's rule)."""
    if op == "add":
        return dtype not in (dtypes.bfloat16, np.float16, np.float32, np.float64)
    if op == "max":
        return dtype in (np.bool_, np.uint32, np.uint64) + _COMPLEX
    if op == "min":
        return dtype in (np.bool_, np.uint8, np.uint16, np.uint32, np.uint64) + _COMPLEX
    return True


for _dt in _ALL:
    for _comp, _init in ((lax.min, _identity(_dt, True)), (lax.max, _identity(_dt, False)),
                         (lax.max, 1), (lax.add, 0), (lax.add, 1),
                         (lax.mul, 0), (lax.mul, 1), (lax.mul, 2)):
        if not (_dt == np.bool_ and _comp in (lax.add, lax.mul)):
            _reduce_window("dtypes", dtype=_dt, computation=_comp, init_value=_init,
                           requires_xla=_needs_xla(_comp.__name__, _dt))
_reduce_window("window_dimensions", window_dimensions=(1, 1))
_reduce_window("window_strides", window_strides=(1, 2))
_reduce_window("padding", padding=((1, 2), (0, 3)), requires_xla=True)
_reduce_window("base_dilation", base_dilation=(1, 2), requires_xla=True)
_reduce_window("window_dilation", window_dilation=(1, 2))
for _shape, _win, _xla in (((2,), (2,), False), ((2, 1), (2, 1), False),
                           ((1, 2), (1, 2), False), ((1, 2, 1), (1, 2, 1), False),
                           ((2, 4), (2, 2), False), ((1, 2, 4, 1), (1, 2, 2, 1), False),
                           ((2, 4, 3), (2, 2, 2), True),
                           ((1, 4, 3, 2, 1), (1, 2, 2, 2, 1), True)):
    _ones = (1,) * len(_shape)
    _reduce_window("batch_channel_dims", computation=lax.max, shape=_shape, init_value=-np.inf,
                   base_dilation=_ones, window_dilation=_ones, padding=((0, 0),) * len(_shape),
                   window_strides=_ones, window_dimensions=_win, requires_xla=_xla)
for _comp, _init in ((lax.max, _identity(np.float32, False)),
                     (lax.min, _identity(np.float32, True)), (lax.add, 0.)):
    _reduce_window("same_padding", shape=(112, 112), init_value=_init, computation=_comp,
                   window_dimensions=(3, 3), window_strides=(2, 2), padding="SAME")
for _win, _strides in (((2, 2), (1, 1)), ((3, 3), (2, 2)), ((13, 13), (5, 6))):
    _reduce_window("manual_padding", shape=(12, 12), init_value=0., window_dimensions=_win,
                   window_strides=_strides, padding="SAME")
_reduce_window("init_value_1d", shape=(1, 1600), init_value=1.0, computation=lax.min,
               window_dimensions=[1, 401], window_strides=[1, 160], padding="VALID")


# --- reduce_sum / _prod / _max / _min / _or / _and --------------------------------------------

def _reducer(prim, dtype, shape=(2, 3), axes=(0,)):
    extra = {"out_sharding": None} if prim is lax.reduce_sum_p else {}
    define(prim, f"dtypes_shape={_fmt(shape, dtype)}",
           lambda arg: prim.bind(arg, axes=axes, **extra), [RandArg(shape, dtype)],
           prim=prim, shape=shape, dtype=dtype, axes=axes)


_NUMBERS = [d for d in _ALL if d not in jtu.dtypes.boolean]
for _prim, _dts in ((lax.reduce_sum_p, _NUMBERS), (lax.reduce_prod_p, _NUMBERS),
                    (lax.reduce_max_p, _ALL), (lax.reduce_min_p, _ALL),
                    (lax.reduce_or_p, jtu.dtypes.boolean),
                    (lax.reduce_and_p, jtu.dtypes.boolean)):
    for _dt in _dts:
        _reducer(_prim, _dt)


# --- clamp ------------------------------------------------------------------------------------

def _clamp(name, *, min_shape=(), operand_shape=(2, 3), max_shape=(), dtype=np.float32,
           min_max=None):
    lo, hi = min_max or (RandArg(min_shape, dtype), RandArg(max_shape, dtype))
    define(
        lax.clamp_p,
        f"{name}_min={_fmt(lo.shape, lo.dtype)}_operand={_fmt(operand_shape, dtype)}"
        f"_max={_fmt(hi.shape, hi.dtype)}",
        lax.clamp, [lo, RandArg(operand_shape, dtype), hi],
        min_shape=lo.shape, operand_shape=operand_shape, max_shape=hi.shape, dtype=dtype,
        jax_unimplemented=[Limitation("unimplemented", dtypes=[np.bool_, *_COMPLEX])])


for _dt in _ALL:
    _clamp("dtypes", dtype=_dt)
for _lo, _x, _hi in (((), (2, 3), (2, 3)), ((2, 3), (2, 3), ()), ((2, 3), (2, 3), (2, 3))):
    _clamp("broadcasting", min_shape=_lo, operand_shape=_x, max_shape=_hi)
for _ordered, _lo, _hi in ((False, 4., 1.), (True, 1., 4.)):
    _clamp(f"order={_ordered}",
           min_max=(np.array(_lo, np.float32), np.array(_hi, np.float32)))


# --- dot_general ------------------------------------------------------------------------------

_FLOATS_GPU = [np.float16, dtypes.bfloat16, np.float32, np.float64, np.complex64,
               np.complex128]
_INTS_GPU = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _dot_general(name, *, lhs_shape=(3, 4), rhs_shape=(4, 2), lhs_dtype=np.float32,
                 rhs_dtype=np.float32, precision=None,
                 dimension_numbers=(((1,), (0,)), ((), ())), preferred_element_type=None,
                 enable_xla=True):
    preferred = preferred_element_type
    if preferred in _WIDE and not config.enable_x64.value:
        return
    suffix = "" if precision is None else f"_precision={precision!r}"
    if preferred is not None:
        suffix += f"_preferred={jtu.dtype_str(preferred)}"
    define(
        lax.dot_general_p,
        f"{name}_lhs={_fmt(lhs_shape, lhs_dtype)}_rhs={_fmt(rhs_shape, rhs_dtype)}"
        f"_dimensionnumbers={dimension_numbers}{suffix}_enable_xla={enable_xla}"
        .replace(" ", ""),
        lax.dot_general,
        [RandArg(lhs_shape, lhs_dtype), RandArg(rhs_shape, rhs_dtype),
         StaticArg(dimension_numbers), StaticArg(precision), StaticArg(preferred)],
        dtype=lhs_dtype, rhs_dtype=rhs_dtype, lhs_shape=lhs_shape, rhs_shape=rhs_shape,
        dimension_numbers=dimension_numbers, precision=precision,
        preferred_element_type=preferred, enable_xla=enable_xla,
        jax_unimplemented=[
            Limitation("preferred_element_type must match dtype for floating point",
                       devices="gpu", dtypes=_FLOATS_GPU,
                       enabled=preferred is not None and preferred != lhs_dtype),
            Limitation("preferred_element_type must be floating for integer dtype",
                       devices="gpu", dtypes=_INTS_GPU,
                       enabled=preferred is not None and preferred in _FLOATS_GPU,
                       skip_run=True)])


_PRECISIONS = (None, lax.Precision.DEFAULT, lax.Precision.HIGH, lax.Precision.HIGHEST)
for _dt in _ALL:
    for _prec in _PRECISIONS:
        for _l, _r, _dn in (((3, 4), (4, 2), (((1,), (0,)), ((), ()))),
                            ((1, 3, 4), (1, 4, 3), (((2, 1), (1, 2)), ((0,), (0,)))),
                            ((7, 3, 4), (7, 4), (((2,), (1,)), ((0,), (0,))))):
            _dot_general("dtypes_and_precision", precision=_prec, lhs_shape=_l, rhs_shape=_r,
                         dimension_numbers=_dn, lhs_dtype=_dt, rhs_dtype=_dt)
for _name, _l, _r, _dn in (
        ("batch_dimensions", (4, 4, 3, 3, 4), (4, 4, 3, 4, 2),
         (((4,), (3,)), ((0, 1, 2), (0, 1, 2)))),
        ("batch_dimensions", (8, 4, 3, 3, 4), (4, 8, 3, 4, 2),
         (((4, 3), (3, 2)), ((0, 1), (1, 0)))),
        ("squeeze", (4,), (4, 4), (((0,), (0,)), ((), ()))),
        ("squeeze", (4, 4), (4,), (((1,), (0,)), ((), ()))),
        ("squeeze", (4,), (4,), (((0,), (0,)), ((), ())))):
    _dot_general(_name, lhs_shape=_l, rhs_shape=_r, dimension_numbers=_dn)

# (operand dtype, preferred_element_type) pairs, shared with conv_general_dilated.
_bf16 = dtypes.bfloat16
_PREFERRED_PAIRS = (
    [(np.float16, p) for p in (np.float16, np.float32, np.float64)]
    + [(_bf16, p) for p in (_bf16, np.float32, np.float64)]
    + [(np.float32, np.float32), (np.float32, np.float64), (np.float64, np.float64)]
    + [(np.int8, p) for p in (np.int8, np.int16, np.int32, np.int64)]
    + [(np.int16, p) for p in (np.int16, np.int32, np.int64)]
    + [(np.int32, np.int32), (np.int32, np.int64), (np.int64, np.int64)]
    + [(np.complex64, np.complex64), (np.complex64, np.complex128),
       (np.complex128, np.complex128)]
    + [(i, p) for i in (np.int8, np.int16) for p in (np.float16, _bf16, np.float32, np.float64)]
    + [(np.int32, np.float32), (np.int32, np.float64), (np.int64, np.float64)])
_DN_LAST = (((1,), (0,)), ((), ()))  # contract (4, 3) with (3, 6)
for _dt, _pref in _PREFERRED_PAIRS:
    _dot_general("preferred", lhs_dtype=_dt, rhs_dtype=_dt, lhs_shape=(4, 3), rhs_shape=(3, 6),
                 dimension_numbers=_DN_LAST, preferred_element_type=_pref)
_MIXED = jtu.dtypes.all_integer + jtu.dtypes.all_unsigned + jtu.dtypes.all_inexact
for _i, _lhs in enumerate(_MIXED):
    for _rhs in _MIXED[_i + 1:]:
        for _xla in (True, False):
            _dot_general("different_dtypes", lhs_dtype=_lhs, rhs_dtype=_rhs, lhs_shape=(4, 3),
                         rhs_shape=(3, 6), dimension_numbers=_DN_LAST, enable_xla=_xla)


# --- concatenate ------------------------------------------------------------------------------

def _concatenate(name, *, shapes=((2, 3), (2, 3)), dimension=0, dtype=np.float32):
    shapes = list(shapes)
    define(
        lax.concatenate_p,
        f"{name}_shapes={'_'.join(_fmt(s, dtype) for s in shapes)}_dimension={dimension}",
        lambda *args: lax.concatenate_p.bind(*args, dimension=dimension),
        [RandArg(s, dtype) for s in shapes], shapes=shapes, dtype=dtype, dimension=dimension)


for _dt in _ALL:
    _concatenate("dtypes", dtype=_dt)
_concatenate("dimension", dimension=1)
_concatenate("nb_operands", shapes=[(2, 3, 4), (3, 3, 4), (4, 3, 4)])


# --- conv_general_dilated ---------------------------------------------------------------------

def _conv(name, *, lhs_shape=(2, 3, 9, 10), rhs_shape=(3, 3, 4, 5), dtype=np.float32,
          window_strides=(1, 1), precision=None, padding=((0, 0), (0, 0)), lhs_dilation=(1, 1),
          rhs_dilation=(1, 1), feature_group_count=1, dimension_numbers=("NCHW", "OIHW", "NCHW"),
          batch_group_count=1, preferred_element_type=None, works_without_xla=False):
    """One harness per ``enable_xla`` (True, and False when ``works_without_xla``)."""
    preferred = preferred_element_type
    if preferred in _WIDE and not config.enable_x64.value:
        return
    statics = (window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
               feature_group_count, batch_group_count, precision, preferred)
    for enable_xla in ((True, False) if works_without_xla else (True,)):
        define(
            lax.conv_general_dilated_p,
            f"{name}_lhs={_fmt(lhs_shape, dtype)}_rhs={_fmt(rhs_shape, dtype)}"
            f"_windowstrides={window_strides}_padding={padding!s}_lhsdilation={lhs_dilation}"
            f"_rhsdilation={rhs_dilation}_dimensionnumbers={dimension_numbers}"
            f"_featuregroupcount={feature_group_count}_batchgroupcount={batch_group_count}"
            f"_precision={precision!r}_preferred={jtu.dtype_str(preferred)}"
            f"_enablexla={enable_xla}".replace(" ", ""),
            lax.conv_general_dilated,
            [RandArg(lhs_shape, dtype), RandArg(rhs_shape, dtype)]
            + [StaticArg(v) for v in statics],
            lhs_shape=lhs_shape, rhs_shape=rhs_shape, dtype=dtype,
            window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
            rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
            feature_group_count=feature_group_count, batch_group_count=batch_group_count,
            precision=precision, preferred_element_type=preferred, enable_xla=enable_xla,
            jax_unimplemented=[Limitation(
                "preferred_element_type not implemented for integers", devices="gpu",
                dtypes=(np.int8, np.int16, np.int32, np.int64),
                enabled=preferred in (np.int16, np.int32, np.int64))])


for _dt in jtu.dtypes.all_inexact:
    for _prec in _PRECISIONS:
        _conv("dtype_precision", dtype=_dt, precision=_prec)
for _dt, _pref in _PREFERRED_PAIRS:
    _conv("preferred", dtype=_dt, preferred_element_type=_pref,
          works_without_xla=_dt == np.float32 and _pref == np.float32)
for _batch, _feature in ((1, 2), (2, 1)):
    _conv("group_counts", lhs_shape=(2 * _batch, 3 * _feature, 9, 10),
          rhs_shape=(3 * _feature * _batch, 3, 4, 5), feature_group_count=_feature,
          batch_group_count=_batch)

_1D = dict(window_strides=(1,), padding=((0, 0),), lhs_dilation=(1,), rhs_dilation=(1,),
           dimension_numbers=("NCH", "OIH", "NCH"))
_NHWC = ("NHWC", "HWIO", "NHWC")
_NHC = dict(window_strides=(1,), lhs_dilation=(2,), rhs_dilation=(1,),
            dimension_numbers=("NHC", "HIO", "NHC"))
# (name, overrides) of the cases that also run without XLA.
_CONV_NO_XLA = [
    ("conv1d", dict(_1D, lhs_shape=(2, 3, 10), rhs_shape=(3, 3, 5))),
    ("depthwise2d", dict(lhs_shape=(2, 3, 9, 9), rhs_shape=(12, 1, 3, 3),
                         feature_group_count=3)),
    ("depthwise2d_dilated", dict(lhs_shape=(2, 3, 9, 9), rhs_shape=(12, 1, 3, 3),
                                 feature_group_count=3, rhs_dilation=(2, 1))),
    ("depthwise1d", dict(_1D, lhs_shape=(2, 3, 9), rhs_shape=(12, 1, 3),
                         feature_group_count=3)),
    ("depthwise1d_dilated", dict(_1D, lhs_shape=(2, 3, 9), rhs_shape=(12, 1, 3),
                                 feature_group_count=3, rhs_dilation=(2,))),
    ("window_strides", dict(window_strides=(2, 3))),
    ("padding", dict(padding=((1, 2), (0, 0)))),
    ("padding", dict(padding=((1, 2), (2, 1)))),
    ("dilations", dict(lhs_dilation=(1, 1), rhs_dilation=(2, 2))),
    ("conv_tranpose2d_valid_padding", dict(lhs_shape=(1, 16, 16, 2), rhs_shape=(2, 3, 2, 2),
                                           lhs_dilation=(2, 2), padding=((1, 1), (2, 2)),
                                           dimension_numbers=_NHWC)),
    ("conv_tranpose1d_valid_padding", dict(_NHC, lhs_shape=(1, 16, 2), rhs_shape=(3, 2, 2),
                                           padding=((2, 2),))),
    ("conv_tranpose1d_same_padding", dict(_NHC, lhs_shape=(1, 16, 2), rhs_shape=(3, 2, 2),
                                          padding=((2, 1),))),
    ("conv_tranpose2d_same_padding", dict(lhs_shape=(1, 16, 16, 2), rhs_shape=(2, 3, 2, 2),
                                          lhs_dilation=(2, 2), padding=((1, 1), (2, 1)),
                                          dimension_numbers=_NHWC)),
    ("rhs_oob", dict(rhs_shape=(3, 3, 10, 5))),
    ("rhs_oob_after_dilation", dict(rhs_dilation=(2, 3))),
    ("rhs_oob_after_pading", dict(lhs_shape=(1, 3, 2, 2), rhs_shape=(64, 3, 7, 7),
                                  window_strides=(2, 2), padding=((3, 3), (3, 3)))),
    ("rhs_oob_same_padding", dict(lhs_shape=(1, 1, 16, 1), rhs_shape=(4, 1, 1, 2),
                                  padding="SAME", dimension_numbers=_NHWC)),
    ("dimension_numbers", dict(lhs_shape=(2, 9, 10, 3), rhs_shape=(4, 5, 3, 3),
                               dimension_numbers=_NHWC)),
    ("dimension_numbers", dict(lhs_shape=(2, 3, 9, 10), rhs_shape=(4, 5, 3, 3),
                               dimension_numbers=("NCHW", "HWIO", "NHWC"))),
]
for _pad, _rd in (("VALID", (1, 1)), ("SAME", (1, 1)), ("VALID", (1, 2)), ("SAME", (1, 2)),
                  ([(1, 2), (0, 1)], (1, 2))):
    for _dn, _l in ((_NHWC, (1, 28, 28, 1)), (("NCHW", "HWIO", "NCHW"), (1, 1, 28, 28))):
        _CONV_NO_XLA.append(("tf_conversion_path_2d", dict(
            lhs_shape=_l, rhs_shape=(3, 3, 1, 16), padding=_pad, dimension_numbers=_dn,
            lhs_dilation=(1, 1), rhs_dilation=_rd)))
for _pad, _rd in (("VALID", (1,)), ("SAME", (1,)), ("VALID", (2,)), ("SAME", (2,))):
    _CONV_NO_XLA.append(("tf_conversion_path_1d", dict(
        lhs_shape=(1, 28, 1), rhs_shape=(3, 1, 16), padding=_pad,
        dimension_numbers=("NWC", "WIO", "NWC"), window_strides=(1,), lhs_dilation=(1,),
        rhs_dilation=_rd)))
for _name, _kw in _CONV_NO_XLA:
    _conv(_name, works_without_xla=True, **_kw)
for _ld, _rd in (((2, 2), (1, 1)), ((2, 3), (3, 2))):
    _conv("dilations", lhs_dilation=_ld, rhs_dilation=_rd)
for _pad, _rd in (("VALID", (1, 1, 1)), ("SAME", (1, 1, 1)), ("VALID", (1, 1, 2)),
                  ("SAME", (1, 1, 2))):
    _conv("tf_conversion_path_3d", lhs_shape=(1, 4, 28, 28, 1), rhs_shape=(2, 3, 3, 1, 16),
          padding=_pad, dimension_numbers=("NDHWC", "DHWIO", "NDHWC"), window_strides=(1, 1, 1),
          lhs_dilation=(1, 1, 1), rhs_dilation=_rd)


# --- rng_bit_generator, iota_2x32_shape -------------------------------------------------------

def _rng_bits(key, shape, dtype, algorithm, out_sharding=None):
    return lax.rng_bit_generator(key, shape, dtype=dtype, algorithm=algorithm,
                                 out_sharding=out_sharding)


_KEY_TYPES = [((4,), np.uint32)] + ([((2,), np.uint64)] if config.enable_x64.value else [])
for _alg in (lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX,
             lax.RandomAlgorithm.RNG_DEFAULT):
    for _dt in jtu.dtypes.unsigned:
        for _shape in ((), (5, 7), (100, 100)):
            for _key_shape, _key_dtype in _KEY_TYPES:
                define(lax.rng_bit_generator_p,
                       f"key_dtype={_key_dtype!r}_shape={_fmt(_shape, _dt)}_algorithm={_alg!r}",
                       _rng_bits, [RandArg(_key_shape, _key_dtype), StaticArg(_shape),
                                   StaticArg(_dt), StaticArg(_alg)],
                       shape=_shape, dtype=_dt, algorithm=_alg)

for _shape in ((3,), (5, 7, 4), (100, 100)):
    # plax has no iota_2x32_shape primitive: the same (high, low) words from threefry's helper.
    define("iota_2x32_shape", f"shape=({','.join(map(str, _shape))})",
           lambda shape: iota_2x32(shape, wide=True), [StaticArg(_shape)], dtype=np.uint32,
           shape=_shape)


# --- reduce_precision, approx_top_k -----------------------------------------------------------

def _reduce_precision(x, exponent_bits, mantissa_bits):
    return lax.reduce_precision(x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)


for _in in jtu.dtypes.all_floating:
    for _out in jtu.dtypes.all_floating:
        _info = dtypes.finfo(_out)
        for _shape in ((), (5, 7)):
            define(lax.reduce_precision_p, f"in={_fmt(_shape, _in)}_out={_fmt(_shape, _out)}",
                   _reduce_precision,
                   [RandArg(_shape, _in), StaticArg(_info.nexp), StaticArg(_info.nmant)],
                   shape=_shape, dtype=_in, out_dtype=_out)


def _approx_top_k(operand, is_max):
    """The 4 largest (``is_max``) or smallest along the last axis, approximately."""
    return lax.approx_top_k_p.bind(operand, k=4, reduction_dimension=-1, recall_target=0.95,
                                   is_max_k=is_max, reduction_input_size_override=-1,
                                   aggregate_to_topk=True)


for _is_max in (True, False):
    for _dt in jtu.dtypes.all_floating:
        for _shape in ((32,), (2048,), (16, 256)):
            define(lax.approx_top_k_p,
                   f"large={np.prod(_shape) >= 1024}_max={_is_max}_op={_fmt(_shape, _dt)}",
                   _approx_top_k, [RandArg(_shape, _dt), StaticArg(_is_max)],
                   dtype=_dt, is_max=_is_max, shape=_shape)
