"""Harnesses of lax's elementwise primitives, conversions and simple shape operations.

Unary and binary arithmetic, comparisons, bitwise operations, rounding, dtype conversions,
``reshape``, ``rev``, ``broadcast_in_dim``, ``iota``, ``argmin``/``argmax`` and a few more,
under JAX's group names, case names and dtypes. Importing the module defines them in
``harness_core.all_harnesses``.
"""
from __future__ import annotations

import numpy as np

from plax import device_put, lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.interpreters.ad import add_jaxvals_p
from plax._src import test_util as jtu
from plax._src import xla_bridge as xb
from plax._src.ad_util import stop_gradient_p
from plax._src.internal_test_util.harness_core import CustomArg, RandArg, StaticArg, define

_fmt = jtu.format_shape_dtype_string
_D = jtu.dtypes


def _but(dtype_list, *excluded):
    """``dtype_list`` without the dtypes of the ``excluded`` lists."""
    drop = {d for group in excluded for d in group}
    return [d for d in dtype_list if d not in drop]


def _two(name, lhs_shape, rhs_shape, lhs_dtype, rhs_dtype=None):
    """The case name of a two-operand harness: ``<name>_lhs=<f32[2]>_rhs=<f32[2]>``."""
    rhs_dtype = lhs_dtype if rhs_dtype is None else rhs_dtype
    return f"{name}_lhs={_fmt(lhs_shape, lhs_dtype)}_rhs={_fmt(rhs_shape, rhs_dtype)}"


# --- unary elementwise ------------------------------------------------------------------

_UNARY_INEXACT = ("acosh asinh atanh acos atan asin cos cosh exp expm1 log log1p rsqrt sin "
                  "sinh sqrt tan tanh logistic").split()
_UNARY_FLOATING = ("bessel_i0e bessel_i1e ceil erf erf_inv erfc floor is_finite lgamma "
                   "digamma cbrt").split()


def _unary(name: str, dtype, shape=(20, 20)):
    """``lax.<name>`` on a random (20, 20) array."""
    define(name, f"shape={_fmt(shape, dtype)}", getattr(lax, name), [RandArg(shape, dtype)],
           prim=getattr(lax, f"{name}_p"), dtype=dtype, shape=shape)


def _define_unary():
    for dtype in _but(_D.all, _D.all_unsigned, _D.boolean):
        _unary("abs", dtype)
    for dtype in _D.all_floating + _D.complex:
        for name in _UNARY_INEXACT:
            _unary(name, dtype)
    for dtype in _D.all_floating:
        for name in _UNARY_FLOATING:
            _unary(name, dtype)
    for dtype in _but(_D.all, _D.boolean):
        _unary("neg", dtype)
        _unary("sign", dtype)
        define("sign", f"special_0_dtype={jtu.dtype_str(dtype)}", lax.sign,
               [StaticArg(np.zeros((2, 2), dtype=dtype))], prim=lax.sign_p, dtype=dtype)


# --- rounding, conversions, powers ------------------------------------------------------

def _round(name, *, dtype=np.float32, rounding_method=lax.RoundingMethod.AWAY_FROM_ZERO,
           operand=None):
    """``lax.round`` of a random (100, 100) array, or of ``operand``."""
    operand = RandArg((100, 100), dtype) if operand is None else operand
    define("round", f"{name}_shape={_fmt(operand.shape, operand.dtype)}"
                    f"_roundingmethod={int(rounding_method)}",
           lax.round, [operand, StaticArg(rounding_method)], dtype=dtype, operand=operand,
           rounding_method=rounding_method)


def _convert(old, new, shape=(100, 100)):
    """``convert_element_type`` from ``old`` to ``new`` (bound even when they agree)."""
    define("convert_element_type",
           f"dtypes_to_dtypes_shape={_fmt(shape, old)}_olddtype={jtu.dtype_str(old)}"
           f"_newdtype={jtu.dtype_str(new)}",
           lambda x: lax.convert_element_type_p.bind(x, new_dtype=np.dtype(new),
                                                     weak_type=False),
           [RandArg(shape, old)], shape=shape, dtype=old, new_dtype=new)


