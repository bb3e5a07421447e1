"""``jax._src.internal_test_util.lax_test_util``: the tables of lax operations JAX's lax
tests run over, and helpers for batching tests.

The tables are JAX's, in JAX's order (test cases are drawn from them by index, so the
order decides which cases run): each unary or binary operation with its arity, the dtypes
it is tested on, the generator of its arguments and its tolerance.
"""
from __future__ import annotations

import collections
import itertools

import ml_dtypes
import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.config import config
from plax._src import test_util

config.parse_flags_with_absl()

float_dtypes = test_util.dtypes.all_floating
complex_elem_dtypes = test_util.dtypes.floating
complex_dtypes = test_util.dtypes.complex
inexact_dtypes = test_util.dtypes.all_inexact
int_dtypes = test_util.dtypes.all_integer
uint_dtypes = test_util.dtypes.all_unsigned
bool_dtypes = test_util.dtypes.boolean

default_dtypes = float_dtypes + int_dtypes
number_dtypes = float_dtypes + complex_dtypes + int_dtypes + uint_dtypes
all_dtypes = number_dtypes + bool_dtypes
python_scalar_types = [bool, int, float, complex]

# Groups of shapes that broadcast together.
compatible_shapes = [[(3,)], [(3, 4), (3, 1), (1, 4)], [(2, 3, 4), (2, 1, 4)]]

OpRecord = collections.namedtuple("OpRecord", ["op", "nargs", "dtypes", "rng_factory", "tol"])


def op_record(op, nargs, dtypes, rng_factory, tol=None):
    """An ``OpRecord``: lax operation ``op`` (its name) of ``nargs`` arguments."""
    return OpRecord(op, nargs, dtypes, rng_factory, tol)


ReducerOpRecord = collections.namedtuple(
    "ReducerOpRecord", ["op", "reference_op", "init_val", "dtypes", "primitive"])


def lax_reduce_ops():
    """The reductions ``lax.reduce`` is tested with: the monoid, NumPy's version, the
    identity, the dtypes and the primitive the reduction becomes."""
    i32, i64 = dtypes.iinfo(np.int32), dtypes.iinfo(np.int64)
    u32, u64 = dtypes.iinfo(np.uint32), dtypes.iinfo(np.uint64)
    bits = int_dtypes + uint_dtypes + bool_dtypes
    rows = [
        (lax.add, np.add, 0, default_dtypes, lax.reduce_sum_p),
        (lax.mul, np.multiply, 1, default_dtypes, lax.reduce_prod_p),
        (lax.max, np.maximum, 0, uint_dtypes + bool_dtypes, lax.reduce_max_p),
        (lax.max, np.maximum, -np.inf, float_dtypes, lax.reduce_max_p),
        (lax.max, np.maximum, i32.min, [np.int32], lax.reduce_max_p),
        (lax.max, np.maximum, i64.min, [np.int64], lax.reduce_max_p),
        (lax.min, np.minimum, np.inf, float_dtypes, lax.reduce_min_p),
        (lax.min, np.minimum, i32.max, [np.int32], lax.reduce_min_p),
        (lax.min, np.minimum, i64.max, [np.int64], lax.reduce_min_p),
        (lax.min, np.minimum, u32.max, [np.uint32], lax.reduce_min_p),
        (lax.min, np.minimum, u64.max, [np.uint64], lax.reduce_min_p),
        (lax.bitwise_and, np.bitwise_and, -1, bits, lax.reduce_and_p),
        (lax.bitwise_or, np.bitwise_or, 0, bits, lax.reduce_or_p),
        (lax.bitwise_xor, np.bitwise_xor, 0, bits, lax.reduce_xor_p),
    ]
    return [ReducerOpRecord(*row) for row in rows]


NamedReducerOpRecord = collections.namedtuple("NamedReducerOpRecord",
                                              ["op", "reference_op", "dtypes"])


