"""qr: QR factorisations (Householder, LAPACK geqrf), and householder_product (orgqr)."""
from __future__ import annotations

from functools import partial

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import Zero, abstract_eval_rules, jvp_rules, register_lowering, tangent_aval
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.conversion import convert_element_type
from plax.lax.linalg import lapack
from plax.lax.linalg.geqrf import householder_factors
from plax.lax.linalg.common import (adjoint, batched_on_front, check_matrix, eye_like, matmul,
                                    triangle)
from plax.lax.linalg.lu import solve
from plax.lax.linalg.triangular import triangular_solve_p
from plax.lowering.inline import lower_fun

__all__ = ["qr", "qr_p", "householder_product", "householder_product_p"]


def orgqr_routine(dtype) -> str:
    """The LAPACK routine that forms Q from Householder reflectors (ungqr for complex)."""
    return "ungqr" if dtypes.is_complex(dtype) else "orgqr"


def resize_matrix(x, rows=None, cols=None):
    """``x`` with its last two dimensions cut (or zero-padded) to ``rows`` x ``cols``."""
    aval = get_aval(x)
    nb = aval.ndim - 2
    m, n = aval.shape[-2:]
    rows, cols = m if rows is None else rows, n if cols is None else cols
    if (rows, cols) == (m, n):
        return x
    config = [(0, 0, 0)] * nb + [(0, rows - m, 0), (0, cols - n, 0)]
    return _shapes.pad(x, np.zeros((), aval.dtype), config)


# --- householder_product --------------------------------------------------------------------
householder_product_p = Primitive("householder_product")


def _hp_abstract(a, taus):
    check_matrix("householder_product", a, arg="a")
    m, n = a.shape[-2:]
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > n or n > m:
        raise ValueError(f"householder_product: a {a.shape} (m >= n) needs taus of shape "
                         f"{a.shape[:-2] + ('k',)} with k <= {n}, got taus {taus.shape}.")
    if taus.dtype != a.dtype:
        raise TypeError(f"householder_product: a and taus must share a dtype, got {a.dtype} "
                        f"and {taus.dtype}.")
    return ShapedArray(a.shape, a.dtype)


def reflectors_product(a, taus, platform: str):
    """orgqr/ungqr on ``platform`` ("cpu": LAPACK; "cuda": cuSOLVER; "tpu": XLA): Q's
    columns from the reflectors of ``a`` and their scales."""
    aval = get_aval(a)
    if 0 in aval.shape:
        return eye_like(aval) if aval.size else a
    args = ([a, taus], [(aval.shape, aval.dtype, True)])
    if platform == "tpu":  # XLA's, expanded by its TPU compiler
        return lapack.call_target("ProductOfElementaryHouseholderReflectors", *args)[0]
    if platform == "cuda":
        return lapack.call_target("cusolver_orgqr_ffi", *args, matrix_operands=(True, False),
                                  aliases=((0, 0),))[0]
    return lapack.call(orgqr_routine(aval.dtype), *args, matrix_operands=(True, False),
                       aliases=((0, 0),))[0]


def _hp_jvp(primals, tangents):
    raise NotImplementedError("householder_product is not differentiable (as in JAX); "
                              "differentiate qr instead.")


abstract_eval_rules[householder_product_p] = _hp_abstract
register_lowering(householder_product_p,
                  lower_fun(partial(reflectors_product, platform="cpu")), platform="cpu")
register_lowering(householder_product_p,
                  lower_fun(partial(reflectors_product, platform="cuda")), platform="cuda")
register_lowering(householder_product_p,
                  lower_fun(partial(reflectors_product, platform="tpu")), platform="tpu")
jvp_rules[householder_product_p] = _hp_jvp
batched_on_front(householder_product_p)


def householder_product(a, taus):
    """The product of the Householder reflectors stored below the diagonal of ``a`` (m x n,
    m >= n) with scales ``taus``: the first n columns of Q (LAPACK orgqr/ungqr)."""
    return householder_product_p.bind(a, taus)


# --- qr ---------------------------------------------------------------------------------
qr_p = Primitive("qr", multiple_results=True)


def qr_shapes(shape, full_matrices):
    """The shapes of Q and R for an operand of ``shape``."""
    batch, (m, n) = shape[:-2], shape[-2:]
    k = m if full_matrices else min(m, n)
    return batch + (m, k), batch + (k, n)


def _qr_abstract(x, *, full_matrices):
    if x.ndim < 2:
        raise TypeError(f"Input 0 to qr must have rank at least 2, but got shape={x.shape}; "
                        "pass a matrix or a batch of matrices.")
    check_matrix("qr", x)
    q, r = qr_shapes(x.shape, full_matrices)
    return [ShapedArray(q, x.dtype), ShapedArray(r, x.dtype)]


def _qr(x, *, full_matrices, platform):
    aval = get_aval(x)
    q_shape, r_shape = qr_shapes(aval.shape, full_matrices)
    if 0 in aval.shape:
        q = eye_like(ShapedArray(q_shape, aval.dtype))
        return [q, _shapes.full(r_shape, 0, aval.dtype)]
    factors, taus = householder_factors(x, platform)
    r = triangle(resize_matrix(factors, rows=r_shape[-2]), lower=False)
    # orgqr builds c <= m columns from the reflectors: pad (n < c) or cut (n > c) to c.
    reflectors = resize_matrix(factors, cols=q_shape[-1])
    return [reflectors_product(reflectors, taus, platform), r]


