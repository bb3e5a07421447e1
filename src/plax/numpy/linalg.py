"""plax.numpy.linalg: NumPy's linear algebra on plax arrays, built on ``plax.lax.linalg``.

Factorisations come from the LAPACK-backed primitives (lu, cholesky, qr, eigh, svd, eig);
solve, inv, det, slogdet and pinv carry custom JVP rules so their derivatives reuse the
factorisation (and det's stays finite at singular matrices of rank n - 1). Each public
function is compiled once per shape and static argument, as JAX's are.
"""
from __future__ import annotations

import functools
import operator
from typing import NamedTuple

import numpy as np

from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.trace import concrete_or_error
from plax.lax import Precision
from plax.lax import linalg as lax_linalg
from plax.lax.linalg.common import permute_rows
from plax.lax.linalg.geqrf import geqrf
from plax.lax.linalg.lu import lu_solve
from plax.numpy.util import (canonicalize_axis, check_arraylike, promote_dtypes,
                             promote_dtypes_inexact)
from plax.higher_order.custom_derivatives import custom_jvp

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve",
           "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
           "vector_norm"]


class EighResult(NamedTuple):
    eigenvalues: jnp.ndarray
    eigenvectors: jnp.ndarray


class EigResult(NamedTuple):
    eigenvalues: jnp.ndarray
    eigenvectors: jnp.ndarray


class QRResult(NamedTuple):
    Q: jnp.ndarray
    R: jnp.ndarray


class SlogdetResult(NamedTuple):
    sign: jnp.ndarray
    logabsdet: jnp.ndarray


class SVDResult(NamedTuple):
    U: jnp.ndarray
    S: jnp.ndarray
    Vh: jnp.ndarray


# --- helpers --------------------------------------------------------------------------------
def as_inexact_arrays(name, *args):
    """``args`` as arrays of their common inexact dtype (integers become the default float)."""
    check_arraylike(name, *args)
    return [jnp.asarray(a) for a in promote_dtypes_inexact(*args)]


def _square(name: str, a, what: str = "Argument to {name} must have shape [..., n, n]"):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(what.format(name=name) + f", got {a.shape}. Pass a square matrix "
                         "or a batch of square matrices (the last two dimensions equal).")


def matmul_highest(a, b):
    """``a @ b`` at HIGHEST precision."""
    return jnp.matmul(a, b, precision=Precision.HIGHEST)


def _t(x):
    return jnp.swapaxes(x, -1, -2)


def conj_transpose(x):
    """The conjugate transpose of the last two dimensions of ``x``."""
    return jnp.conj(_t(x)) if dtypes.is_complex(x.dtype) else _t(x)


def _eye_like(a):
    n = a.shape[-1]
    return jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), a.shape)


def _real_dtype(dtype):
    return np.dtype(np.finfo(np.dtype(dtype)).dtype)


def _parity_sign(pivots, dtype):
    """The determinant (+1 or -1) of the row swaps ``pivots`` describe."""
    swaps = jnp.count_nonzero(pivots != jnp.arange(pivots.shape[-1], dtype=pivots.dtype),
                              axis=-1)
    return jnp.where(swaps % 2 == 1, -1, 1).astype(dtype)


def _diag(x):
    return jnp.diagonal(x, axis1=-2, axis2=-1)


# --- solve and inv ------------------------------------------------------------------------------
@custom_jvp
def _solve_square(a, b):
    lu, _, perm = lax_linalg.lu(a)
    return lu_solve(lu, perm, b, 0)


@_solve_square.defjvp
def _solve_square_jvp(primals, tangents):
    # a x = b  =>  a dx = db - da x: one LU serves the value and the tangent.
    (a, b), (da, db) = primals, tangents
    lu, _, perm = lax_linalg.lu(a)
    x = lu_solve(lu, perm, b, 0)
    return x, lu_solve(lu, perm, db - matmul_highest(da, x), 0)


def _broadcast_batch(a, b):
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:]))