def _integer_pow(name, dtype, y, shape=(20, 30)):
    """``lax.integer_pow(x, y)`` of a random (20, 30) array."""
    define("integer_pow", f"{name}_shape={_fmt(shape, dtype)}_y={y}", lax.integer_pow,
           [RandArg(shape, dtype), StaticArg(y)], shape=shape, dtype=dtype, y=y)


def _pow(name, shapes=((20, 30), (20, 30)), dtype=np.float32):
    """``lax.pow`` of random arrays of ``shapes``."""
    lhs, rhs = (RandArg(s, dtype) for s in shapes)
    define("pow", _two(name, lhs.shape, rhs.shape, dtype), lax.pow, [lhs, rhs], lhs=lhs,
           rhs=rhs, dtype=dtype)


def _bit_class(dtype):
    """Dtypes bitcast into one another iff their classes agree: the width of integers and
    floats; complex and bool types only into themselves."""
    if dtypes.issubdtype(dtype, np.integer) or dtypes.issubdtype(dtype, np.floating):
        return np.dtype(dtype).itemsize
    return np.dtype(dtype).name


def _define_conversions():
    for dtype in _D.all_floating:
        _round("dtypes", dtype=dtype)
    for method in (lax.RoundingMethod.AWAY_FROM_ZERO, lax.RoundingMethod.TO_NEAREST_EVEN):
        halves = [0.5, 1.2, 1.5, 1.7, 2.5]
        _round("rounding_methods", rounding_method=method,
               operand=np.array([halves, [-v for v in halves]], dtype=np.float32))

    for old in _D.all:
        inexact = dtypes.issubdtype(old, np.inexact)
        for new in (_but(_D.all, _D.all_unsigned) if inexact else _D.all):
            _convert(old, new)

    for dtype in _but(_D.all, _D.boolean):
        for y in range(-3, 5):
            if y >= 0 or not np.issubdtype(dtype, np.integer):
                _integer_pow("dtypes", dtype, y)
    for dtype in _D.all_inexact:
        _integer_pow("negative_overflow", dtype, -3)

    for dtype in _D.all_inexact:
        _pow("dtypes", dtype=dtype)
    for shapes in [((), (4, 5, 6)), ((4, 5, 6), ()), ((4, 1, 6), (4, 5, 6)),
                   ((4, 5, 6), (4, 1, 6))]:
        _pow("broadcast", shapes)

    for old in _D.all:
        for new in _D.all:
            if _bit_class(old) == _bit_class(new):
                define("bitcast_convert_type",
                       f"dtypes_to_new_dtypes_shape={_fmt((2, 3), old)}"
                       f"_newdtype={np.dtype(new).name}",
                       lambda x, new=new: lax.bitcast_convert_type(x, new),
                       [RandArg((2, 3), old)], shape=(2, 3), dtype=old, new_dtype=new)


# --- shapes and placement ---------------------------------------------------------------

def _reshape(name, shape=(2, 3), new_sizes=(3, 2), dimensions=(0, 1), dtype=np.float32):
    """``lax.reshape`` (collapsing in the order ``dimensions``) of a random array."""
    define("reshape", f"{name}_shape={_fmt(shape, dtype)}_newsizes={new_sizes}"
                      f"_dimensions={dimensions}",
           lax.reshape, [RandArg(shape, dtype), StaticArg(new_sizes), StaticArg(dimensions)],
           shape=shape, dtype=dtype, new_sizes=new_sizes, dimensions=dimensions)


def _rev(name, shape=(4, 5), dimensions=(0,), dtype=np.float32):
    """``lax.rev`` of a random array along ``dimensions``."""
    define("rev", f"{name}_shape={_fmt(shape, dtype)}_dimensions={dimensions}", lax.rev,
           [RandArg(shape, dtype), StaticArg(dimensions)], shape=shape, dtype=dtype,
           dimensions=dimensions)


