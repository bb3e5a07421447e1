"""Sparse linear algebra: ``lobpcg_standard`` (top eigenpairs of a symmetric operator)
and ``spsolve`` (a direct solve of a CSR system).

``lobpcg_standard`` is written in plax's own lax/jnp operations (jittable; a loop, so not
differentiable, as JAX's). ``spsolve`` is the primitive ``spsolve_p``: on CPU it runs
SciPy's sparse solver through a host callback (as JAX does on CPU); its jvp and its
transpose (in ``b``) are solves again, so it is differentiable with respect to ``data`` and
``b``. Under vmap it solves each member in turn.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, is_undefined,
                             linear_primitives, register_lowering, transpose_rules)
from plax.core.trace import get_aval
from plax.experimental.sparse.bcsr_prims import csr_rows
from plax.experimental.sparse.csr import csr_matvec_p
from plax.first_order.ad_util import defjvp
from plax.first_order.batch_util import moveaxis
from plax.lowering.inline import lower_fun

__all__ = ["lobpcg_standard", "spsolve", "spsolve_p"]


# --- lobpcg_standard ---------------------------------------------------------------------------
def _mm(a, b):
    return jnp.matmul(a, b, precision=lax.Precision.HIGHEST)


def _check_lobpcg_inputs(apply, X):
    """JAX's contract: X is (n, k) with 0 < 5k < n, of an inexact dtype, and the operator
    maps (n, 1) blocks of X's dtype to (n, 1) blocks of that dtype (checked abstractly)."""
    if getattr(X, "ndim", None) != 2:
        raise ValueError(f"lobpcg_standard: X must be an (n, k) array of initial search "
                         f"directions, got shape {getattr(X, 'shape', None)}.")
    n, k = X.shape
    if not dtypes.is_inexact(X.dtype):
        raise ValueError(f"data type {X.dtype} not inexact")
    if k == 0:
        raise ValueError(f"must have search dim > 0, got {k}")
    if k * 5 >= n:
        raise ValueError(f"expected search dim * 5 < matrix dim (got {k * 5}, {n})")
    from plax.api.jit import eval_shape
    from plax.core.shape_dtype_struct import ShapeDtypeStruct
    out = eval_shape(apply, ShapeDtypeStruct((n, 1), X.dtype))
    if out.dtype != X.dtype:
        raise ValueError(f"A, X must have same dtypes (were {out.dtype}, {X.dtype})")
    if tuple(out.shape) != (n, 1):
        raise ValueError(f"A must be ({n}, {n}) matrix A, got output {tuple(out.shape)} for an "
                         f"({n}, 1) block")


def _orthonormalize(S):
    """``(Q, keep)``: an orthonormal basis of the span of ``S``'s columns, one column per
    column of ``S`` (columns left over by (near) linear dependence are zero, and ``keep``
    says which are not), by a scaled Gram eigendecomposition (SVQB)."""
    eps = jnp.finfo(S.dtype).eps
    norms = jnp.linalg.norm(S, axis=0)
    live = norms > jnp.max(norms, initial=0) * eps
    S = S * jnp.where(live, 1 / jnp.where(live, norms, 1), 0)[None, :]
    gram = _mm(S.T, S)
    lam, V = jnp.linalg.eigh((gram + gram.T) / 2)
    keep = lam > jnp.max(lam) * eps * S.shape[1] * 10
    return _mm(S, V * jnp.where(keep, lax.rsqrt(jnp.where(keep, lam, 1)), 0)[None, :]), keep


def _project_out(basis, U):
    """``U`` without its components along the orthonormal ``basis`` (twice, for accuracy)."""
    for _ in range(2):
        U = U - _mm(basis, _mm(basis.T, U))
    return U


def _rayleigh_ritz(S, AS, keep, k):
    """The top ``k`` Ritz pairs of the operator on the span of orthonormal ``S`` (columns
    not kept, which are zero, pushed to the bottom of the spectrum): ``(theta, C)``."""
    H = _mm(S.T, AS)
    H = (H + H.T) / 2
    big = 2 * jnp.max(jnp.abs(H)) + 1
    H = H - jnp.diag(jnp.where(keep, 0, big))
    w, V = jnp.linalg.eigh(H)
    return w[::-1][:k], V[:, ::-1][:, :k]


def lobpcg_standard(A, X, m: int = 100, tol=None):
    """The ``k`` largest eigenvalues and their eigenvectors of the symmetric ``(n, n)``
    operator ``A`` (an array, or a callable applying it to an ``(n, k)`` block), by LOBPCG
    from the initial search directions ``X`` (``(n, k)``, numerically independent; it needs
    ``0 < 5k < n``).

    Each of at most ``m`` iterations takes the top Ritz pairs of ``A`` on the span of the
    current vectors, their residuals and the previous search directions (kept
    orthonormal). An eigenpair ``(lam, v)`` has converged when ``|A v - lam v| < tol * 10 *
    n * (|lam| + |A v|)``; ``tol`` defaults to the dtype's epsilon. Returns ``(theta, U,
    i)``: eigenvalues (descending), eigenvectors as columns, and iterations run.
    """
    if callable(A):
        return _lobpcg_standard_callable(A, X, m, tol)
    return _lobpcg_standard_matrix(A, X, m, tol)


