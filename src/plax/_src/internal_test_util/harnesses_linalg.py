"""Harnesses of cumulative reductions, top_k and sort, linear algebra, FFT and jax.random.

The groups cummin, cummax, cumlogsumexp, cumsum, cumprod, top_k, sort, cholesky, qr, fft,
svd, eig, eigh, lu, triangular_solve, custom_linear_solve, tridiagonal_solve and the
random_* groups of ``test_harnesses.all_harnesses``, under JAX's group and case names,
with JAX's dtypes (a NumPy scalar type, or the ``np.dtype`` of a constant operand) and
JAX's ``jax_unimplemented`` limitations.
"""
from __future__ import annotations

import itertools
from functools import partial

import numpy as np

import plax
from plax import lax, random
from plax import numpy as jnp
from plax.core import dtypes
from plax.lax import linalg
from plax._src import test_util as jtu
from plax._src.internal_test_util.harness_core import (
    CustomArg, Limitation, RandArg, StaticArg, define)

_sds = jtu.format_shape_dtype_string
_HALF = (np.float16, dtypes.bfloat16)
_DT = jtu.dtypes


def _unimplemented(dts, devices=("cpu", "gpu", "tpu"), what="unimplemented"):
    return Limitation(what, devices=devices, dtypes=list(dts))


# --- cumulative reductions ---------------------------------------------------------------

def _cumulative_harnesses():
    """Each of cummin & co: per dtype, per axis and reversed, each with and without
    associative-scan reductions (the parameter only records which)."""
    funs = (("cummin", lax.cummin), ("cummax", lax.cummax),
            ("cumlogsumexp", lax.cumlogsumexp), ("cumsum", lax.cumsum),
            ("cumprod", lax.cumprod))
    shape = (8, 9)
    for group, fun in funs:
        floats_only = group == "cumlogsumexp"
        cases = [("dtype_by_fun", dt, 0, False) for dt in _DT.all
                 if dt != np.bool_ and (not floats_only or np.issubdtype(dt, np.floating))]
        cases += [("axis_by_fun", np.float32, axis, False) for axis in range(len(shape))]
        cases.append(("reverse", np.float32, 0, True))
        for name, dtype, axis, reverse in cases:
            for assoc in (False, True):
                infix = "_associative_scan_reductions" if assoc else ""
                define(group, f"{name}_shape={_sds(shape, dtype)}{infix}_{axis=}_{reverse=}",
                       fun, [RandArg(shape, dtype), StaticArg(axis), StaticArg(reverse)],
                       dtype=dtype, f_jax=fun, shape=shape, axis=axis, reverse=reverse,
                       associative_scan_reductions=assoc)


# --- top_k and sort ----------------------------------------------------------------------

def _top_k_harnesses():
    """top_k per non-complex dtype, then on constants: ties (stability), infinities, NaNs."""
    cases = [("dtypes", RandArg((5, 3), dt), 2) for dt in _DT.all if dt not in _DT.complex]
    cases += [("stability", np.array([5, 7, 5, 8, 8, 5], np.int32), 3),
              ("sort_inf_nan", np.array([np.inf, np.nan, -np.nan, -np.inf, 3], np.float32), 5)]
    for name, operand, k in cases:
        define(lax.top_k_p, f"{name}_inshape={_sds(operand.shape, operand.dtype)}_{k=}",
               lax.top_k, [operand, StaticArg(k)],
               dtype=operand.dtype, shape=operand.shape, k=k)


def _sort_bound(*args):
    *operands, dimension, is_stable, num_keys = args
    return lax.sort_p.bind(*operands, dimension=dimension, is_stable=is_stable,
                           num_keys=num_keys)