def _device_put(name, dtype=np.float32, device=None, shape=(3, 4)):
    """``device_put`` of a random array onto the first device of platform ``device``."""
    def put(x):
        return device_put(x, None if device is None else xb.devices(device)[0])
    define("device_put", f"{name}_shape={_fmt(shape, dtype)}_device={device!r}", put,
           [RandArg(shape, dtype)], shape=shape, dtype=dtype, device=device)


def _broadcast_in_dim(name, dtype=np.float32, shape=(2,), outshape=(2,), dims=(0,)):
    """``lax.broadcast_in_dim`` of a random array to ``outshape``."""
    define("broadcast_in_dim", f"{name}_shape={_fmt(shape, dtype)}_outshape={outshape}"
                               f"_broadcastdimensions={dims}",
           lambda x: lax.broadcast_in_dim(x, outshape, dims), [RandArg(shape, dtype)],
           shape=shape, dtype=dtype, outshape=outshape, broadcast_dimensions=dims)


def _iota(name, dtype=np.float32, shape=(2, 3), dimension=0):
    """``iota`` along ``dimension`` (every argument static)."""
    define("iota", f"{name}_shape={_fmt(shape, dtype)}_dimension={dimension}",
           lax.broadcasted_iota, [StaticArg(dtype), StaticArg(shape), StaticArg(dimension)],
           shape=shape, dtype=dtype, dimension=dimension, sharding=None)


def _define_shapes():
    for dtype in _D.all:
        _reshape("dtypes", dtype=dtype)
        _rev("dtypes", dtype=dtype)
        _device_put("dtypes", dtype=dtype)
        _broadcast_in_dim("dtypes", dtype=dtype)
    for name, new_sizes, dims in [("new_sizes", (3, 20), (0, 1, 2)),
                                  ("new_sizes", (4, 15), (0, 1, 2)),
                                  ("dimensions", (3, 20), (2, 1, 0)),
                                  ("dimensions", (3, 20), (2, 0, 1))]:
        _reshape(name, (3, 4, 5), new_sizes, dims)
    for dims in [(), (0, 2), (0, 1, 2), (2, 0, 1)]:
        _rev("dimensions", (3, 4, 5), dims)
    _device_put("devices", device="cpu")
    for shape, outshape, dims in [((2,), (3, 2), (1,)), ((2,), (2, 3), (0,)),
                                  ((), (2, 3), ()), ((1, 2), (4, 3, 2), (0, 2))]:
        _broadcast_in_dim("parameter_combinations", shape=shape, outshape=outshape,
                          dims=dims)
    for dtype in _but(_D.all, _D.boolean):
        _iota("dtypes", dtype=dtype)
    for dimension in (1, 2):
        _iota("broadcasting", shape=(4, 8, 1, 1), dimension=dimension)

    for dtype in _but(_D.all, _D.boolean):
        define("add_any", _two("dtypes", (2,), (2,), dtype), add_jaxvals_p.bind,
               [RandArg((2,), dtype), RandArg((2,), dtype)], dtype=dtype,
               shapes=((2,), (2,)))
    for dtype in _D.all:
        define("stop_gradient", _fmt((20, 20), dtype), stop_gradient_p.bind,
               [RandArg((20, 20), dtype)], shape=(20, 20), dtype=dtype)


# --- comparisons, argmin/argmax, bit counts ---------------------------------------------

_COMPARATORS = dict(eq=jnp.equal, ne=jnp.not_equal, ge=jnp.greater_equal, gt=jnp.greater,
                    le=jnp.less_equal, lt=jnp.less)

_ARG_SPECIALS = [  # (name, operand) of argmin/argmax: ties, NaNs and infinities
    ("nan_0", [np.nan, np.nan, 2., -2., -np.nan, -np.nan]),
    ("nan_1", [np.nan, -np.nan, 2., -2.]),
    ("inf_0", [2., np.inf, np.inf, -2.]), ("inf_1", [2., np.inf, -np.inf, -2.]),
    ("inf_2", [2., -np.inf, np.inf, -2.]), ("inf_3", [2., -np.inf, -np.inf, -2.]),
    ("nan_inf_0", [2., np.nan, np.inf, -2.]), ("nan_inf_1", [2., np.nan, -np.inf, -2.]),
    ("equal", np.array([2., 2., 2.], np.int32)), ("singleton", [1.])]


