"""plax.scipy.linalg: scipy.linalg on plax arrays, as ``jax.scipy.linalg``.

Built on ``plax.lax.linalg`` and ``plax.numpy.linalg``. The SciPy arguments that only
concern memory or input checking (``overwrite_a``, ``overwrite_b``, ``check_finite``,
``lwork``, ``debug``) are accepted and have no effect: plax arrays are immutable and
never checked for finiteness (NaNs propagate, as in JAX). Every function takes batches
of matrices (leading dimensions), except ``block_diag``.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.api.autodiff import jvp
from plax.higher_order.custom_derivatives import custom_jvp
from plax.lax import linalg as lax_linalg
from plax.numpy import linalg as jnp_linalg
from plax.lax.linalg.lu import lu_solve as _lu_solve
from plax.numpy.linalg import as_inexact_arrays, conj_transpose, matmul_highest
from plax.numpy.util import check_arraylike, promote_dtypes
from plax.scipy.linalg_matrices import (circulant, companion, convolution_matrix,
                                        dft, fiedler, fiedler_companion, hadamard, hankel,
                                        helmert, hilbert, invhilbert, invpascal, leslie,
                                        pascal, toeplitz)
from plax.scipy.linalg_schur import (funm, hessenberg, rsf2csf, schur,
                                     solve_sylvester, sqrtm)

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion",
           "convolution_matrix", "det", "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet",
           "fiedler", "fiedler_companion", "funm", "hadamard", "hankel", "helmert", "hessenberg",
           "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu", "lu_factor", "lu_solve",
           "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve", "solve_sylvester",
           "solve_triangular", "sqrtm", "svd", "toeplitz"]


def _check_square(name, a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"The input to {name} must be a square matrix (or a batch of them), "
                         f"got shape {a.shape}; its last two dimensions must be equal.")


def _as_matrices(name, a, b):
    """``b`` as (a batch of) matrices against ``a`` (..., n, n): vectors when it has one
    dimension fewer than ``a`` and n entries last (as JAX decides); both broadcast to one
    batch shape. Returns (a, b, vector)."""
    n = a.shape[-1]
    vector = b.ndim == a.ndim - 1 and b.shape[-1] == n
    if vector:
        b = b[..., None]
    if b.ndim < 2 or b.shape[-2] != n:
        got = b.shape[-2] if b.ndim >= 2 else b.shape
        raise ValueError(f"{name}: inconsistent size for core dimension 'n': b has {got} "
                         f"rows (shape {b.shape[:-1] if vector else b.shape}) but a is "
                         f"{n}x{n}; b must be (..., {n}) or (..., {n}, k).")
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:]),
            vector)


# --- Cholesky ---------------------------------------------------------------------------------
def _hermitian_from_triangle(a, lower):
    """The Hermitian matrix whose ``lower`` (or upper) triangle is that of ``a``, as a lower
    factorisation reads it: lower-triangle form."""
    if lower:
        return jnp.tril(a) + conj_transpose(jnp.tril(a, -1))
    return conj_transpose(jnp.triu(a)) + jnp.triu(a, 1)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _factor_triangle(a, lower):
    """The lower Cholesky factor of the Hermitian matrix given by ``a``'s ``lower`` (or upper)
    triangle. potrf reads only the lower triangle of what it is given, so the primal path
    is a plain (conjugate) transpose, one layout copy as in JAX; building the Hermitian
    matrix explicitly cost a slow transposed select per call (about 5x the copy at 512)."""
    return lax_linalg.cholesky(a if lower else conj_transpose(a), symmetrize_input=False)


@_factor_triangle.defjvp
def _factor_triangle_jvp(lower, primals, tangents):
    # Derivatives are those of the triangle read: the Hermitian matrices are built from
    # that triangle alone (only under differentiation, so only then paid for), the primal
    # too, so that derivatives of this rule (higher orders) see the triangle only.
    (a,), (da,) = primals, tangents
    return jvp(lambda x: lax_linalg.cholesky(x, symmetrize_input=False),
               (_hermitian_from_triangle(a, lower),), (_hermitian_from_triangle(da, lower),))


@functools.partial(jit, static_argnames=("lower",))
def _cholesky(a, lower):
    a, = as_inexact_arrays("cholesky", a)
    _check_square("cholesky", a)
    # Only the named triangle is read, as SciPy's (and only it carries derivatives).
    low = _factor_triangle(a, lower)
    return low if lower else conj_transpose(low)


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of each Hermitian positive-definite matrix of ``a``: upper ``U``
    with ``Uᴴ U = a`` (SciPy's default), or lower ``L`` with ``L Lᴴ = a``, reading only that
    triangle of ``a``. A matrix that is not positive definite gives NaNs."""
    del overwrite_a, check_finite
    return _cholesky(a, bool(lower))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for ``cho_solve``: ``c`` is the Cholesky factor (zeros in the other
    triangle, where SciPy leaves arbitrary values)."""
    del overwrite_a, check_finite
    return _cholesky(a, bool(lower)), bool(lower)


@functools.partial(jit, static_argnames=("lower",))
def _cho_solve(c, b, lower):
    c, b = as_inexact_arrays("cho_solve", c, b)
    _check_square("cho_solve", c)
    c, b, vector = _as_matrices("cho_solve", c, b)
    solve = functools.partial(lax_linalg.triangular_solve, c, left_side=True, lower=lower)
    # a = L Lᴴ (lower) or Uᴴ U: solve the conjugate-transposed factor first for the latter.
    y = solve(b, transpose_a=not lower, conjugate_a=not lower)
    x = solve(y, transpose_a=lower, conjugate_a=lower)
    return x[..., 0] if vector else x


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """The solution of ``a x = b`` given ``(c, lower) = cho_factor(a, lower)``."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    return _cho_solve(c, b, bool(lower))