def _sort_harnesses():
    """sort_p per dtype, per dimension, stable, on infinities and NaNs, and over several
    arrays keyed by the first one or more (the first holds only 0s and 1s)."""
    cases = [("dtypes", [RandArg((5, 7), dt)], 0, False, 1) for dt in _DT.all]
    cases += [("dimensions", [RandArg((5, 7), np.float32)], dim, False, 1) for dim in (0, 1)]
    cases.append(("is_stable", [RandArg((5, 7), np.float32)], 0, True, 1))
    edge = np.array([np.inf, np.nan, -np.nan, -np.inf, 2], np.float32)
    cases.append(("edge_cases", [edge], 0, False, 1))
    n = (100,)
    zeros_ones = np.random.RandomState(0).randint(0, 2, n).astype(np.int32)
    arrays = ([zeros_ones, RandArg(n, np.int32)],
              [zeros_ones, RandArg(n, np.int32), RandArg(n, np.float32)])
    for is_stable, operands in itertools.product((False, True), arrays):
        cases += [("multiple_arrays", operands, 0, is_stable, keys)
                  for keys in range(1, len(operands) + 1)]
    for name, operands, dim, is_stable, keys in cases:
        first = operands[0]
        define(lax.sort_p,
               f"{name}_num_arrays={len(operands)}_shape={_sds(first.shape, first.dtype)}"
               f"_axis={dim}_isstable={is_stable}_num_keys={keys}",
               _sort_bound, [*operands, StaticArg(dim), StaticArg(is_stable), StaticArg(keys)],
               dtype=first.dtype, shape=first.shape, dimension=dim, is_stable=is_stable,
               num_keys=keys, num_arrays=len(operands))


# --- decompositions ----------------------------------------------------------------------

def _gram(shape, dtype, rng):
    """``a @ a^H`` of a random ``a``: Hermitian positive semi-definite."""
    a = jtu.rand_default(rng)(shape, dtype)
    return np.matmul(a, np.conj(np.swapaxes(a, -1, -2)))


def _hermitian(shape, dtype, rng):
    """``(a + a^H) / 2`` of a random ``a``."""
    a = jtu.rand_default(rng)(shape, dtype)
    return (a + np.conj(np.swapaxes(a, -1, -2))) / 2


def _eigh_of_triangle(operand, lower, symmetrize_input):
    triangle = jnp.tril(operand) if lower else jnp.triu(operand)
    return linalg.eigh(triangle, lower=lower, symmetrize_input=symmetrize_input)


def _svd_bound(x, full_matrices, compute_uv, subset_by_index):
    return linalg.svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv,
                             subset_by_index=subset_by_index)


def _decomposition_harnesses():
    """cholesky, qr, svd, eig, eigh and lu over their dtypes, shapes and flags."""
    for dtype, shape in itertools.product(
            _DT.all_inexact, [(1, 1), (4, 4), (2, 5, 5), (200, 200), (1000, 0, 0)]):
        define(linalg.cholesky_p, f"shape={_sds(shape, dtype)}", linalg.cholesky_p.bind,
               [CustomArg(partial(_gram, shape, dtype))],
               jax_unimplemented=[_unimplemented([np.float16], ("cpu", "gpu"))],
               dtype=dtype, shape=shape)
    for dtype, shape, full in itertools.product(
            _DT.all_floating + _DT.complex,
            [(1, 1), (3, 3), (3, 4), (2, 10, 5), (2, 200, 100)], (False, True)):
        define(linalg.qr_p, f"multi_array_shape={_sds(shape, dtype)}_fullmatrices={full}",
               partial(linalg.qr, full_matrices=full), [RandArg(shape, dtype)],
               jax_unimplemented=[_unimplemented(_HALF, ("cpu", "gpu"))],
               dtype=dtype, shape=shape, full_matrices=full)
    for dtype, shape, full, uv in itertools.product(
            _DT.all_floating + _DT.complex,
            [(2, 2), (2, 7), (29, 29), (2, 3, 53), (2, 3, 29, 7)], (False, True), (False, True)):
        define(linalg.svd_p, f"shape={_sds(shape, dtype)}_fullmatrices={full}_computeuv={uv}",
               _svd_bound, [RandArg(shape, dtype), StaticArg(full), StaticArg(uv),
                            StaticArg(None)],
               jax_unimplemented=[_unimplemented(_HALF)], dtype=dtype, shape=shape,
               full_matrices=full, compute_uv=uv, subset_by_index=None)
    for dtype, shape, left, right in itertools.product(
            _DT.all_inexact, [(0, 0), (5, 5), (2, 6, 6)], (False, True), (False, True)):
        define(linalg.eig_p,
               f"shape={_sds(shape, dtype)}_computelefteigenvectors={left}"
               f"_computerighteigenvectors={right}",
               partial(linalg.eig, compute_left_eigenvectors=left,
                       compute_right_eigenvectors=right),
               [RandArg(shape, dtype)],
               jax_unimplemented=[
                   Limitation("only supported on CPU in JAX", devices=("tpu", "gpu")),
                   _unimplemented(_HALF, "cpu")],
               dtype=dtype, shape=shape, compute_left_eigenvectors=left,
               compute_right_eigenvectors=right)
    for dtype, shape, lower in itertools.product(
            _DT.all_inexact, [(0, 0), (50, 50), (2, 20, 20)], (False, True)):
        define(linalg.eigh_p, f"shape={_sds(shape, dtype)}_{lower=}", _eigh_of_triangle,
               [CustomArg(partial(_hermitian, shape, dtype)), StaticArg(lower),
                StaticArg(False)],
               jax_unimplemented=[_unimplemented(_HALF, ("cpu", "gpu"))],
               dtype=dtype, shape=shape, lower=lower)
    for dtype, shape in itertools.product(_DT.all_inexact, [(5, 5), (3, 5, 5), (3, 5)]):
        define(linalg.lu_p, f"shape={_sds(shape, dtype)}", linalg.lu, [RandArg(shape, dtype)],
               jax_unimplemented=[_unimplemented(_HALF)], dtype=dtype, shape=shape)


