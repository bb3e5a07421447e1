"""QR with column pivoting (LAPACK geqp3): x[..., p] = q @ r, |diag(r)| non-increasing."""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import Zero, abstract_eval_rules, jvp_rules, register_lowering, tangent_aval
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import shapes as _shapes
from plax.lax.linalg import lapack
from plax.lax.linalg.common import batched_on_front, check_matrix, eye_like, take_along, triangle
from plax.lax.linalg.qr import orgqr_routine, qr_jvp, qr_shapes, resize_matrix
from plax.lowering.inline import lower_fun

__all__ = ["pivoted_qr", "pivoted_qr_p"]

pivoted_qr_p = Primitive("qr_pivoted", multiple_results=True)


def _abstract(x, *, full_matrices):
    check_matrix("qr", x)
    q, r = qr_shapes(x.shape, full_matrices)
    return [ShapedArray(q, x.dtype), ShapedArray(r, x.dtype),
            ShapedArray(x.shape[:-2] + (x.shape[-1],), np.int32)]


def _cpu(x, *, full_matrices):
    aval = get_aval(x)
    batch, (m, n) = aval.shape[:-2], aval.shape[-2:]
    q_shape, r_shape = qr_shapes(aval.shape, full_matrices)
    columns = _shapes.broadcasted_iota(np.int32, batch + (n,), len(batch))
    if 0 in aval.shape:
        return [eye_like(ShapedArray(q_shape, aval.dtype)), _shapes.full(r_shape, 0, aval.dtype),
                columns]
    free = _shapes.full(batch + (n,), 0, np.int32)  # 0: every column may be pivoted
    factors, jpvt, taus = lapack.call(
        "geqp3", [x, free], [(aval.shape, aval.dtype, True), (batch + (n,), np.int32, False),
                             (batch + (min(m, n),), aval.dtype, False)],
        matrix_operands=(True, False), aliases=((0, 0), (1, 1)))
    r = triangle(resize_matrix(factors, rows=r_shape[-2]), lower=False)
    q = lapack.call(orgqr_routine(aval.dtype), [resize_matrix(factors, cols=q_shape[-1]), taus],
                    [(q_shape, aval.dtype, True)], matrix_operands=(True, False),
                    aliases=((0, 0),))[0]
    return [q, r, _arith.sub(jpvt, np.int32(1))]  # LAPACK counts columns from 1


def _jvp(primals, tangents, *, full_matrices):
    (x,), (dx,) = primals, tangents
    q, r, p = pivoted_qr_p.bind(x, full_matrices=full_matrices)
    p_tangent = Zero(tangent_aval(get_aval(p)))
    if type(dx) is Zero:
        return [q, r, p], [Zero(tangent_aval(get_aval(q))), Zero(tangent_aval(get_aval(r))),
                           p_tangent]
    # Locally the pivots are fixed: x[..., p] = q r is an ordinary QR of the permuted columns.
    nb = get_aval(x).ndim - 2
    index = _shapes.broadcast_in_dim(p, get_aval(x).shape, tuple(range(nb)) + (nb + 1,))
    permuted = take_along(x, index, axis=nb + 1)
    d_permuted = take_along(dx, index, axis=nb + 1)
    _, (dq, dr) = qr_jvp([permuted], [d_permuted], full_matrices=full_matrices)
    return [q, r, p], [dq, dr, p_tangent]


abstract_eval_rules[pivoted_qr_p] = _abstract
register_lowering(pivoted_qr_p, lower_fun(_cpu, multiple_results=True), platform="cpu")
jvp_rules[pivoted_qr_p] = _jvp
batched_on_front(pivoted_qr_p)


def pivoted_qr(x, *, full_matrices: bool = True):
    """``(q, r, p)`` with ``x[..., p] = q @ r`` (see ``qr(..., pivoting=True)``)."""
    return tuple(pivoted_qr_p.bind(x, full_matrices=full_matrices))