@jit
def solve(a, b):
    """The solution ``x`` of ``a @ x = b`` for square ``a`` (LU with partial pivoting).

    As NumPy 2: ``b`` is a vector when it is 1-D, otherwise a (batch of) matrices; the
    batch dimensions of ``a`` and ``b`` broadcast. A singular ``a`` gives inf/NaN."""
    a, b = as_inexact_arrays("solve", a, b)
    if a.ndim < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got a.shape="
                         f"{a.shape}. solve needs a square matrix (or a batch of them) as a.")
    n = a.shape[-1]
    if a.shape[-2] != n:
        raise ValueError(f"solve: a must be a (batch of) square matrices, got a.shape={a.shape}"
                         "; inconsistent size for core dimension 'm'.")
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"solve: inconsistent size for core dimension 'm': b has "
                             f"{b.shape[0]} entries but a is {n}x{n} (a.shape={a.shape}, "
                             f"b.shape={b.shape}).")
        a2, b2 = _broadcast_batch(a, b[:, None])
        return _solve_square(a2, b2)[..., 0]
    if a.ndim == b.ndim + 1 and b.shape[-1] == n:
        raise ValueError(f"Invalid shapes for solve: {a.shape}, {b.shape}. b is read as a batch "
                         "of matrices (NumPy 2's rule, followed since JAX v0.5.0), not of "
                         "vectors; for a batched 1-dimensional solve use "
                         "solve(a, b[..., None]).squeeze(-1).")
    if b.shape[-2] != n:
        raise ValueError(f"solve: inconsistent size for core dimension 'm': b has {b.shape[-2]} "
                         f"rows but a is {n}x{n} (a.shape={a.shape}, b.shape={b.shape}).")
    return _solve_square(*_broadcast_batch(a, b))


@jit
def inv(a):
    """The inverse of each square matrix of ``a``; a singular matrix gives inf/NaN."""
    a, = as_inexact_arrays("inv", a)
    _square("inv", a)
    return _solve_square(a, _eye_like(a))


# --- det and slogdet --------------------------------------------------------------------------
def _adjugate_upper(u):
    """The adjugate of each upper-triangular matrix ``u`` (det(u) u⁻¹ where u is invertible),
    exact at every rank.

    Zeros on the diagonal at positions z_0 < ... < z_{m-1} are replaced by ones (u1, with
    inverse w). With u_ε = u + ε Σ e_z e_zᵀ, Woodbury's identity makes adj(u_ε) = det(u_ε)
    u_ε⁻¹ a series in ε whose limit is p κ w[:, z_0] w[z_{m-1}, :], where p is the product
    of the non-zero diagonal entries and κ = Π_l w[z_l, z_{l+1}]; with no zeros it is p w.
    """
    d = _diag(u)
    zero = d == 0
    ones = jnp.ones_like(d)
    u1 = u + _eye_like(u) * jnp.where(zero, ones, jnp.zeros_like(d))[..., None, :]
    w = lax_linalg.triangular_solve(u1, _eye_like(u), left_side=True, lower=False)
    p = jnp.prod(jnp.where(zero, ones, d), axis=-1)
    n = d.shape[-1]
    first = jnp.argmax(zero, axis=-1)
    last = n - 1 - jnp.argmax(zero[..., ::-1], axis=-1)
    col = jnp.take_along_axis(w, jnp.broadcast_to(first[..., None, None], w.shape[:-1] + (1,)),
                              axis=-1)
    row = jnp.take_along_axis(w, jnp.broadcast_to(last[..., None, None],
                                                  w.shape[:-2] + (1, n)), axis=-2)
    count = jnp.cumsum(zero.astype(np.int32), axis=-1)
    consecutive = (zero[..., :, None] & zero[..., None, :]
                   & (count[..., None, :] - count[..., :, None] == 1))
    kappa = jnp.prod(jnp.where(consecutive, w, jnp.ones_like(w)), axis=(-2, -1))
    rank_one = (p * kappa)[..., None, None] * col * row
    return jnp.where(jnp.any(zero, axis=-1)[..., None, None], rank_one, p[..., None, None] * w)


@custom_jvp
def _det(a):
    lu, pivots, _ = lax_linalg.lu(a)
    return _parity_sign(pivots, a.dtype) * jnp.prod(_diag(lu), axis=-1)


