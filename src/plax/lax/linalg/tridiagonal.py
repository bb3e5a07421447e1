"""tridiagonal_solve: solve T x = b for tridiagonal T given by its three diagonals."""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, is_undefined, jvp_rules,
                             register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.higher_order.scan import scan
from plax.lax.linalg import lapack
from plax.lax.linalg.common import batched_on_front, check_matrix, over_batch
from plax.lowering.inline import lower_fun

__all__ = ["tridiagonal_solve", "tridiagonal_solve_p"]

tridiagonal_solve_p = Primitive("tridiagonal_solve")


def _abstract(dl, d, du, b):
    if b.ndim < 2:
        raise TypeError(f"Input 3 to tridiagonal_solve must have rank at least 2, but got "
                        f"shape={b.shape}; pass b as a (batch of) m x n matrices.")
    check_matrix("tridiagonal_solve", b, arg="b")
    want = b.shape[:-1]
    for name, diag in (("dl", dl), ("d", d), ("du", du)):
        if diag.shape != want:
            raise ValueError(f"tridiagonal_solve: {name} must have shape {want} (b's batch "
                             f"dimensions and its m rows), got {diag.shape} for b {b.shape}.")
        if diag.dtype != b.dtype:
            raise TypeError(f"tridiagonal_solve: {name} and b must share a dtype, got "
                            f"{diag.dtype} and {b.dtype}.")
    return ShapedArray(b.shape, b.dtype)


def _cpu(dl, d, du, b):
    aval = get_aval(b)
    if 0 in aval.shape:
        return b
    diag = get_aval(d)
    batch = aval.shape[:-2]
    *_, x, info = lapack.call(
        "gtsv", [dl, d, du, b],
        [(diag.shape, diag.dtype, False)] * 3 + [(aval.shape, aval.dtype, True),
                                                 (batch, np.int32, False)],
        matrix_operands=(False, False, False, True), aliases=((0, 0), (1, 1), (2, 2), (3, 3)))
    return lapack.nan_unless_ok(info, x)


def thomas_solve(dl, d, du, b):
    """``x`` solving ``T x = b`` for one system (diagonals (m,), b (m, n)) by the Thomas
    algorithm, Gaussian elimination without pivoting: JAX's solver where no kernel is (TPUs),
    so a zero pivot gives inf/NaN."""
    def eliminate(carry, row):
        c_prev, y_prev = carry
        low, mid, up, rhs = row
        pivot = _arith.sub(mid, _arith.mul(low, c_prev))
        c = _arith.div(up, pivot)
        y = _arith.div(_arith.sub(rhs, _arith.mul(low, y_prev)), pivot)
        return (c, y), (c_prev, y_prev)

    def substitute(x_next, row):
        c, y = row
        return _arith.sub(y, _arith.mul(c, x_next)), x_next

    du0, b0, d0 = (_slicing.index_in_dim(v, 0, 0, False) for v in (du, b, d))
    rest = tuple(_slicing.slice_in_dim(v, 1, None, axis=0) for v in (dl, d, du, b))
    (_, last), rows = scan(eliminate, (_arith.div(du0, d0), _arith.div(b0, d0)), rest,
                           unroll=32)
    x0, xs = scan(substitute, last, rows, reverse=True, unroll=32)
    return _shapes.concatenate([_shapes.expand_dims(x0, (0,)), xs], 0)


def _tpu(dl, d, du, b):
    aval = get_aval(b)
    if aval.shape[-2] == 0:
        return b
    return over_batch(lambda *system: [thomas_solve(*system)], aval.ndim - 2)(dl, d, du, b)[0]


def _shift(v, by: int):
    """``v`` moved ``by`` places along its last axis (zeros come in)."""
    nd = get_aval(v).ndim
    config = [(0, 0, 0)] * (nd - 1) + [(by, -by, 0)]
    return _shapes.pad(v, np.zeros((), get_aval(v).dtype), config)


def _tridiagonal_matmul(dl, d, du, x):
    """T x for T with diagonals dl (below), d, du (above); x is (..., m, n)."""
    nd = get_aval(x).ndim
    col = lambda v: _shapes.expand_dims(v, (nd - 1,))  # noqa: E731
    down = _shift_rows(x, 1)   # x[i - 1]
    up = _shift_rows(x, -1)    # x[i + 1]
    return _arith.add(_arith.add(_arith.mul(col(dl), down), _arith.mul(col(d), x)),
                      _arith.mul(col(du), up))


def _shift_rows(x, by: int):
    nd = get_aval(x).ndim
    config = [(0, 0, 0)] * (nd - 2) + [(by, -by, 0), (0, 0, 0)]
    return _shapes.pad(x, np.zeros((), get_aval(x).dtype), config)


def _jvp(primals, tangents):
    dl, d, du, b = primals
    x = tridiagonal_solve_p.bind(dl, d, du, b)
    ddl, dd, ddu, db = tangents
    if all(type(t) is Zero for t in tangents):
        return x, Zero(tangent_aval(get_aval(x)))
    # T x = b  =>  T dx = db - dT x
    zeros = lambda v: _shapes.full(get_aval(v).shape, 0, get_aval(v).dtype)  # noqa: E731
    pick = lambda t, v: zeros(v) if type(t) is Zero else t  # noqa: E731
    rhs = None if type(db) is Zero else db
    if not all(type(t) is Zero for t in (ddl, dd, ddu)):
        prod = _tridiagonal_matmul(pick(ddl, dl), pick(dd, d), pick(ddu, du), x)
        rhs = _arith.neg(prod) if rhs is None else _arith.sub(rhs, prod)
    return x, tridiagonal_solve_p.bind(dl, d, du, rhs)


def _transpose(ct, dl, d, du, b):
    if any(is_undefined(v) for v in (dl, d, du)):
        raise ValueError("tridiagonal_solve is linear in b only; it cannot be transposed with "
                         "respect to the diagonals.")
    # Tᵀ has du (moved down one row) below its diagonal and dl (moved up one) above it.
    return [None, None, None, tridiagonal_solve_p.bind(_shift(du, 1), d, _shift(dl, -1), ct)]


abstract_eval_rules[tridiagonal_solve_p] = _abstract
register_lowering(tridiagonal_solve_p, lower_fun(_cpu), platform="cpu")
register_lowering(tridiagonal_solve_p, lower_fun(_tpu), platform="tpu")
jvp_rules[tridiagonal_solve_p] = _jvp
transpose_rules[tridiagonal_solve_p] = _transpose
batched_on_front(tridiagonal_solve_p)


def tridiagonal_solve(dl, d, du, b):
    """``x`` solving ``T @ x = b`` where T has sub-diagonal ``dl`` (dl[..., 0] unused),
    diagonal ``d`` and super-diagonal ``du`` (du[..., -1] unused), each (..., m), and b is
    (..., m, n). A singular system gives NaNs, as JAX."""
    return tridiagonal_solve_p.bind(dl, d, du, b)