def _argminmax(op_name, name, dtype=np.float32, shape=(15,), axes=(0,), index_dtype=np.int32,
               arr=None):
    """``lax.argmin``/``argmax`` over ``axes`` of a random array or of ``arr``, once per
    value of the ``enable_xla`` parameter."""
    arr = RandArg(shape, dtype) if arr is None else arr
    dtype, shape = arr.dtype, arr.shape
    index_dtype = dtypes.canonicalize_dtype(index_dtype)
    fun = getattr(lax, op_name)
    for enable_xla in (True, False):
        define(op_name, f"{name}_shape={_fmt(shape, dtype)}_axes={axes}"
                        f"_indexdtype={index_dtype}_enable_xla={enable_xla}",
               lambda x: fun(x, axes[0], index_dtype), [arr], shape=shape, dtype=dtype,
               axes=axes, index_dtype=index_dtype, prim=getattr(lax, f"{op_name}_p"),
               enable_xla=enable_xla)


def _define_comparisons():
    for op_name, op in _COMPARATORS.items():
        cases = [("dtypes", dtype, (), ()) for dtype in _D.all]
        cases += [("broadcasting", np.float32, lhs, rhs)
                  for lhs, rhs in [((), (2, 3)), ((1, 2), (3, 2))]]
        for name, dtype, lhs, rhs in cases:
            define(op_name, _two(name, lhs, rhs, dtype), op,
                   [RandArg(lhs, dtype), RandArg(rhs, dtype)], op=op, op_name=op_name,
                   lhs_shape=lhs, rhs_shape=rhs, dtype=dtype)

    for dtype in _D.all_integer + _D.all_unsigned:
        values = [0, 1, 2] if np.issubdtype(dtype, np.unsignedinteger) else [-1, -2, 0, 1]
        define("population_count", jtu.dtype_str(dtype), lax.population_count,
               [np.array(values, dtype=dtype)], dtype=dtype)

    for op_name in ("argmin", "argmax"):
        for dtype in _but(_D.all, _D.complex):
            _argminmax(op_name, "dtypes", dtype=dtype)
        _argminmax(op_name, "axes", shape=(18, 12), axes=(1,))
        for index_dtype in _D.all_integer + _D.all_unsigned:
            _argminmax(op_name, "index_dtype", index_dtype=index_dtype)
        for name, values in _ARG_SPECIALS:
            arr = values if isinstance(values, np.ndarray) else np.array(values, np.float32)
            _argminmax(op_name, f"special_{name}", arr=arr)


# --- binary arithmetic ------------------------------------------------------------------

def _div_rem(op_name, name, shapes=((2,), (2,)), dtype=np.float32, arrs=None):
    """``lax.div``/``lax.rem`` of a random array by a random nonzero one, or of ``arrs``."""
    if arrs is None:
        lhs = RandArg(shapes[0], dtype)
        rhs = CustomArg(lambda rng: jtu.rand_nonzero(rng)(shapes[1], dtype))
        case = _two(name, shapes[0], shapes[1], dtype)
    else:
        lhs, rhs = arrs
        case = _two(name, lhs.shape, rhs.shape, lhs.dtype, rhs.dtype)
    define(op_name, case, getattr(lax, op_name), [lhs, rhs], dtype=dtype, lhs=lhs, rhs=rhs,
           prim=getattr(lax, f"{op_name}_p"))


