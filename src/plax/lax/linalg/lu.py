"""lu: the pivoted LU factorisation P a = L U, and pivots -> permutation."""
from __future__ import annotations

from functools import partial

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import Zero, abstract_eval_rules, jvp_rules, register_lowering, tangent_aval
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.conversion import convert_element_type
from plax.lax.linalg import lapack
from plax.lax.linalg.common import (batched_on_front, check_matrix, eye_like, matmul,
                                    permute_rows, triangle)
from plax.lax.linalg.triangular import triangular_solve_p
from plax.lowering.inline import lower_fun

__all__ = ["lu", "lu_p", "lu_pivots_to_permutation", "lu_pivots_to_permutation_p", "lu_solve",
           "solve"]

lu_p = Primitive("lu", multiple_results=True)


lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation")


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation (of ``permutation_size`` rows, batched like ``pivots``) made by
    swapping row i with row pivots[..., i] for each i in turn."""
    aval = get_aval(pivots)
    if aval.ndim < 1 or not dtypes.is_integer(aval.dtype):
        raise TypeError(f"lu_pivots_to_permutation: pivots must be an integer array of rank >= "
                        f"1, got {aval.dtype}{list(aval.shape)}.")
    pivots = convert_element_type(pivots, np.int32)
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def _permutation_abstract(pivots, *, permutation_size):
    k = pivots.shape[-1]
    if k > permutation_size:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the "
                         f"trailing dimension of the pivots. Got pivots size {k}; pass "
                         f"permutation_size >= {k}.")
    return ShapedArray(pivots.shape[:-1] + (permutation_size,), np.int32)


def _permutation_jvp(primals, tangents, *, permutation_size):
    out = lu_pivots_to_permutation_p.bind(*primals, permutation_size=permutation_size)
    return out, Zero(tangent_aval(get_aval(out)))


def _permutation(pivots, *, permutation_size):
    from plax.higher_order.loops import fori_loop
    aval = get_aval(pivots)
    k, size = aval.shape[-1], permutation_size
    batch = aval.shape[:-1]
    positions = _shapes.broadcasted_iota(np.int32, batch + (size,), len(batch))

    def swap(i, perm):
        i = convert_element_type(i, np.int32)  # the loop counter is int64 under x64
        target = _shapes.squeeze(_slicing.dynamic_slice_in_dim(pivots, i, 1, len(batch)),
                                 (len(batch),))
        here = _cmp.eq(positions, i)
        there = _cmp.eq(positions, _shapes.broadcast_in_dim(target, batch + (size,),
                                                            tuple(range(len(batch)))))
        at_i = _pick(perm, here, batch, size)
        at_target = _pick(perm, there, batch, size)
        return _cmp.select_n(here, _cmp.select_n(there, perm, at_i), at_target)

    return fori_loop(0, k, swap, positions)


def _permutation_cuda(pivots, *, permutation_size):
    aval = get_aval(pivots)
    if 0 in aval.shape:
        return _permutation(pivots, permutation_size=permutation_size)
    out = (aval.shape[:-1] + (permutation_size,), np.int32, False)
    return lapack.call_target("cu_lu_pivots_to_permutation", [pivots], [out],
                              matrix_operands=(False,))[0]


abstract_eval_rules[lu_pivots_to_permutation_p] = _permutation_abstract
register_lowering(lu_pivots_to_permutation_p, lower_fun(_permutation))
register_lowering(lu_pivots_to_permutation_p, lower_fun(_permutation_cuda), platform="cuda")
jvp_rules[lu_pivots_to_permutation_p] = _permutation_jvp
batched_on_front(lu_pivots_to_permutation_p)


def _pick(perm, mask, batch, size):
    """perm's entry where ``mask`` (one True per row) holds, broadcast along the row."""
    from plax.first_order.reductions import reduce_sum
    zeros = _shapes.full(get_aval(mask).shape, 0, np.int32)
    chosen = reduce_sum(_cmp.select_n(mask, zeros, perm), (len(batch),))
    return _shapes.broadcast_in_dim(chosen, batch + (size,), tuple(range(len(batch))))


def _abstract(x):
    check_matrix("lu", x)
    m, n = x.shape[-2:]
    batch = x.shape[:-2]
    return [ShapedArray(x.shape, x.dtype), ShapedArray(batch + (min(m, n),), np.int32),
            ShapedArray(batch + (m,), np.int32)]


def _lu(x, *, platform):
    aval = get_aval(x)
    batch, (m, n) = aval.shape[:-2], aval.shape[-2:]
    k = min(m, n)
    if 0 in aval.shape:
        pivots = _shapes.broadcasted_iota(np.int32, batch + (k,), len(batch))
        return [x, pivots, _shapes.broadcasted_iota(np.int32, batch + (m,), len(batch))]
    results = [(aval.shape, aval.dtype, True), (batch + (k,), np.int32, False),
               (batch, np.int32, False)]
    if platform == "tpu":  # XLA's LuDecomposition: the factors, 0-based pivots, permutation
        return lapack.call_target("LuDecomposition", [x], [
            (aval.shape, aval.dtype, True), (batch + (k,), np.int32, False),
            (batch + (m,), np.int32, False)], config=(("api_version", 2),))
    if platform == "cuda":
        factors, ipiv, info = lapack.call_target("cusolver_getrf_ffi", [x], results,
                                                 aliases=((0, 0),))
    else:
        factors, ipiv, info = lapack.call("getrf", [x], results, aliases=((0, 0),))
    # info > 0 only says U is singular (the factors are complete); info < 0 is a failure.
    failed = _cmp.lt(info, np.int32(0))
    mask = _shapes.broadcast_in_dim(failed, aval.shape, tuple(range(len(batch))))
    factors = _cmp.select_n(mask, factors, _shapes.full(aval.shape, np.nan, aval.dtype))
    pivots = _arith.sub(ipiv, np.int32(1))  # LAPACK and cuSOLVER count rows from 1
    return [factors, pivots, lu_pivots_to_permutation(pivots, m)]