def _lobpcg_standard_matrix(A, X, m, tol, debug: bool = False):
    """``lobpcg_standard`` for an ``(n, n)`` array ``A``; see ``_lobpcg_standard_callable``
    for ``debug``."""
    A, X = jnp.asarray(A), jnp.asarray(X)
    n = X.shape[0] if X.ndim == 2 else None
    if n is not None and A.shape != (n, n):
        raise ValueError(f"A must be ({n}, {n}) matrix A, got shape {A.shape}")
    return _lobpcg_standard_callable(lambda v: _mm(A, v), X, m, tol, debug)


def _lobpcg_standard_callable(A, X, m, tol, debug: bool = False):
    """``lobpcg_standard`` for a callable ``A``. With ``debug`` all ``m`` iterations run
    (convergence does not stop them) and a fourth result is a dict of per-iteration
    diagnostics, each stacked over the iterations (JAX's keys: 'lambda history', 'residual
    history', 'X zeros', 'P zeros', 'basis rank', 'converged', 'adjusted residual
    max'/'p50'/'min', 'X orth', 'P orth', 'P.X')."""
    X = jnp.asarray(X)
    _check_lobpcg_inputs(A, X)
    n, k = X.shape
    dtype = X.dtype
    tol = jnp.asarray(jnp.finfo(dtype).eps if tol is None else tol, dtype)

    def bound(theta, AX):
        return 10 * n * (jnp.abs(theta) + jnp.linalg.norm(AX, axis=0))

    Xs, keep = _orthonormalize(X)
    AXs = A(Xs)
    theta, C = _rayleigh_ritz(Xs, AXs, keep, k)
    Xs, AXs = _mm(Xs, C), _mm(AXs, C)
    P = jnp.zeros_like(Xs)
    # At least one iteration runs (when m > 0), as in JAX.
    state = (0, Xs, AXs, P, theta, jnp.zeros((k,), bool))

    def cond(state):
        i, *_, conv = state
        return (i < m) & ~jnp.all(conv)

    def body(state):
        i, Xs, AXs, P, theta, _ = state
        R = AXs - Xs * theta[None, :]
        Q, _ = _orthonormalize(_project_out(Xs, jnp.concatenate([P, R], axis=1)))
        Q, keep_q = _orthonormalize(_project_out(Xs, Q))
        S = jnp.concatenate([Xs, Q], axis=1)
        AS = A(S)  # all of it afresh: A X carried over would gather rounding error
        keep = jnp.concatenate([jnp.ones((k,), bool), keep_q])
        theta, C = _rayleigh_ritz(S, AS, keep, k)
        Xn, AXn = _mm(S, C), _mm(AS, C)
        P = _mm(Q, C[k:])  # the step's part outside the previous vectors
        resid = jnp.linalg.norm(AXn - Xn * theta[None, :], axis=0)
        conv = resid < tol * bound(theta, AXn)
        new = (i + 1, Xn, AXn, P, theta, conv)
        if not debug:
            return new
        return new, _diagnostics(keep, Xn, P, theta, resid, resid / bound(theta, AXn), conv)

    if debug:
        state, info = lax.scan(lambda st, _: body(st), state, None, length=m)
    else:
        state = lax.while_loop(cond, body, state)
    i, Xs, _, _, theta, _ = state
    return (theta, Xs, i, info) if debug else (theta, Xs, i)


def _diagnostics(keep, X, P, theta, resid, adjusted, conv):
    """One iteration's debug diagnostics (see ``_lobpcg_standard_callable``)."""
    k = X.shape[1]

    def off_diagonal(G):  # mean absolute off-diagonal entry (orthogonality loss)
        return jnp.sum(jnp.abs(G - jnp.diag(jnp.diag(G)))) / k ** 2

    zero_columns = lambda M: jnp.sum(jnp.all(M == 0, axis=0))  # noqa: E731
    return {"basis rank": jnp.sum(keep), "X zeros": zero_columns(X),
            "P zeros": zero_columns(P), "lambda history": theta, "residual history": resid,
            "converged": jnp.sum(conv), "adjusted residual max": jnp.max(adjusted),
            "adjusted residual p50": jnp.median(adjusted),
            "adjusted residual min": jnp.min(adjusted), "X orth": off_diagonal(_mm(X.T, X)),
            "P orth": off_diagonal(_mm(P.T, P)), "P.X": jnp.sum(jnp.abs(_mm(X.T, P))) / k ** 2}


# --- spsolve ------------------------------------------------------------------------------------------
spsolve_p = Primitive("spsolve")