def _binary(group, fun, dtype_list, default_dtype=np.float32, broadcasting_dtypes=None):
    """``fun`` on random (20, 20) operands of each dtype, then broadcasting a (1, 20) one on
    either side."""
    prim = getattr(lax, f"{group}_p")
    cases = [("dtypes", dtype, ((20, 20), (20, 20))) for dtype in dtype_list]
    cases += [("broadcasting", dtype, shapes)
              for shapes in [((20, 20), (1, 20)), ((1, 20), (20, 20))]
              for dtype in broadcasting_dtypes or (default_dtype,)]
    for name, dtype, (lhs, rhs) in cases:
        define(group, _two(name, lhs, rhs, dtype), fun,
               [RandArg(lhs, dtype), RandArg(rhs, dtype)], jax_unimplemented=[], prim=prim,
               dtype=dtype, shapes=(lhs, rhs))


def _define_binary():
    for op_name in ("div", "rem"):
        excluded = (_D.boolean,) if op_name == "div" else (_D.boolean, _D.complex)
        for dtype in _but(_D.all, *excluded):
            _div_rem(op_name, "dtypes", dtype=dtype)
        for shapes in [((2, 1, 3), (2, 4, 3)), ((2, 4, 3), (2, 1, 3))]:
            _div_rem(op_name, "broadcast", shapes=shapes)
        for name, lhs, rhs in [("positive_by_0", np.ones(2), np.zeros(2)),
                               ("negative_by_0", -np.ones(2), np.zeros(2)),
                               ("0_by_0", np.zeros(2), np.zeros(2)),
                               ("inf_by_inf", [np.inf], [np.inf])]:
            _div_rem(op_name, f"singularity_{name}",
                     arrs=(np.asarray(lhs, np.float32), np.asarray(rhs, np.float32)))

    numeric = _but(_D.all, _D.boolean)
    integers = _D.all_integer + _D.all_unsigned
    for group, fun, dtype_list, default in [
            ("add", lax.add, numeric, np.float32), ("mul", lax.mul, numeric, np.float32),
            ("atan2", lax.atan2, _D.all_floating, np.float32),
            ("igamma", lax.igamma, _D.all_floating, np.float32),
            ("igammac", lax.igammac, _D.all_floating, np.float32),
            ("nextafter", lax.nextafter, _D.all_floating, np.float32),
            ("and", lax.bitwise_and, integers + _D.boolean, np.int32),
            ("or", lax.bitwise_or, integers + _D.boolean, np.int32),
            ("xor", lax.bitwise_xor, integers + _D.boolean, np.int32),
            ("shift_left", lax.shift_left, integers, np.int32),
            ("shift_right_logical", lax.shift_right_logical, integers, np.int32),
            ("shift_right_arithmetic", lax.shift_right_arithmetic, integers, np.int32),
            ("sub", lax.sub, numeric, np.float32)]:
        _binary(group, fun, dtype_list, default)

    row = [np.nan, np.inf, -np.inf]
    for group, fun in (("min", lax.min), ("max", lax.max)):
        _binary(group, fun, _D.all,
                broadcasting_dtypes=(np.float32, np.complex64, np.complex128))
        for dtype in _D.all_floating + _D.complex:
            define(group, f"inf_nan_{jtu.dtype_str(dtype)}", fun,
                   [np.array([[v] * 3 for v in row], dtype=dtype),
                    np.array([row] * 3, dtype=dtype)],
                   prim=getattr(lax, f"{group}_p"), dtype=dtype)

    for dtype in _D.all_floating:
        a = np.array([-1.6, -1.4, -1.0, 0.0, 0.1, 0.3, 1, 1.4, 1.6], dtype=dtype)
        b = np.array([-1.6, 1.4, 1.0, 0.0, 0.2, 0.1, 1, 1.4, -1.6], dtype=dtype)
        x = np.array([1.0, -1.0, 2.0, 1.0, 0.3, 0.3, -1.0, 2.4, 1.6], dtype=dtype)
        define("regularized_incomplete_beta", f"_{jtu.dtype_str(dtype)}", lax.betainc,
               [a, b, x], dtype=dtype)


_define_unary()
_define_conversions()
_define_shapes()
_define_comparisons()
_define_binary()