# --- triangular and LU solves ---------------------------------------------------------------------
_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


@functools.partial(jit, static_argnames=("trans", "lower", "unit_diagonal"))
def _solve_triangular(a, b, trans, lower, unit_diagonal):
    a, b = as_inexact_arrays("solve_triangular", a, b)
    _check_square("solve_triangular", a)
    a, b, vector = _as_matrices("solve_triangular", a, b)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=trans > 0,
                                    conjugate_a=trans == 2, unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """The solution of ``op(a) x = b`` for triangular ``a`` (its ``lower`` or upper triangle
    read; with ``unit_diagonal`` its diagonal taken as ones): op is given by ``trans``, 0 or
    'N' (a), 1 or 'T' (aᵀ), 2 or 'C' (aᴴ)."""
    del overwrite_b, debug, check_finite
    if isinstance(trans, (str, int, np.integer)) and trans in _TRANS:
        code = _TRANS[trans]
    else:
        raise ValueError(f"Invalid 'trans' value {trans}; use 0/'N', 1/'T' or 2/'C'.")
    return _solve_triangular(a, b, code, bool(lower), bool(unit_diagonal))


@functools.partial(jit, static_argnames=("permute_l",))
def _lu(a, permute_l):
    a, = as_inexact_arrays("lu", a)
    if a.ndim < 2:
        raise ValueError(f"lu: a must be a matrix or a batch of matrices, got shape {a.shape}.")
    factors, _, perm = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    eye = jnp.eye(m, k, dtype=a.dtype)
    low = jnp.tril(factors[..., :, :k], -1) + eye
    up = jnp.triu(factors[..., :k, :])
    # a = P L U with P[i, j] = 1 where perm[j] == i.
    p = (perm[..., None, :] == jnp.arange(m, dtype=perm.dtype)[:, None]).astype(a.dtype)
    return (matmul_highest(p, low), up) if permute_l else (p, low, up)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """The LU factorisation with partial pivoting of each matrix of ``a`` (m x n, k =
    min(m, n)): ``(p, l, u)`` with ``a = p @ l @ u``, p an m x m permutation matrix, l m x k
    unit lower triangular, u k x n upper triangular; ``(p @ l, u)`` with ``permute_l``."""
    del overwrite_a, check_finite
    return _lu(a, bool(permute_l))