def _jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    factors, pivots, perm = lu_p.bind(x)
    int_tangents = [Zero(tangent_aval(get_aval(pivots))), Zero(tangent_aval(get_aval(perm)))]
    if type(dx) is Zero:
        return [factors, pivots, perm], [Zero(tangent_aval(get_aval(factors)))] + int_tangents
    aval = get_aval(x)
    batch, (m, n) = aval.shape[:-2], aval.shape[-2:]
    # Square unit-lower L (m x m) and upper U (n x n): the factors padded with the identity.
    square_m = ShapedArray(batch + (m, m), aval.dtype)
    square_n = ShapedArray(batch + (n, n), aval.dtype)
    nb = len(batch)
    low = _fit(triangle(factors, lower=True, k=-1), batch + (m, m), nb)
    low = _arith.add(low, eye_like(square_m))
    up = _fit(triangle(factors, lower=False), batch + (n, n), nb)
    if n > m:  # the missing diagonal of U
        extra = _cmp.select_n(triangle_pad_mask(batch, n, m), _shapes.full(square_n.shape, 0,
                              aval.dtype), eye_like(square_n))
        up = _arith.add(up, extra)
    pdx = permute_rows(dx, perm)  # P dx
    # X = L⁻¹ (P dx) U⁻¹;  dL = L strict_lower(X),  dU = upper(X) U.
    y = triangular_solve_p.bind(low, pdx, left_side=True, lower=True, transpose_a=False,
                                conjugate_a=False, unit_diagonal=True)
    middle = triangular_solve_p.bind(up, y, left_side=False, lower=False, transpose_a=False,
                                     conjugate_a=False, unit_diagonal=False)
    d_low = matmul(low, triangle(middle, lower=True, k=-1))
    d_up = matmul(triangle(middle, lower=False), up)
    return [factors, pivots, perm], [_arith.add(d_low, d_up)] + int_tangents


def triangle_pad_mask(batch, n, m):
    """True on the rows below ``m`` of an n x n identity (the diagonal U lacks when n > m)."""
    rows = _shapes.broadcasted_iota(np.int32, batch + (n, n), len(batch))
    return _cmp.ge(rows, np.int32(m))


def _fit(x, shape, nb):
    """``x`` cut or zero-padded in its last two dimensions to ``shape``."""
    xs = get_aval(x).shape
    zero = np.zeros((), get_aval(x).dtype)
    config = [(0, 0, 0)] * nb + [(0, t - s, 0) for s, t in zip(xs[nb:], shape[nb:])]
    return _shapes.pad(x, zero, config) if any(c[1] for c in config) else x


abstract_eval_rules[lu_p] = _abstract
register_lowering(lu_p, lower_fun(partial(_lu, platform="cpu"), multiple_results=True),
                  platform="cpu")
register_lowering(lu_p, lower_fun(partial(_lu, platform="cuda"), multiple_results=True),
                  platform="cuda")
register_lowering(lu_p, lower_fun(partial(_lu, platform="tpu"), multiple_results=True),
                  platform="tpu")
jvp_rules[lu_p] = _jvp
batched_on_front(lu_p)


def lu(x):
    """The LU factorisation with partial pivoting of each matrix of ``x`` (m x n): returns
    ``(lu, pivots, permutation)`` where ``lu`` holds L (unit diagonal, below) and U (on and
    above the diagonal), ``pivots`` the row swaps and ``permutation`` the rows of x in the
    order ``x[permutation] = L @ U``."""
    return lu_p.bind(x)


def lu_solve(factors, perm, b, trans: int = 0):
    """``x`` solving op(a) x = b for matrices ``b``, given ``a[perm] = L U`` packed in
    ``factors`` (as ``lu`` returns them): op is the identity (``trans`` 0), the transpose
    (1) or the conjugate transpose (2)."""
    solve = triangular_solve_p.bind
    flags = dict(left_side=True, conjugate_a=trans == 2)
    if trans == 0:
        x = solve(factors, permute_rows(b, perm), lower=True, transpose_a=False,
                  unit_diagonal=True, **dict(flags, conjugate_a=False))
        return solve(factors, x, lower=False, transpose_a=False, unit_diagonal=False,
                     **dict(flags, conjugate_a=False))
    # aᵀ = Uᵀ Lᵀ P, so x = Pᵀ (Lᵀ)⁻¹ (Uᵀ)⁻¹ b.
    x = solve(factors, b, lower=False, transpose_a=True, unit_diagonal=False, **flags)
    x = solve(factors, x, lower=True, transpose_a=True, unit_diagonal=True, **flags)
    from plax.first_order.sort import sort
    nb = get_aval(perm).ndim - 1
    positions = _shapes.broadcasted_iota(np.int32, get_aval(perm).shape, nb)
    _, inverse = sort((perm, positions), dimension=nb, num_keys=1)
    return permute_rows(x, inverse)


def solve(a, b):
    """a⁻¹ b for square matrices ``a`` (LU with partial pivoting)."""
    factors, _, perm = lu_p.bind(a)
    return lu_solve(factors, perm, b)