# --- fft ---------------------------------------------------------------------------------

def _fft_bound(x, fft_type, fft_lengths):
    return lax.fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths)


def _fft_harnesses():
    """Each FFT type per dtype (also on an empty operand), then over 1 to 3 dimensions."""
    shape = (14, 15, 16, 17)
    empty = (14, 15, 0, 17)
    cases = []
    for fft_type in lax.FftType:
        inverse_real = fft_type == lax.FftType.IRFFT
        real_in = fft_type == lax.FftType.RFFT
        lengths_list = ([((shape[-1] - 1) * 2,), (shape[-1] * 2 - 1,)] if inverse_real
                        else [shape[-1:]])
        for dtype in (_DT.floating if real_in else _DT.complex):
            for lengths in lengths_list:
                cases += [("dtypes", shape, dtype, fft_type, lengths),
                          ("dtypes_zero", empty, dtype, fft_type, lengths)]
        dtype = np.float32 if real_in else np.complex64
        for dims in (1, 2, 3):
            lengths = (shape[-dims:-1] + ((shape[-1] - 1) * 2,) if inverse_real
                       else shape[-dims:])
            cases.append(("dims", shape, dtype, fft_type, lengths))
    for name, shp, dtype, fft_type, lengths in cases:
        define(lax.fft_p,
               f"{name}_shape={_sds(shp, dtype)}_ffttype={int(fft_type)}_fftlengths={lengths}",
               _fft_bound, [RandArg(shp, dtype), StaticArg(fft_type), StaticArg(lengths)],
               dtype=dtype, shape=shp, fft_type=fft_type, fft_lengths=lengths)


# --- solvers -----------------------------------------------------------------------------

def _triangular_solve_harnesses():
    """triangular_solve_p per dtype (with and without a unit diagonal), solving on the
    right, and under each transformation of a complex and of a real matrix."""
    square = ((4, 4), (4, 1))
    cases = [("dtypes", dt, square, dict(unit_diagonal=unit))
             for dt in _DT.all_inexact for unit in (False, True)]
    cases += [("shapes_right", np.float32, ab, dict(left_side=False))
              for ab in (((4, 4), (1, 4)), ((2, 8, 8), (2, 10, 8)))]
    cases += [("complex_transformations", np.complex64, square,
               dict(lower=lower, transpose_a=tr, conjugate_a=conj))
              for lower, tr, conj in itertools.product((False, True), repeat=3)]
    cases += [("real_transformations", np.float32, square, dict(lower=lower, transpose_a=tr))
              for lower, tr in itertools.product((False, True), repeat=2)]
    for name, dtype, (a_shape, b_shape), flags in cases:
        p = {**dict(left_side=True, lower=False, transpose_a=False, conjugate_a=False,
                    unit_diagonal=False), **flags}
        define(linalg.triangular_solve_p,
               f"{name}_a={_sds(a_shape, dtype)}_b={_sds(b_shape, dtype)}"
               f"_leftside={p['left_side']}_lower={p['lower']}_transposea={p['transpose_a']}"
               f"_conjugatea={p['conjugate_a']}_unitdiagonal={p['unit_diagonal']}",
               partial(linalg.triangular_solve_p.bind, **p),
               [RandArg(a_shape, dtype), RandArg(b_shape, dtype)],
               jax_unimplemented=[_unimplemented([np.float16], "gpu")],
               dtype=dtype, a_shape=a_shape, b_shape=b_shape, **p)