@jit
def _lu_factor(a):
    a, = as_inexact_arrays("lu_factor", a)
    factors, pivots, _ = lax_linalg.lu(a)
    return factors, pivots


def lu_factor(a, overwrite_a=False, check_finite=True):
    """``(lu, piv)`` for ``lu_solve``: L (unit diagonal, below) and U packed in ``lu``, and
    the row swaps ``piv`` (row i was swapped with row piv[i]), as LAPACK's getrf."""
    del overwrite_a, check_finite
    return _lu_factor(a)


@functools.partial(jit, static_argnames=("trans",))
def _lu_solve_jit(lu_, piv, b, trans):
    lu_, b = as_inexact_arrays("lu_solve", lu_, b)
    _check_square("lu_solve", lu_)
    perm = lax_linalg.lu_pivots_to_permutation(piv, lu_.shape[-1])
    batch = jnp.broadcast_shapes(lu_.shape[:-2], perm.shape[:-1])
    lu_ = jnp.broadcast_to(lu_, batch + lu_.shape[-2:])
    lu2, b, vector = _as_matrices("lu_solve", lu_, b)
    perm = jnp.broadcast_to(perm, lu2.shape[:-1])
    x = _lu_solve(lu2, perm, b, trans)
    return x[..., 0] if vector else x


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """The solution of ``op(a) x = b`` given ``(lu, piv) = lu_factor(a)``: op is a (trans 0),
    aᵀ (1) or aᴴ (2)."""
    del overwrite_b, check_finite
    if trans not in (0, 1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    lu_, piv = lu_and_piv
    return _lu_solve_jit(lu_, piv, b, int(trans))


# --- solve, inv, det -----------------------------------------------------------------------------
def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """The solution of ``a x = b``. ``assume_a='pos'`` solves through a Cholesky
    factorisation of the (Hermitian positive-definite) ``a``, reading its ``lower`` or upper
    triangle; 'gen', 'sym' and 'her' solve through LU (as JAX does)."""
    del overwrite_a, overwrite_b, debug, check_finite
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError("Expected assume_a to be one of ['gen', 'sym', 'her', 'pos']; got "
                         f"{assume_a!r}")
    if assume_a == "pos":
        return _solve_pos(a, b, bool(lower))
    return jnp_linalg.solve(a, b)


@functools.partial(jit, static_argnames=("lower",))
def _solve_pos(a, b, lower):
    return _cho_solve(_cholesky(a, lower), b, lower)


def inv(a, overwrite_a=False, check_finite=True):
    """The inverse of each square matrix of ``a`` (as ``jnp.linalg.inv``)."""
    del overwrite_a, check_finite
    return jnp_linalg.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    """The determinant of each square matrix of ``a`` (as ``jnp.linalg.det``)."""
    del overwrite_a, check_finite
    return jnp_linalg.det(a)


# --- QR, SVD, eigh ----------------------------------------------------------------------------
@functools.partial(jit, static_argnames=("mode", "pivoting"))
def _qr(a, mode, pivoting):
    a, = as_inexact_arrays("qr", a)
    full = mode in ("full", "r")
    out = lax_linalg.qr(a, pivoting=pivoting, full_matrices=full)
    if mode == "r":
        return (out[1], out[2]) if pivoting else (out[1],)
    return tuple(out)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """The QR factorisation of each matrix of ``a`` (m x n, k = min(m, n)): mode 'full' gives
    ``(q, r)`` with q m x m, 'economic' q m x k and r k x n, 'r' gives ``(r,)`` (m x n).
    ``pivoting`` adds the column permutation p (``a[:, p] = q @ r``) to each result."""
    del overwrite_a, lwork, check_finite
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'; use 'full', 'economic' "
                         "or 'r'.")
    return _qr(a, mode, bool(pivoting))