@_det.defjvp
def _det_jvp(primals, tangents):
    # d det = tr(adj(a) da). With a[perm] = L U, adj(a) = s adj(U) L⁻¹ P (s the parity), so
    # d det = s tr(adj(U) L⁻¹ (da[perm])): finite wherever a has rank >= n - 1.
    (a,), (da,) = primals, tangents
    lu, pivots, perm = lax_linalg.lu(a)
    sign = _parity_sign(pivots, a.dtype)
    y = lax_linalg.triangular_solve(lu, permute_rows(da, perm), left_side=True, lower=True,
                                    unit_diagonal=True)
    adj_u = _adjugate_upper(jnp.triu(lu))
    return sign * jnp.prod(_diag(lu), axis=-1), sign * jnp.sum(_t(adj_u) * y, axis=(-2, -1))


@jit
def det(a):
    """The determinant of each square matrix of ``a`` (through its LU factorisation). Its
    derivative is the adjugate, so it stays finite at singular matrices of rank n - 1."""
    a, = as_inexact_arrays("det", a)
    _square("det", a, "Argument to _det() must have shape [..., n, n]")
    return _det(a)


def _slogdet_from(sign, diag):
    """(sign, log|det|) from the sign of the orthogonal/permutation factor and the diagonal
    of the triangular one."""
    zero = jnp.any(diag == 0, axis=-1)
    absdiag = jnp.abs(diag)
    if dtypes.is_complex(diag.dtype):
        unit = diag / jnp.where(absdiag == 0, jnp.ones_like(absdiag), absdiag).astype(diag.dtype)
    else:
        unit = jnp.sign(diag)
    sign = sign * jnp.prod(unit, axis=-1)
    logdet = jnp.sum(jnp.log(absdiag), axis=-1)
    return (jnp.where(zero, jnp.zeros_like(sign), sign),
            jnp.where(zero, jnp.full_like(logdet, -np.inf), logdet))


def _householder_det(taus):
    """det(Q) for Q = H_1 ... H_k from geqrf: det(I - τ v vᴴ) = -τ / conj(τ), 1 for τ = 0."""
    zero = taus == 0
    safe = jnp.where(zero, jnp.ones_like(taus), taus)
    each = jnp.where(zero, jnp.ones_like(taus), -safe / jnp.conj(safe))
    return jnp.prod(each, axis=-1)


def _slogdet_qr(a):
    factors, taus = geqrf(a)
    return _slogdet_from(_householder_det(taus), _diag(factors))


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _slogdet(a, method):
    if method == "qr":
        return _slogdet_qr(a)
    lu, pivots, _ = lax_linalg.lu(a)
    return _slogdet_from(_parity_sign(pivots, a.dtype), _diag(lu))


@_slogdet.defjvp
def _slogdet_jvp(method, primals, tangents):
    # d log|det a| = Re tr(a⁻¹ da); the sign of a complex determinant turns by i Im tr(a⁻¹ da).
    (a,), (da,) = primals, tangents
    lu, pivots, perm = lax_linalg.lu(a)
    sign, logdet = (_slogdet_qr(a) if method == "qr" else
                    _slogdet_from(_parity_sign(pivots, a.dtype), _diag(lu)))
    g = jnp.trace(lu_solve(lu, perm, da, 0), axis1=-2, axis2=-1)
    if dtypes.is_complex(a.dtype):
        dsign = sign * (1j * jnp.imag(g)).astype(a.dtype)
    else:
        dsign = jnp.zeros_like(sign)
    return (sign, logdet), (dsign, jnp.real(g))


@functools.partial(jit, static_argnames=("method",))
def slogdet(a, *, method=None):
    """``SlogdetResult(sign, logabsdet)``: the sign (a unit complex number for complex input)
    and the natural log of the absolute value of each determinant, from an LU factorisation
    (``method=None`` or ``'lu'``) or a QR one (``'qr'``). A singular matrix gives sign 0 and
    logabsdet -inf."""
    a, = as_inexact_arrays("slogdet", a)
    _square("slogdet", a, "Argument to slogdet() must have shape [..., n, n]")
    if method is None:
        method = "lu"
    if method not in ("lu", "qr"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         "(`None`), and 'qr'.")
    return SlogdetResult(*_slogdet(a, method))


# --- factorisations --------------------------------------------------------------------------
@functools.partial(jit, static_argnames=("upper", "symmetrize_input"))
def cholesky(a, *, upper=False, symmetrize_input=True):
    """The Cholesky factor of each Hermitian positive-definite matrix of ``a``: lower ``L``
    with ``L @ Lᴴ = a`` (or upper ``U = Lᴴ`` with ``upper``). With ``symmetrize_input`` the
    matrix factorised is (a + aᴴ) / 2. A matrix that is not positive definite gives NaNs."""
    a, = as_inexact_arrays("cholesky", a)
    low = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return conj_transpose(low) if upper else low