def lax_named_reduce_ops():
    """The ``lax.reduce_*`` functions with NumPy's versions and their dtypes."""
    bits = bool_dtypes + int_dtypes + uint_dtypes
    return [
        NamedReducerOpRecord(lax.reduce_sum, np.sum, number_dtypes),
        NamedReducerOpRecord(lax.reduce_prod, np.prod, number_dtypes),
        NamedReducerOpRecord(lax.reduce_max, np.max, all_dtypes),
        NamedReducerOpRecord(lax.reduce_min, np.min, all_dtypes),
        NamedReducerOpRecord(lax.reduce_and, np.bitwise_and.reduce, bits),
        NamedReducerOpRecord(lax.reduce_or, np.bitwise_or.reduce, bits),
        NamedReducerOpRecord(lax.reduce_xor, np.bitwise_xor.reduce, bits),
    ]


def lax_out_dtype_ops():
    """Operations tested with an explicit output dtype."""
    return [op_record("mul", 2, default_dtypes + complex_dtypes, test_util.rand_small)]


def lax_ops():
    """The elementwise operations of lax, in JAX's order."""
    jtu = test_util
    floats_complex = float_dtypes + complex_dtypes
    wide_floats = [f for f in float_dtypes if f not in (ml_dtypes.bfloat16, np.float16)]
    rows = [
        ("neg", 1, default_dtypes + complex_dtypes, jtu.rand_small),
        ("sign", 1, default_dtypes + uint_dtypes, jtu.rand_small),
        ("floor", 1, float_dtypes, jtu.rand_small),
        ("ceil", 1, float_dtypes, jtu.rand_small),
        ("round", 1, float_dtypes, jtu.rand_default),
        ("nextafter", 2, [f for f in float_dtypes if f != ml_dtypes.bfloat16],
         jtu.rand_default, 0),
        ("is_finite", 1, float_dtypes, jtu.rand_small),
        ("exp", 1, floats_complex, jtu.rand_small),
        ("exp2", 1, floats_complex, jtu.rand_small),
        # (expm1 in float64 on the CPU is about as accurate as float32.)
        ("expm1", 1, floats_complex, jtu.rand_small, {np.float64: 1e-8}),
        ("log", 1, floats_complex, jtu.rand_positive),
        ("log1p", 1, floats_complex, jtu.rand_positive),
        ("tanh", 1, floats_complex, jtu.rand_small, {np.float64: 1e-9, np.complex128: 1e-7}),
        ("logistic", 1, floats_complex, jtu.rand_default),
        ("sin", 1, floats_complex, jtu.rand_default),
        ("cos", 1, floats_complex, jtu.rand_default),
        ("atan2", 2, float_dtypes, jtu.rand_default),
        ("sqrt", 1, float_dtypes, jtu.rand_positive),
        ("sqrt", 1, complex_dtypes, jtu.rand_default),
        ("rsqrt", 1, float_dtypes, jtu.rand_positive),
        ("rsqrt", 1, complex_dtypes, jtu.rand_default),
        ("cbrt", 1, float_dtypes, jtu.rand_default),
        ("square", 1, floats_complex, jtu.rand_default),
        ("reciprocal", 1, floats_complex, jtu.rand_positive),
        ("tan", 1, floats_complex, jtu.rand_default, {np.float32: 3e-5}),
        ("asin", 1, floats_complex, jtu.rand_small, {np.complex128: 5e-12}),
        ("acos", 1, floats_complex, jtu.rand_small),
        ("atan", 1, floats_complex, jtu.rand_small),
        ("asinh", 1, floats_complex, jtu.rand_default, {np.complex64: 1e-4,
                                                        np.complex128: 1e-5}),
        ("acosh", 1, floats_complex, jtu.rand_positive),
        ("atanh", 1, floats_complex, jtu.rand_small, {np.float64: 1e-9}),
        ("sinh", 1, floats_complex, jtu.rand_default),
        ("cosh", 1, floats_complex, jtu.rand_default),
        ("lgamma", 1, float_dtypes, jtu.rand_positive, {np.float32: 1e-5, np.float64: 1e-14}),
        ("digamma", 1, float_dtypes, jtu.rand_positive, {np.float64: 1e-14}),
        ("betainc", 3, float_dtypes, jtu.rand_uniform, {np.float32: 2e-5, np.float64: 1e-12}),
        ("igamma", 2, wide_floats, jtu.rand_positive, {np.float64: 1e-14}),
        ("igammac", 2, wide_floats, jtu.rand_positive, {np.float64: 1e-14}),
        ("erf", 1, float_dtypes, jtu.rand_small),
        ("erfc", 1, float_dtypes, jtu.rand_small),
        # (XLA's erf_inv approximation is about as accurate as float32.)
        ("erf_inv", 1, float_dtypes, jtu.rand_small, {np.float64: 1e-9}),
        ("bessel_i0e", 1, float_dtypes, jtu.rand_default),
        ("bessel_i1e", 1, float_dtypes, jtu.rand_default),
        ("real", 1, complex_dtypes, jtu.rand_default),
        ("imag", 1, complex_dtypes, jtu.rand_default),
        ("complex", 2, complex_elem_dtypes, jtu.rand_default),
        ("conj", 1, complex_elem_dtypes + complex_dtypes, jtu.rand_default),
        ("abs", 1, default_dtypes + complex_dtypes, jtu.rand_default),
        ("pow", 2, floats_complex, jtu.rand_positive),
        ("bitwise_and", 2, bool_dtypes, jtu.rand_small),
        ("bitwise_not", 1, bool_dtypes, jtu.rand_small),
        ("bitwise_or", 2, bool_dtypes, jtu.rand_small),
        ("bitwise_xor", 2, bool_dtypes, jtu.rand_small),
        ("population_count", 1, int_dtypes + uint_dtypes, jtu.rand_int),
        ("clz", 1, int_dtypes + uint_dtypes, jtu.rand_int),
        ("add", 2, default_dtypes + complex_dtypes, jtu.rand_small),
        ("sub", 2, default_dtypes + complex_dtypes, jtu.rand_small),
        ("mul", 2, default_dtypes + complex_dtypes, jtu.rand_small),
        ("mulhi", 2, int_dtypes + uint_dtypes, jtu.rand_fullrange),
        ("div", 2, default_dtypes + complex_dtypes, jtu.rand_nonzero),
        ("rem", 2, default_dtypes, jtu.rand_nonzero),
        ("max", 2, all_dtypes, jtu.rand_small),
        ("min", 2, all_dtypes, jtu.rand_small),
        ("eq", 2, all_dtypes, jtu.rand_some_equal),
        ("ne", 2, all_dtypes, jtu.rand_small),
        ("ge", 2, default_dtypes, jtu.rand_small),
        ("gt", 2, default_dtypes, jtu.rand_small),
        ("le", 2, default_dtypes, jtu.rand_small),
        ("lt", 2, default_dtypes, jtu.rand_small),
    ]
    return [op_record(*row) for row in rows]


def all_bdims(*shapes):
    """Every choice of a batch dimension (or None) per shape, but all None."""
    options = [[None, *range(len(shape) + 1)] for shape in shapes]
    return (t for t in itertools.product(*options) if not all(e is None for e in t))


def add_bdim(bdim_size, bdim, shape):
    """``shape`` with a batch dimension of ``bdim_size`` inserted at ``bdim`` (None: none)."""
    shape = list(shape)
    if bdim is not None:
        shape.insert(bdim, bdim_size)
    return tuple(shape)


def slicer(x, bdim):
    """``i -> x``'s slice ``i`` along ``bdim`` (``x`` itself when ``bdim`` is None)."""
    if bdim is None:
        return lambda _: x
    return lambda i: lax.index_in_dim(x, i, bdim, keepdims=False)


def args_slicer(args, bdims):
    """``i -> [each argument's slice i]`` along its batch dimension."""
    if len(args) != len(bdims):
        raise ValueError(f"args_slicer: {len(args)} arguments but {len(bdims)} batch dims")
    slicers = [slicer(x, b) for x, b in zip(args, bdims)]
    return lambda i: [sl(i) for sl in slicers]