@functools.partial(jit, static_argnames=("mode", "pivoting", "conjugate"))
def _qr_multiply(a, c, mode, pivoting, conjugate):
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = jnp.broadcast_shapes(a.shape[:-2], c.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    c = jnp.broadcast_to(c, batch + c.shape[-2:])
    if pivoting:
        q, r, p = lax_linalg.qr(a, pivoting=True, full_matrices=True)
        q = jnp.conj(q) if conjugate else q
        product = (matmul_highest(q[..., :k], c) if mode == "left"
                   else matmul_highest(c, q[..., :k]))
        return product, jnp.triu(r[..., :k, :]), p
    packed, taus = lax_linalg.geqrf(a)
    if mode == "left" and m > k:  # Q[:, :k] c = Q [c; 0]
        c = jnp.concatenate([c, jnp.zeros(c.shape[:-2] + (m - k,) + c.shape[-1:], c.dtype)],
                            axis=-2)
    if conjugate:  # conj(Q) c = (cᵀ Qᴴ)ᵀ and c conj(Q) = (Qᴴ cᵀ)ᵀ: no conjugation needed
        product = jnp.swapaxes(lax_linalg.ormqr(packed, taus, jnp.swapaxes(c, -1, -2),
                                                left=mode != "left", transpose=True), -1, -2)
    else:
        product = lax_linalg.ormqr(packed, taus, c, left=mode == "left")
    if mode == "right":
        product = product[..., :k]
    return product, jnp.triu(packed[..., :k, :])


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """The QR factorisation a = Q R (Q m x m, k = min(m, n)) multiplied into ``c`` without
    forming Q: ``mode='left'`` gives ``(Q[:, :k] @ c, R)`` (c is (..., k, p)), 'right'
    ``(c @ Q[:, :k], R)`` (c is (..., p, m)), with R k x n; ``conjugate`` uses conj(Q). A 1-D
    ``c`` is a column (left) or row (right) and the product comes back 1-D. ``pivoting``
    (column-pivoted QR) adds the permutation p. Differentiable in ``c``."""
    del overwrite_a, overwrite_c
    a, c = as_inexact_arrays("qr_multiply", a, c)
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    if a.ndim < 2:
        raise ValueError(f"qr_multiply: a must be a matrix (or a batch of them), got shape "
                         f"{a.shape}.")
    onedim = c.ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape "
                         f"{a.shape} so Q has {k} columns, but c has {c.shape[-2]} rows "
                         f"(expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape "
                         f"{a.shape} so Q has {m} rows, but c has {c.shape[-1]} columns "
                         f"(expected {m}).")
    out = _qr_multiply(a, c, mode, bool(pivoting), bool(conjugate))
    if onedim:
        out = (out[0].ravel(),) + tuple(out[1:])
    return out


@functools.partial(jit, static_argnames=("full_matrices", "compute_uv", "algorithm"))
def _svd(a, full_matrices, compute_uv, algorithm):
    a, = as_inexact_arrays("svd", a)
    if a.ndim < 2:
        raise TypeError(f"Input 0 to svd must have rank at least 2, but got shape={a.shape}.")
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                         algorithm=algorithm)
    return tuple(out) if compute_uv else out


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """The singular value decomposition ``a = u @ diag(s) @ vh``: ``(u, s, vh)`` (s real,
    descending) or ``s`` alone. ``lapack_driver`` picks LAPACK's gesdd (divide and conquer,
    the default) or gesvd."""
    del overwrite_a, check_finite
    drivers = {"gesdd": None, "gesvd": lax_linalg.SvdAlgorithm.QR}
    if lapack_driver not in drivers:
        raise ValueError(f"svd: lapack_driver must be 'gesdd' or 'gesvd', got {lapack_driver!r}.")
    return _svd(a, bool(full_matrices), bool(compute_uv), drivers[lapack_driver])