def _economic_jvp(q, r, dx):
    """(dq, dr) for x = q r with q m x n, r n x n (m >= n), r invertible."""
    dx_rinv = triangular_solve_p.bind(r, dx, left_side=False, lower=False, transpose_a=False,
                                      conjugate_a=False, unit_diagonal=False)
    c = matmul(adjoint(q), dx_rinv)  # qᴴ dx r⁻¹ = qᴴ dq + dr r⁻¹ (the latter upper)
    low = triangle(c, lower=True, k=-1)
    omega = _arith.sub(low, adjoint(low))  # qᴴ dq: skew-Hermitian, lower part from c
    if dtypes.is_complex(get_aval(c).dtype):  # its diagonal: the imaginary part of c's
        imag_diag = _arith.sub(c, convert_element_type(_arith.real(c), get_aval(c).dtype))
        omega = _arith.add(omega, _arith.mul(eye_like(get_aval(c)), imag_diag))
    dq = _arith.add(matmul(q, _arith.sub(omega, c)), dx_rinv)
    dr = matmul(_arith.sub(c, omega), r)
    return dq, dr


def _full_q_jvp(q1, dq1, m, n, nb):
    """The tangent of the full Q (m x m, m > n) that LAPACK builds from n reflectors.

    With Q = I - V T Vᴴ (V unit lower trapezoidal), its first n columns q1 = [q_nn; q_pn]
    fix the rest: q2 = [0; I] + (q1 - [I; 0]) Zᴴ where Z = q_pn (q_nn - I)⁻¹. So
    dq2 = dq1 Zᴴ + (q1 - [I; 0]) dZᴴ with dZ = (dq_pn - Z dq_nn)(q_nn - I)⁻¹.
    """
    top = lambda x: _slicing.slice_in_dim(x, 0, n, axis=nb)  # noqa: E731
    bottom = lambda x: _slicing.slice_in_dim(x, n, m, axis=nb)  # noqa: E731
    a = _arith.sub(top(q1), eye_like(get_aval(top(q1))))
    z_h = solve(adjoint(a), adjoint(bottom(q1)))  # Zᴴ = (q_nn - I)⁻ᴴ q_pnᴴ
    dy = _arith.sub(bottom(dq1), matmul(adjoint(z_h), top(dq1)))
    dz_h = solve(adjoint(a), adjoint(dy))
    shifted = _arith.sub(q1, resize_matrix(eye_like(get_aval(a)), rows=m))
    dq2 = _arith.add(matmul(dq1, z_h), matmul(shifted, dz_h))
    return _shapes.concatenate([dq1, dq2], nb + 1)


def qr_jvp(primals, tangents, *, full_matrices):
    """qr's JVP rule (the pivoted QR's builds on it)."""
    (x,), (dx,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    if type(dx) is Zero:
        return [q, r], [Zero(tangent_aval(get_aval(q))), Zero(tangent_aval(get_aval(r)))]
    m, n = get_aval(x).shape[-2:]
    nb = get_aval(x).ndim - 2
    if m >= n:
        q1, r1 = resize_matrix(q, cols=n), resize_matrix(r, rows=n)
        dq1, dr1 = _economic_jvp(q1, r1, dx)
        if q1 is q:
            return [q, r], [dq1, resize_matrix(dr1, rows=get_aval(r).shape[-2])]
        return [q, r], [_full_q_jvp(q1, dq1, m, n, nb), resize_matrix(dr1, rows=m)]
    # Wide: x = [x1 x2] with x1 square; q r1 = x1, r2 = qᴴ x2.
    r1 = _slicing.slice_in_dim(r, 0, m, axis=nb + 1)
    x2 = _slicing.slice_in_dim(x, m, n, axis=nb + 1)
    dx1 = _slicing.slice_in_dim(dx, 0, m, axis=nb + 1)
    dx2 = _slicing.slice_in_dim(dx, m, n, axis=nb + 1)
    dq, dr1 = _economic_jvp(q, r1, dx1)
    dr2 = _arith.add(matmul(adjoint(dq), x2), matmul(adjoint(q), dx2))
    return [q, r], [dq, _shapes.concatenate([dr1, dr2], nb + 1)]


abstract_eval_rules[qr_p] = _qr_abstract
register_lowering(qr_p, lower_fun(partial(_qr, platform="cpu"), multiple_results=True),
                  platform="cpu")
register_lowering(qr_p, lower_fun(partial(_qr, platform="cuda"), multiple_results=True),
                  platform="cuda")
register_lowering(qr_p, lower_fun(partial(_qr, platform="tpu"), multiple_results=True),
                  platform="tpu")
jvp_rules[qr_p] = qr_jvp
batched_on_front(qr_p)


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """The QR factorisation of each matrix of ``x`` (m x n): ``(q, r)`` with q unitary
    (m x m when ``full_matrices``, else m x min(m, n)) and r upper triangular. With
    ``pivoting`` (column pivoting, LAPACK geqp3) also the column permutation ``p`` such
    that ``x[..., p] = q @ r``."""
    del use_magma  # a GPU option; the CPU kernels have no such choice
    if pivoting:
        from plax.lax.linalg.qr_pivoted import pivoted_qr
        return pivoted_qr(x, full_matrices=bool(full_matrices))
    q, r = qr_p.bind(x, full_matrices=bool(full_matrices))
    return q, r