@functools.partial(jit, static_argnames=("mode",))
def qr(a, mode="reduced"):
    """The QR factorisation of each matrix of ``a`` (m x n, k = min(m, n)).

    ``mode``: 'reduced' gives ``QRResult(Q, R)`` with Q m x k and R k x n; 'complete' gives
    Q m x m and R m x n; 'r' gives R alone (k x n); 'raw' gives ``QRResult(h, tau)``, LAPACK's
    compact form with ``h`` transposed (n x m), as NumPy's raw mode."""
    a, = as_inexact_arrays("qr", a)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'; use 'reduced', "
                         "'complete', 'r' or 'raw'.")
    if mode == "raw":
        if a.ndim < 2:
            raise TypeError(f"Input 0 to qr must have rank at least 2, but got shape={a.shape}.")
        factors, taus = geqrf(a)
        return QRResult(_t(factors), taus)
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def _hermitian_svd(a, compute_uv):
    """The SVD of Hermitian ``a`` from its eigendecomposition: singular values |w| in
    descending order, u the eigenvectors in that order, vh = (u · sign(w))ᴴ."""
    v, w = lax_linalg.eigh(a)
    s = jnp.abs(w)
    order = jnp.argsort(-s, axis=-1, stable=True)
    s = jnp.take_along_axis(s, order, axis=-1)
    if not compute_uv:
        return s
    w = jnp.take_along_axis(w, order, axis=-1)
    u = jnp.take_along_axis(v, jnp.broadcast_to(order[..., None, :], v.shape), axis=-1)
    signs = jnp.sign(w).astype(a.dtype)
    return SVDResult(u, s, conj_transpose(u * signs[..., None, :]))


@functools.partial(jit, static_argnames=("full_matrices", "compute_uv", "hermitian",
                                         "subset_by_index"))
def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """The singular value decomposition ``a = U @ diag(S) @ Vh`` of each matrix of ``a``:
    ``SVDResult(U, S, Vh)`` (S real, descending), or S alone when not ``compute_uv``.
    ``hermitian`` computes it from the eigendecomposition of a Hermitian ``a``;
    ``subset_by_index=(start, end)`` keeps singular triplets start..end-1."""
    a, = as_inexact_arrays("svd", a)
    if hermitian:
        if subset_by_index is not None:
            raise ValueError("svd: subset_by_index is not supported with hermitian=True; "
                             "compute the full decomposition and slice it.")
        if a.ndim < 2:
            raise TypeError(f"Input 0 to svd must have rank at least 2, but got shape={a.shape}.")
        _square("svd", a, "Argument to svd with hermitian=True must have shape [..., n, n]")
        return _hermitian_svd(a, compute_uv)
    if a.ndim < 2:
        raise TypeError(f"Input 0 to svd must have rank at least 2, but got shape={a.shape}.")
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                         subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x, /):
    """The singular values of each matrix of ``x``, in descending order."""
    return svd(x, compute_uv=False)


def _uplo_lower(uplo) -> bool:
    if uplo is None or uplo == "L":
        return True
    if uplo == "U":
        return False
    raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {uplo}")


@functools.partial(jit, static_argnames=("UPLO", "symmetrize_input"))
def eigh(a, UPLO=None, symmetrize_input=True):
    """``EighResult(eigenvalues, eigenvectors)`` of each Hermitian matrix of ``a``: real
    eigenvalues in ascending order and unit eigenvectors as columns. With
    ``symmetrize_input`` the matrix decomposed is (a + aᴴ) / 2; otherwise only its ``UPLO``
    triangle ('L', the default, or 'U') is read."""
    a, = as_inexact_arrays("eigh", a)
    lower = _uplo_lower(UPLO)
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """The (ascending, real) eigenvalues of each Hermitian matrix of ``a``."""
    return eigh(a, UPLO=UPLO, symmetrize_input=symmetrize_input).eigenvalues