@functools.partial(jit, static_argnames=("lower", "eigvals_only"))
def _eigh(a, lower, eigvals_only):
    a, = as_inexact_arrays("eigh", a)
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=True)
    return w if eigvals_only else (w, v)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):
    """The eigenvalues (ascending) and eigenvectors (columns) of each Hermitian matrix of
    ``a``: ``(w, v)``, or ``w`` with ``eigvals_only``. The matrix decomposed is (a + aᴴ) / 2,
    as JAX's. Generalised problems (``b``) and eigenvalue ranges are not supported."""
    del overwrite_a, overwrite_b, turbo, type, check_finite
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented: plax has no "
                                  "generalized eigensolver; reduce the problem with cholesky.")
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented; slice "
                                  "the full result instead.")
    return _eigh(a, bool(lower), bool(eigvals_only))


@functools.partial(jit, static_argnames=("eigvals_only", "subset"))
def _eigh_tridiagonal(d, e, eigvals_only, subset):
    d, e = as_inexact_arrays("eigh_tridiagonal", d, e)
    n = d.shape[-1]
    if e.shape[-1] != n - 1:
        raise ValueError(f"eigh_tridiagonal: e must hold the {n - 1} off-diagonal entries of "
                         f"the {n}x{n} matrix whose diagonal is d, got d.shape={d.shape} and "
                         f"e.shape={e.shape}.")
    batch = jnp.broadcast_shapes(d.shape[:-1], e.shape[:-1])
    d = jnp.broadcast_to(d, batch + (n,))
    below = jnp.broadcast_to(jnp.concatenate([e, jnp.zeros_like(e[..., :1])], axis=-1),
                             batch + (n,))
    rows = np.arange(n)[:, None]
    cols = np.arange(n)[None, :]
    # The Hermitian tridiagonal matrix; eigh reads its lower triangle (d and e).
    t = (jnp.where(rows == cols, d[..., None, :], 0) +
         jnp.where(rows == cols + 1, below[..., None, :], 0)).astype(d.dtype)
    v, w = lax_linalg.eigh(t, lower=True, symmetrize_input=False, subset_by_index=subset)
    return w if eigvals_only else (w, v)


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None,
                     key=None):
    """The eigenvalues (ascending; with their eigenvectors as columns unless
    ``eigvals_only``) of the Hermitian tridiagonal matrix with diagonal ``d`` (n) and
    sub-diagonal ``e`` (n - 1; the super-diagonal is conj(e)). ``select='i'`` with
    ``select_range=(lo, hi)`` keeps eigenpairs lo..hi (inclusive). Solved densely with
    eigh, so ``tol`` and ``key`` (bisection and inverse-iteration controls) are unused;
    leading dimensions of d and e are batches."""
    del tol, key
    if select == "a":
        subset = None
    elif select == "i":
        lo, hi = (int(i) for i in select_range)
        subset = (lo, hi + 1)
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented: the "
                                  "number of eigenvalues in a range is data-dependent; use "
                                  "select='i' or 'a' and mask the result.")
    else:
        raise ValueError(f"eigh_tridiagonal: select must be 'a', 'i' or 'v', got {select!r}.")
    return _eigh_tridiagonal(d, e, bool(eigvals_only), subset)


# --- polar --------------------------------------------------------------------------------------
def _qdwh_unitary(a, eps, max_iterations):
    """The unitary polar factor of each tall matrix (m >= n) of ``a`` by lax.linalg.qdwh."""
    def single(x):
        return lax_linalg.qdwh(x, eps=eps, max_iterations=max_iterations)[0]
    return jnp.vectorize(single, signature="(m,n)->(m,n)")(a)