def spsolve(data, indices, indptr, b, tol=1e-6, reorder=1):
    """The solution ``x`` of ``A x = b`` for the square CSR matrix ``A`` given by ``data``,
    ``indices`` and ``indptr`` (on CPU by SciPy's sparse direct solver; ``tol`` and
    ``reorder`` are the GPU solver's settings, accepted and kept). Differentiable with
    respect to ``data`` and ``b``; ``x`` has ``b``'s dtype and shape."""
    data, indices, indptr, b = map(jnp.asarray, (data, indices, indptr, b))
    return spsolve_p.bind(data, indices, indptr, b, tol=float(tol), reorder=int(reorder))


def _spsolve_abstract(data, indices, indptr, b, *, tol, reorder):
    if not (data.ndim == indices.ndim == indptr.ndim == b.ndim == 1):
        raise ValueError("Arrays must be one-dimensional. Got data.shape="
                         f"{tuple(data.shape)} indices.shape={tuple(indices.shape)} "
                         f"indptr.shape={tuple(indptr.shape)} b.shape={tuple(b.shape)}")
    if indptr.shape[0] != b.shape[0] + 1 or data.shape != indices.shape:
        raise ValueError(f"Invalid CSR buffer sizes: data.shape={tuple(data.shape)} "
                         f"indices.shape={tuple(indices.shape)} "
                         f"indptr.shape={tuple(indptr.shape)} (b.shape={tuple(b.shape)}: "
                         "indptr needs len(b) + 1 entries)")
    if data.dtype != b.dtype:
        raise ValueError(f"data types do not match: data.dtype={data.dtype} "
                         f"b.dtype={b.dtype}")
    if not dtypes.is_integer(indices.dtype) or not dtypes.is_integer(indptr.dtype):
        raise ValueError(f"spsolve: indices and indptr must be integer arrays, got "
                         f"{indices.dtype} and {indptr.dtype}.")
    return ShapedArray(tuple(b.shape), b.dtype)


def _host_solve(data, indices, indptr, b):
    import scipy.sparse
    import scipy.sparse.linalg
    n = b.shape[0]
    A = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n, n))
    return np.asarray(scipy.sparse.linalg.spsolve(A, b)).astype(b.dtype).reshape(b.shape)


def _spsolve_impl(data, indices, indptr, b, *, tol, reorder):
    from plax.api.callbacks import pure_callback
    from plax.core.shape_dtype_struct import ShapeDtypeStruct
    b_aval = get_aval(b)
    return pure_callback(_host_solve, ShapeDtypeStruct(b_aval.shape, b_aval.dtype),
                         data, indices, indptr, b)


def csr_transpose(data, indices, indptr):
    """The CSR buffers of the transpose of a square CSR matrix (padding past
    ``indptr[-1]`` moved to the end)."""
    n = get_aval(indptr).shape[0] - 1
    rows = csr_rows(indptr, get_aval(indices).shape[0])  # padding: row n
    cols = jnp.where(rows < n, indices, jnp.asarray(n, indices.dtype))
    cols, rows, data = lax.sort((cols, rows, data), num_keys=2)
    counts = jnp.zeros((n,), indptr.dtype).at[cols].add(1, mode="drop")
    new_indptr = jnp.concatenate([jnp.zeros((1,), indptr.dtype),
                                  jnp.cumsum(counts, dtype=indptr.dtype)])
    return data, jnp.where(rows < n, rows, 0).astype(indices.dtype), new_indptr


def _jvp_data(data_dot, ans, data, indices, indptr, b, **params):
    # d(A^-1 b) = -A^-1 (dA) x
    n = get_aval(b).shape[0]
    dA_x = csr_matvec_p.bind(data_dot, indices, indptr, ans, shape=(n, n), transpose=False)
    return -spsolve_p.bind(data, indices, indptr, dA_x, **params)


def _jvp_b(b_dot, ans, data, indices, indptr, b, **params):
    return spsolve_p.bind(data, indices, indptr, b_dot, **params)


def _spsolve_transpose(ct, data, indices, indptr, b, **params):
    if not is_undefined(b) or is_undefined(data) or is_undefined(indices) or \
            is_undefined(indptr):
        raise ValueError("spsolve is linear in b only: cannot transpose with respect to the "
                         "matrix")
    if type(ct) is Zero:
        return [None, None, None, None]
    return [None, None, None, spsolve_p.bind(*csr_transpose(data, indices, indptr), ct,
                                             **params)]


def _spsolve_batch(axis, vals, dims, **params):
    vals = [x if d is None else moveaxis(x, d, 0) for x, d in zip(vals, dims)]
    batched = [d is not None for d in dims]

    def one(xs):
        it = iter(xs)
        args = [next(it) if bat else v for v, bat in zip(vals, batched)]
        return spsolve_p.bind(*args, **params)
    return lax.map(one, [v for v, bat in zip(vals, batched) if bat]), 0


abstract_eval_rules[spsolve_p] = _spsolve_abstract
register_lowering(spsolve_p, lower_fun(_spsolve_impl))
defjvp(spsolve_p, _jvp_data, None, None, _jvp_b)
linear_primitives.add(spsolve_p)
transpose_rules[spsolve_p] = _spsolve_transpose
batch_rules[spsolve_p] = _spsolve_batch