@jit
def eig(a):
    """``EigResult(eigenvalues, eigenvectors)`` of each square matrix of ``a`` (complex,
    eigenvectors as unit columns). The eigenvalues are differentiable, the eigenvectors not
    (as JAX). CPU only."""
    a, = as_inexact_arrays("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


@jit
def eigvals(a):
    """The (complex) eigenvalues of each square matrix of ``a``. CPU only."""
    a, = as_inexact_arrays("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


# --- pinv, lstsq, matrix_rank -------------------------------------------------------------------
def _default_rtol(a):
    return 10.0 * max(a.shape[-2:]) * float(np.finfo(a.dtype).eps)


@functools.partial(custom_jvp, nondiff_argnums=(2,))
def _pinv(a, rtol, hermitian):
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    cutoff = jnp.asarray(rtol, s.dtype)[..., None] * s[..., :1]
    s = jnp.where(s > cutoff, s, jnp.full_like(s, np.inf)).astype(u.dtype)
    return matmul_highest(conj_transpose(vh), conj_transpose(u) / s[..., :, None])


@_pinv.defjvp
def _pinv_jvp(hermitian, primals, tangents):
    # Where the rank is locally constant (p = a⁺):
    #   dp = -p da p + p pᴴ daᴴ (I - a p) + (I - p a) daᴴ pᴴ p.
    a, rtol = primals
    da = tangents[0]
    p = _pinv(a, rtol, hermitian)
    da_h = conj_transpose(da)
    ap, pa = matmul_highest(a, p), matmul_highest(p, a)
    left, right = _eye_like(ap) - ap, _eye_like(pa) - pa
    dp = (-matmul_highest(matmul_highest(p, da), p)
          + matmul_highest(matmul_highest(matmul_highest(p, conj_transpose(p)), da_h), left)
          + matmul_highest(matmul_highest(right, da_h), matmul_highest(conj_transpose(p), p)))
    return p, dp


@functools.partial(jit, static_argnames=("hermitian",))
def _pinv_jit(a, rtol, hermitian):
    return _pinv(a, rtol, hermitian)


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse of each matrix of ``a`` (m x n -> n x m), through the
    SVD: singular values at most ``rtol`` times the largest are treated as zero (default
    ``10 * max(m, n) * eps``). ``rcond`` is the older name of ``rtol``."""
    if rtol is not None and rcond is not None:
        raise ValueError("pinv: only one of rtol and rcond may be specified.")
    if rtol is None:
        rtol = rcond
    a, = as_inexact_arrays("pinv", a)
    if a.ndim < 2:
        raise ValueError(f"pinv: a must be a matrix or a batch of matrices (rank >= 2), got "
                         f"shape {a.shape}.")
    if rtol is None:
        rtol = _default_rtol(a)
    return _pinv_jit(a, rtol, bool(hermitian))


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    """The number of singular values of each matrix of ``M`` above a threshold: ``rtol``
    (``tol`` is its older name; used as given, as JAX does) or by default
    ``max(S) * max(m, n) * eps``. A vector has rank 1 unless it is all zeros."""
    if rtol is not None and tol is not None:
        raise ValueError("matrix_rank: only one of rtol and tol may be specified.")
    if rtol is None:
        rtol = tol
    M, = as_inexact_arrays("matrix_rank", M)
    return _matrix_rank(M, rtol, bool(hermitian))


@functools.partial(jit, static_argnames=("hermitian",))
def _matrix_rank(M, rtol, hermitian):
    if M.ndim < 2:
        return jnp.any(M != 0).astype(np.int32)
    s = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        rtol = jnp.max(s, axis=-1) * max(M.shape[-2:]) * np.finfo(s.dtype).eps
    rtol = jnp.asarray(rtol, s.dtype)
    return jnp.sum(s > rtol[..., None], axis=-1, dtype=np.int32)


@jit
def _lstsq(a, b, rcond):
    m, n = a.shape
    dt = a.dtype
    if rcond is None:
        rcond = float(np.finfo(dt).eps) * max(m, n)
    else:
        rcond = jnp.asarray(rcond, _real_dtype(dt))
        rcond = jnp.where(rcond < 0, np.finfo(dt).eps, rcond)
    u, s, vh = svd(a, full_matrices=False)
    mask = s >= jnp.asarray(rcond, s.dtype) * s[..., :1]
    rank = jnp.sum(mask, dtype=np.int32)
    safe = jnp.where(mask, s, jnp.ones_like(s))
    s_inv = jnp.where(mask, 1 / safe, jnp.zeros_like(s)).astype(dt)[:, None]
    x = matmul_highest(conj_transpose(vh), s_inv * matmul_highest(conj_transpose(u), b))
    resid = jnp.sum(jnp.abs(b - matmul_highest(a, x)) ** 2, axis=0)
    return x, resid, rank, s


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """The least-squares solution of ``a @ x = b`` (a 2-D, b 1-D or 2-D), through the SVD:
    returns ``(x, resid, rank, s)``. Singular values below ``rcond`` times the largest are
    dropped (default ``eps * max(m, n)``), giving the minimum-norm solution. ``resid`` holds
    the squared residual norms; with ``numpy_resid`` it is empty (as NumPy's) unless the
    rank is n and m > n, which needs a concrete rank (not under jit)."""
    a, b = as_inexact_arrays("lstsq", a, b)
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional; "
                        f"lstsq takes a single matrix a, got shape {a.shape}.")
    if b.ndim not in (1, 2):
        raise ValueError(f"lstsq: b must be 1- or 2-dimensional, got shape {b.shape}; "
                         "Leading dimensions of input arrays must match")
    if b.shape[0] != a.shape[0]:
        raise ValueError(f"Leading dimensions of input arrays must match: a.shape={a.shape}, "
                         f"b.shape={b.shape}.")
    vector = b.ndim == 1
    x, resid, rank, s = _lstsq(a, b[:, None] if vector else b, rcond)
    if vector:
        x = x[:, 0]
    if numpy_resid:
        m, n = a.shape
        r = concrete_or_error(int, rank, "lstsq(..., numpy_resid=True) needs the rank of a "
                              "as a concrete value; pass numpy_resid=False under jit.")
        if not (r == n and m > n):
            resid = jnp.zeros((0,), resid.dtype)
    return x, resid, rank, s


# --- norms ------------------------------------------------------------------------------------
def _vector_norm(x, ord, axis, keepdims):
    """The vector ``ord``-norm of ``x`` over the single axis ``axis``."""
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm; use a number, inf or -inf "
                         "(or pass two axes for a matrix norm).")
    if ord == np.inf:
        return jnp.max(jnp.abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return jnp.min(jnp.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, dtype=_real_dtype(x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims)
    p = jnp.asarray(ord, _real_dtype(x.dtype))
    return jnp.sum(jnp.abs(x) ** p, axis=axis, keepdims=keepdims) ** (1 / p)


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord == "fro":
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axes, keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        inner, outer = (row, col) if ord in (1, -1) else (col, row)
        if not keepdims and outer > inner:
            outer -= 1
        reduce = jnp.max if ord in (1, np.inf) else jnp.min
        return reduce(jnp.sum(jnp.abs(x), axis=inner, keepdims=keepdims), axis=outer,
                      keepdims=keepdims)
    if ord in (2, -2, "nuc"):
        y = jnp.moveaxis(x, (row, col), (-2, -1))
        s = svd(y, compute_uv=False)
        out = (jnp.max(s, axis=-1) if ord == 2 else jnp.min(s, axis=-1) if ord == -2
               else jnp.sum(s, axis=-1))
        return jnp.expand_dims(out, axes) if keepdims else out
    raise ValueError(f"Invalid order '{ord}' for matrix norm; use None, 'fro', 'nuc', 1, -1, "
                     "2, -2, inf or -inf.")


def _norm_axes(axis, ndim):
    if isinstance(axis, (tuple, list)):
        return tuple(canonicalize_axis(operator.index(i), ndim) for i in axis)
    return (canonicalize_axis(operator.index(axis), ndim),)


@functools.partial(jit, static_argnames=("ord", "axis", "keepdims"))
def _norm(x, ord, axis, keepdims):
    if axis is None:
        if ord is None:
            out = jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x))))
            return jnp.reshape(out, (1,) * x.ndim) if keepdims else out
        axis = tuple(range(x.ndim))
    axes = _norm_axes(axis, x.ndim)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(f"Improper number of axes for norm: axis={axis}. Pass one axis to compute "
                     "a vector-norm, or two axes to compute a matrix-norm.")


def _static_ord(ord):
    return float(ord) if isinstance(ord, (np.floating, np.integer)) else ord


def norm(x, ord=None, axis=None, keepdims=False):
    """The vector or matrix norm of ``x``, as ``numpy.linalg.norm``: over ``axis`` (one axis:
    a vector norm; two: a matrix norm; None: the whole array, a vector norm for 1-D ``x``,
    a matrix norm for 2-D, the flattened 2-norm otherwise when ``ord`` is None). Vector
    ords: any number, inf, -inf, 0. Matrix ords: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf."""
    x, = as_inexact_arrays("norm", x)
    if isinstance(axis, list):
        axis = tuple(axis)
    return _norm(x, _static_ord(ord), axis, bool(keepdims))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector ``ord``-norm of ``x`` over ``axis`` (several axes count as one flattened
    vector; None: the whole array)."""
    x, = as_inexact_arrays("vector_norm", x)
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm; use a number, inf or -inf.")
    if axis is None:
        out = norm(jnp.ravel(x), ord=ord)
        return jnp.reshape(out, (1,) * x.ndim) if keepdims else out
    axes = _norm_axes(axis, x.ndim)
    if len(axes) == 1:
        return norm(x, ord=ord, axis=axes, keepdims=keepdims)
    rest = [i for i in range(x.ndim) if i not in axes]
    y = jnp.reshape(jnp.transpose(x, rest + list(axes)), [x.shape[i] for i in rest] + [-1])
    out = norm(y, ord=ord, axis=-1)
    return jnp.expand_dims(out, axes) if keepdims else out


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix ``ord``-norm of each matrix (the last two axes) of ``x``."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


@functools.partial(jit, static_argnames=("p",))
def _cond(x, p):
    if p is None or p == 2:
        s = svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svd(x, compute_uv=False)
        r = s[..., -1] / s[..., 0]
    else:
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    # A singular matrix has condition number inf (NaN only when x itself holds NaN).
    has_nan = jnp.any(jnp.isnan(x), axis=(-2, -1))
    return jnp.where(jnp.isnan(r) & ~has_nan, jnp.full_like(r, np.inf), r)


def cond(x, p=None):
    """The condition number of each matrix of ``x`` in the norm ``p`` (None or 2: the ratio
    of the extreme singular values; other ords need square matrices)."""
    x, = as_inexact_arrays("cond", x)
    if x.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got arr.shape="
                         f"{x.shape}")
    p = _static_ord(p)
    if p not in (None, 2, -2) and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"jnp.linalg.cond: for p={p}, array must be square; got arr.shape="
                         f"{x.shape}")
    return _cond(x, p)


# --- powers and tensor inverses ------------------------------------------------------------------
def matrix_power(a, n):
    """``a`` (a square matrix or a batch of them) raised to the integer power ``n`` by repeated
    squaring; negative powers invert first, n = 0 gives the identity."""
    check_arraylike("matrix_power", a)
    a = jnp.asarray(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise TypeError(f"Last 2 dimensions of the array must be square, got shape {a.shape} "
                        "for matrix_power.")
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError(f"exponent must be an integer, got {n}") from e
    return _matrix_power(a, n)


@functools.partial(jit, static_argnames=("n",))
def _matrix_power(a, n):
    if n == 0:
        return _eye_like(a)
    if n < 0:
        a, n = inv(a), -n
    result = None
    square = a
    while n:
        if n & 1:
            result = square if result is None else matmul_highest(result, square)
        n >>= 1
        if n:
            square = matmul_highest(square, square)
    return result


def tensorinv(a, ind=2):
    """The inverse of ``a`` seen as a linear map from its first ``ind`` axes' space to the
    rest: ``tensordot(tensorinv(a, ind), a, ind)`` is the identity."""
    a, = as_inexact_arrays("tensorinv", a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind}")
    head, tail = a.shape[:ind], a.shape[ind:]
    rows, cols = int(np.prod(head)), int(np.prod(tail))
    if rows != cols:
        raise ValueError("tensorinv is only possible when the product of the first `ind` "
                         f"dimensions equals that of the remaining dimensions. got arr.shape="
                         f"{a.shape} with ind={ind}.")
    return jnp.reshape(inv(jnp.reshape(a, (rows, cols))), tail + head)


def tensorsolve(a, b, axes=None):
    """The ``x`` with ``tensordot(a, x, x.ndim) == b``; ``axes`` of ``a`` are first moved to
    the end (those are the axes x spans)."""
    a, b = as_inexact_arrays("tensorsolve", a, b)
    if axes is not None:
        order = [i for i in range(a.ndim) if i not in _norm_axes(axes, a.ndim)]
        a = jnp.transpose(a, order + list(_norm_axes(axes, a.ndim)))
    if a.shape[:b.ndim] != b.shape:
        raise ValueError("After moving axes to end, leading shape of a must match shape of b. "
                         f"got a.shape={a.shape}, b.shape={b.shape}")
    out_shape = a.shape[b.ndim:]
    rows, cols = int(np.prod(b.shape)), int(np.prod(out_shape))
    if rows != cols:
        raise ValueError("Input arrays must have prod(a.shape[:b.ndim]) == "
                         f"prod(a.shape[b.ndim:]); got a.shape={a.shape}, b.ndim={b.ndim}.")
    x = solve(jnp.reshape(a, (rows, cols)), jnp.ravel(b))
    return jnp.reshape(x, out_shape)


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices, contracted in the cheapest order; the first and
    last may be vectors."""
    arrays = [jnp.asarray(a) for a in arrays]
    if len(arrays) == 1:
        return arrays[0]
    if len(arrays) < 1 or any(a.ndim != 2 for a in arrays[1:-1]) or \
            arrays[0].ndim not in (1, 2) or arrays[-1].ndim not in (1, 2):
        raise ValueError("multi_dot: input arrays must all be two-dimensional, except for the "
                         "first and last array which may be 1 or 2 dimensional. Got array "
                         f"shapes {[a.shape for a in arrays]}")
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    # Array i spans indices i and i + 1 of the chain; a leading (trailing) vector only the
    # second (first) of its pair.
    terms = [letters[i:i + 2] for i in range(len(arrays))]
    if arrays[0].ndim == 1:
        terms[0] = terms[0][1]
    if arrays[-1].ndim == 1:
        terms[-1] = terms[-1][0]
    out = (letters[0] if arrays[0].ndim == 2 else "") + \
        (letters[len(arrays)] if arrays[-1].ndim == 2 else "")
    return jnp.einsum(",".join(terms) + "->" + out, *arrays, optimize="auto",
                      precision=precision)


# --- Array API names built on jnp's functions ---------------------------------------------------
def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """The matrix product of ``x1`` and ``x2`` (as ``jnp.matmul``)."""
    return jnp.matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def matrix_transpose(x, /):
    """``x`` with its last two axes swapped."""
    return jnp.matrix_transpose(x)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """The conjugate-linear dot product of vectors along ``axis`` (as ``jnp.vecdot``)."""
    return jnp.vecdot(x1, x2, axis=axis, precision=precision,
                      preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None,
              out_sharding=None):
    """The tensor contraction of ``x1`` and ``x2`` over ``axes`` (as ``jnp.tensordot``)."""
    return jnp.tensordot(x1, x2, axes, precision=precision,
                         preferred_element_type=preferred_element_type,
                         out_sharding=out_sharding)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the ``offset`` diagonal of each matrix (the last two axes) of ``x``."""
    check_arraylike("trace", x)
    x = jnp.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"axis -2 is out of bounds for array of dimension {x.ndim}: trace "
                         "needs a matrix or a batch of matrices.")
    return jnp.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset=0):
    """The ``offset`` diagonal of each matrix (the last two axes) of ``x``."""
    return jnp.diagonal(x, offset, axis1=-2, axis2=-1)


def outer(x1, x2, /):
    """The outer product of two vectors."""
    check_arraylike("outer", x1, x2)
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={x1.ndim} "
                         f"x2.ndim={x2.ndim}")
    return jnp.outer(x1, x2)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along ``axis`` (batch axes broadcast)."""
    check_arraylike("cross", x1, x2)
    x1, x2 = (jnp.asarray(v) for v in promote_dtypes(x1, x2))
    d1 = x1.shape[canonicalize_axis(axis, x1.ndim)] if x1.ndim else 0
    d2 = x2.shape[canonicalize_axis(axis, x2.ndim)] if x2.ndim else 0
    if d1 != 3 or d2 != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they "
                         f"have x1.shape[axis]={d1} and x2.shape[axis]={d2}")
    return jnp.cross(x1, x2, axis=axis)