@functools.partial(jit, static_argnames=("side", "method", "eps", "max_iterations"))
def _polar(a, side, method, eps, max_iterations):
    a, = as_inexact_arrays("polar", a)
    if a.ndim < 2:
        raise ValueError(f"The input `a` must be at least a 2-D array, got shape {a.shape}.")
    m, n = a.shape[-2:]
    if method == "svd":
        u, s, vh = jnp_linalg.svd(a, full_matrices=False)
        unitary = matmul_highest(u, vh)
    elif m >= n:
        unitary = _qdwh_unitary(a, eps, max_iterations)
    else:  # the polar factor of a wide matrix is that of its (tall) adjoint, adjoined
        unitary = conj_transpose(_qdwh_unitary(conj_transpose(a), eps, max_iterations))
    p = (matmul_highest(conj_transpose(unitary), a) if side == "right"
         else matmul_highest(a, conj_transpose(unitary)))
    return unitary, (p + conj_transpose(p)) / 2


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """The polar decomposition of each matrix of ``a`` (m x n): ``(u, p)`` with u having
    orthonormal columns (or rows, for wide a) and p Hermitian positive semi-definite, where
    ``a = u @ p`` (``side='right'``, p n x n) or ``a = p @ u`` ('left', p m x m). ``method``
    'qdwh' iterates QR-based dynamically weighted Halley steps (``lax.linalg.qdwh``: at
    most ``max_iterations``, default 10, ``eps`` its tolerance); 'svd' uses the SVD."""
    if side not in ("right", "left"):
        raise ValueError("The argument `side` must be either 'right' or 'left'.")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"Unknown polar decomposition method {method}.")
    return _polar(a, side, method, None if eps is None else float(eps),
                  None if max_iterations is None else int(max_iterations))


# --- expm ---------------------------------------------------------------------------------------
def _pade_coefficients(m: int):
    """The coefficients c_j (c_0 = 1) of the numerator of the [m/m] Padé approximant of
    exp: c_j = (2m - j)! m! / ((2m)! j! (m - j)!); the denominator's are (-1)^j c_j."""
    f = math.factorial
    return [float(Fraction(f(2 * m - j) * f(m), f(2 * m) * f(j) * f(m - j)))
            for j in range(m + 1)]


_PADE = {m: _pade_coefficients(m) for m in (3, 5, 7, 9, 13)}
# Higham (2005), Table 2.3: the largest 1-norm for which the degree-m approximant meets the
# unit roundoff of double (m = 3 ... 13) and single precision (m = 3, 5, 7).
_THETA_DOUBLE = ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1),
                 (7, 9.504178996162932e-1), (9, 2.097847961257068e0), (13, 5.371920351148152e0))
_THETA_SINGLE = ((3, 4.258730016922831e-1), (5, 1.880152677804762e0), (7, 3.925724783138660e0))