def explicit_jacobian_solve(matvec, b):
    """Solves ``matvec(x) = b`` through the matrix of ``matvec`` (its Jacobian)."""
    return lax.stop_gradient(jnp.linalg.solve(plax.jacobian(matvec)(b), b))


def _linear_solve(a, b, solve, transpose_solve=None, symmetric=False):
    matvec = partial(lax.dot, a, precision=lax.Precision.HIGHEST)
    return lax.custom_linear_solve(matvec, b, solve, transpose_solve, symmetric)


def _matrix(shape, dtype, symmetric, rng):
    a = jtu.rand_default(rng)(shape, dtype)
    return a + a.T if symmetric else a


def _solver_harnesses():
    """custom_linear_solve (default, symmetric, without transpose_solve) and
    tridiagonal_solve on a constant system."""
    shape = (4, 4)
    ejs = explicit_jacobian_solve
    cases = [("dtypes", dt, False, ejs) for dt in _DT.all_floating if dt not in _HALF]
    cases += [("symmetric", np.float32, True, ejs), ("transpose_solve", np.float32, False, None)]
    for name, dtype, symmetric, transpose_solve in cases:
        tname = transpose_solve.__name__ if transpose_solve else None
        define(lax.linear_solve_p,
               f"{name}_a={_sds(shape, dtype)}_b={_sds(shape[:-1], dtype)}"
               f"_solve={ejs.__name__}_transposesolve={tname}_{symmetric=}",
               _linear_solve,
               [CustomArg(partial(_matrix, shape, dtype, symmetric)),
                RandArg(shape[:-1], dtype), StaticArg(ejs), StaticArg(transpose_solve),
                StaticArg(symmetric)],
               dtype=dtype, shape=shape, solve=ejs, transpose_solve=transpose_solve,
               symmetric=symmetric)
    for dtype in (np.float32, np.float64):
        define(linalg.tridiagonal_solve_p, f"shape={_sds((3,), dtype)}",
               linalg.tridiagonal_solve,
               [np.array([0.0, 2.0, 3.0], dtype), np.ones(3, dtype),
                np.array([1.0, 2.0, 0.0], dtype), np.ones((3, 1), dtype)],
               dtype=dtype)


# --- jax.random --------------------------------------------------------------------------

def _split_key_data():
    return random.key_data(random.split(random.key(42), 2))


def _random_harnesses():
    """A few jax.random samplers under jit or with static arguments only."""
    gamma = plax.jit(lambda a: random.gamma(random.key(42), a))
    for dtype, shape in itertools.product((np.float32, np.float64), ((), (3,))):
        define("random_gamma", f"shape={_sds(shape, dtype)}", gamma, [RandArg(shape, dtype)],
               dtype=dtype)
    define("random_split", "", plax.jit(_split_key_data), [], dtype=np.uint32)
    for dtype in _DT.all_floating:
        for shape in ((8,), (5, 4)):
            for axis in range(len(shape)):
                define("random_categorical", f"shape={_sds(shape, dtype)}_{axis=}",
                       lambda x, axis: random.categorical(random.key(1337), x, axis),
                       [RandArg(shape, dtype), StaticArg(axis)], dtype=dtype, axis=axis)
    shapes = ((), (5, 4), (32,))
    for dtype, shape in itertools.product(_DT.all_floating, shapes):
        define("random_uniform", f"shape={_sds(shape, dtype)}",
               lambda shape, dtype: random.uniform(random.key(42), shape, dtype),
               [StaticArg(shape), StaticArg(dtype)], dtype=dtype)
    for dtype, shape in itertools.product(_DT.all_integer, shapes):
        define("random_randint", f"shape={_sds(shape, dtype)}",
               lambda shape, lo, hi, dtype: random.randint(random.key(42), shape, lo, hi, dtype),
               [StaticArg(shape), StaticArg(-5), StaticArg(256 if dtype == np.uint8 else 5),
                StaticArg(dtype)],
               dtype=dtype)


_cumulative_harnesses()
_top_k_harnesses()
_sort_harnesses()
_decomposition_harnesses()
_fft_harnesses()
_triangular_solve_harnesses()
_solver_harnesses()
_random_harnesses()
