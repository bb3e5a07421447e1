"""svd on TPUs, as JAX lowers it there: the QDWH-based SVD (Nakatsukasa and Higham, SIAM J.
Sci. Comput. 35(3), 2013). The polar decomposition a = u_p h (``qdwh``) and the
eigendecomposition h = v diag(s) vᴴ (``eigh``, on TPUs the Jacobi call or the divide and
conquer) give a = (u_p v) diag(s) vᴴ. A wide matrix is decomposed through its adjoint; a
tall one is first reduced by QR (always for full matrices, whose u then carries Q's extra
columns; for the economic SVD when m > 1.15 n).

``svd_qdwh`` is that algorithm on plax ops, so it runs on any platform (its eigh is the
platform's); the TPU lowering of ``svd_p`` is it, vectorized over the batch dimensions.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.rules import register_lowering
from plax.core.trace import get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import bitwise as _bitwise
from plax.first_order import comparison as _cmp
from plax.first_order import reductions as _reductions
from plax.first_order import shapes as _shapes
from plax.first_order import slicing as _slicing
from plax.first_order.sort import sort_key_val
from plax.higher_order.cond import cond
from plax.lax.linalg.common import (adjoint, diagonal, diagonal_matrix, matmul, over_batch,
                                    subset_bounds, take)
from plax.lax.linalg.eigh import eigh
from plax.lax.linalg.qdwh import qdwh
from plax.lax.linalg.qr import qr
from plax.lax.linalg.svd import SvdAlgorithm, empty_svd, svd_p
from plax.lowering.inline import lower_fun

__all__ = ["svd_qdwh"]

_QR_FIRST_ABOVE = 1.15  # m / n beyond which QR first pays off (Nakatsukasa's choice)


def _descending_order(s):
    """Stable descending order of ``s``: equal values keep their order."""
    n = get_aval(s).shape[0]
    rev = _shapes.rev(s, (0,))
    idx = _shapes.rev(_shapes.iota(np.int32, n), (0,))
    return _shapes.rev(sort_key_val(rev, idx, 0, True)[1], (0,))


def _signs_of_diagonal(r):
    """+1 where r's diagonal entry is >= 0, else -1 (complex entries compared as JAX
    compares them: by the real part, or by the imaginary part where that is 0)."""
    dtype = get_aval(r).dtype
    d = diagonal(r)
    if dtypes.is_complex(dtype):
        re, im = _arith.real(d), _arith.imag(d)
        zero = np.zeros((), get_aval(re).dtype)
        ok = _cmp.select(_cmp.eq(re, zero), _cmp.ge(im, zero), _cmp.ge(re, zero))
    else:
        ok = _cmp.ge(d, np.zeros((), dtype))
    shape = get_aval(d).shape
    return _cmp.select(ok, _shapes.full(shape, 1, dtype), _shapes.full(shape, -1, dtype))


def _tall_svd(a, compute_uv: bool, hermitian: bool, max_iterations: int, subset):
    """``s`` or ``(u, s, v)`` of an m x n matrix with m >= n: s descending, a = u diag(s) vᴴ."""
    u_p, h, _, _ = qdwh(a, is_hermitian=hermitian, max_iterations=max_iterations)
    v, s = eigh(h, subset_by_index=subset, sort_eigenvalues=False)
    s = _arith.max(s, np.zeros((), get_aval(s).dtype))  # eigh may give tiny negatives
    order = _descending_order(s)
    s = take(s, order, 0)
    if not compute_uv:
        return s
    v = take(v, order, 1)
    u = matmul(u_p, v)
    k = get_aval(s).shape[0]
    if k == 0:
        return u, s, v
    # A (numerically) rank-deficient a leaves u_p v short of orthonormal: re-orthonormalize
    # it by QR, keeping each column's direction (Nakatsukasa and Higham, section 5.5).
    eps = float(np.finfo(get_aval(a).dtype).eps)
    smallest = _slicing.index_in_dim(s, k - 1, 0, False)
    largest = _slicing.index_in_dim(s, 0, 0, False)
    rdt = get_aval(s).dtype
    deficient = _cmp.le(smallest, _arith.mul(np.asarray(get_aval(a).shape[1] * eps, rdt),
                                             largest))

    def reorthonormalize(u):
        q, r = qr(u, full_matrices=False)
        return matmul(q, diagonal_matrix(_signs_of_diagonal(r)))

    u = cond(deficient, reorthonormalize, lambda u: u, u)
    return u, s, v


def svd_qdwh(a, *, full_matrices: bool, compute_uv: bool = True, subset_by_index=None,
             hermitian: bool = False, max_iterations: int = 10):
    """The SVD of one m x n matrix ``a`` by QDWH: ``(u, s, vh)`` (``s`` alone without
    ``compute_uv``), ``s`` descending, as ``svd`` returns them. ``subset_by_index`` keeps
    singular triplets start..end-1 (not with ``full_matrices`` unless it is all of them);
    ``max_iterations`` bounds the QDWH steps. Non-finite input gives NaN factors."""
    m, n = get_aval(a).shape
    subset = None
    if subset_by_index is not None:
        start, end = subset_bounds("svd", subset_by_index, min(m, n))
        # Singular values count from the largest, eigenvalues from the smallest.
        subset = (min(m, n) - end, min(m, n) - start)
    flip = m < n
    if flip:
        a, (m, n) = adjoint(a), (n, m)
    q = null = None
    if full_matrices and m > n:
        q_full, r_full = qr(a, full_matrices=True)
        q = _slicing.slice_in_dim(q_full, 0, n, axis=1)
        null = _slicing.slice_in_dim(q_full, n, m, axis=1)
        a = _slicing.slice_in_dim(r_full, 0, n, axis=0)
    elif m > _QR_FIRST_ABOVE * n:
        q, a = qr(a, full_matrices=False)
    if not compute_uv:
        return _tall_svd(a, False, hermitian, max_iterations, subset)
    u, s, v = _tall_svd(a, True, hermitian, max_iterations, subset)
    if q is not None:
        u = matmul(q, u)
    if null is not None:
        u = _shapes.concatenate([u, null], 1)
    # As JAX: a non-finite (reduced) matrix makes every factor NaN (values alone are left).
    if dtypes.is_complex(get_aval(a).dtype):
        entries = _bitwise.bitwise_and(_cmp.is_finite(_arith.real(a)),
                                       _cmp.is_finite(_arith.imag(a)))
    else:
        entries = _cmp.is_finite(a)
    finite = _reductions.reduce_and(entries, (0, 1))
    u, s, v = (_cmp.select(_shapes.broadcast_in_dim(finite, get_aval(t).shape, ()), t,
                           _shapes.full(get_aval(t).shape, np.nan, get_aval(t).dtype))
               for t in (u, s, v))
    if flip:
        return v, s, adjoint(u)
    return u, s, adjoint(v)


def _svd_tpu(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    if algorithm not in (None, SvdAlgorithm.DEFAULT, SvdAlgorithm.POLAR):
        raise NotImplementedError("Only the POLAR (which is also DEFAULT on TPU) SVD algorithm "
                                  f"is supported on TPU; got {algorithm}.")
    aval = get_aval(x)
    if 0 in aval.shape:
        return empty_svd(aval, full_matrices, compute_uv, subset_by_index)

    def one(a):
        out = svd_qdwh(a, full_matrices=full_matrices, compute_uv=compute_uv,
                       subset_by_index=subset_by_index)
        if not compute_uv:
            return [out]
        u, s, vh = out
        return [s, u, vh]

    return over_batch(one, aval.ndim - 2)(x)


register_lowering(svd_p, lower_fun(_svd_tpu, multiple_results=True), platform="tpu")