def _pade_parts(a, m):
    """(u, v): the odd and even parts of the degree-m Padé numerator at ``a``, so that the
    numerator is v + u and the denominator v - u."""
    c = _PADE[m]
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    a2 = matmul_highest(a, a)
    if m == 13:
        # Higham's scheme: six products for degree 13.
        a4 = matmul_highest(a2, a2)
        a6 = matmul_highest(a4, a2)
        u = matmul_highest(a, matmul_highest(a6, c[13] * a6 + c[11] * a4 + c[9] * a2)
                           + c[7] * a6 + c[5] * a4 + c[3] * a2 + c[1] * eye)
        v = (matmul_highest(a6, c[12] * a6 + c[10] * a4 + c[8] * a2)
             + c[6] * a6 + c[4] * a4 + c[2] * a2 + c[0] * eye)
        return u, v
    powers = [eye, a2]
    while len(powers) <= m // 2:
        powers.append(matmul_highest(powers[-1], a2))
    u = matmul_highest(a, sum(c[2 * k + 1] * powers[k] for k in range(m // 2 + 1)))
    v = sum(c[2 * k] * powers[k] for k in range(m // 2 + 1))
    return u, v


def _expm_single(a, upper_triangular, max_squarings):
    double = np.dtype(a.dtype) in (np.dtype(np.float64), np.dtype(np.complex128))
    table = _THETA_DOUBLE if double else _THETA_SINGLE
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2))
    theta_max = table[-1][1]
    # Scale by 2^-s so that the top degree applies, then square s times.
    s = jnp.maximum(0, jnp.ceil(jnp.log2(norm / theta_max)))
    s = jnp.where(jnp.isfinite(s), s, max_squarings + 1).astype(np.int32)
    scaled = a / (2.0 ** s).astype(a.dtype)
    bounds = jnp.asarray([t for _, t in table[:-1]], norm.dtype)
    index = jnp.sum(norm > bounds).astype(np.int32)  # the lowest degree whose bound holds
    branches = [functools.partial(_pade_parts, m=m) for m, _ in table]
    u, v = lax.switch(index, branches, scaled)
    num, den = v + u, v - u
    if upper_triangular:
        r = lax_linalg.triangular_solve(den, num, left_side=True, lower=False)
    else:
        r = jnp_linalg.solve(den, num)

    def square(carry, i):
        return lax.cond(i < s, lambda x: matmul_highest(x, x), lambda x: x, carry), None

    r, _ = lax.scan(square, r, jnp.arange(max_squarings, dtype=np.int32))
    return jnp.where(s > max_squarings, jnp.full_like(r, np.nan), r)


@functools.partial(jit, static_argnames=("upper_triangular", "max_squarings"))
def _expm(a, upper_triangular, max_squarings):
    single = functools.partial(_expm_single, upper_triangular=upper_triangular,
                               max_squarings=max_squarings)
    return jnp.vectorize(single, signature="(n,n)->(n,n)")(a)


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential of each square matrix of ``A``, by scaling and squaring with
    Padé approximants (Higham 2005): the 1-norm picks the lowest degree accurate for the
    dtype (3-13 in double precision, 3-7 in single), scaling by a power of two when even
    the top degree needs it. If more than ``max_squarings`` squarings would be needed the
    result is NaN. ``upper_triangular`` solves the Padé system by back substitution."""
    A, = as_inexact_arrays("expm", A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={A.shape}.")
    return _expm(A, bool(upper_triangular), int(max_squarings))


@functools.partial(jit, static_argnames=("compute_expm",))
def _expm_frechet(a, e, compute_expm):
    expm_a, frechet = jvp(functools.partial(_expm, upper_triangular=False, max_squarings=16),
                          (a,), (e,))
    return (expm_a, frechet) if compute_expm else frechet


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """The Fréchet derivative of the matrix exponential at each matrix of ``A`` in the
    direction ``E`` (the JVP of ``expm``), and with ``compute_expm`` (default) ``expm(A)``
    first: ``(expm(A), L(A, E))``. ``method`` is accepted and unused. Differentiable."""
    del method
    a, e = as_inexact_arrays("expm_frechet", A, E)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={a.shape}")
    if e.ndim < 2 or e.shape[-1] != e.shape[-2]:
        raise ValueError(f"expected E to be a (batched) square matrix, got E.shape={e.shape}")
    if a.shape != e.shape:
        raise ValueError(f"expected A and E to be the same shape, got A.shape={a.shape} "
                         f"E.shape={e.shape}")
    return _expm_frechet(a, e, bool(compute_expm))


# --- constructed matrices ---------------------------------------------------------------------
def block_diag(*arrs):
    """The block-diagonal matrix with the (at most 2-D) ``arrs`` as its blocks, in order; 0-
    and 1-D arguments count as one row. No arguments give a 1 x 0 array."""
    if not arrs:
        arrs = (jnp.zeros((1, 0)),)
    check_arraylike("block_diag", *arrs)
    for i, x in enumerate(arrs):
        if np.ndim(x) > 2:
            raise ValueError("Arguments to jax.scipy.linalg.block_diag must have at most 2 "
                             f"dimensions, got an array of shape {np.shape(x)} at argument "
                             f"{i}.")
    blocks = [jnp.atleast_2d(x) for x in promote_dtypes(*arrs)]
    cols = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = cols - left - b.shape[1]
        rows.append(jnp.pad(b, ((0, 0), (left, right))))
        left += b.shape[1]
    return jnp.concatenate(rows, axis=0)
