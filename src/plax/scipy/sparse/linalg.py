"""plax.scipy.sparse.linalg: the Krylov solvers ``cg``, ``bicgstab`` and ``gmres``, as in
JAX 0.10.2.

The operator ``A`` (and the preconditioner ``M``, which approximates ``A``'s inverse) is a
square matrix or a function computing a matrix-vector product; ``b`` may be any pytree of
arrays that function accepts. Each solve is a ``lax.while_loop`` inside
``lax.custom_linear_solve``, so it runs under jit and vmap and is differentiated implicitly
(the derivative solves again, with the transposed operator; it never unrolls the
iteration), with respect to ``b`` and to whatever ``A`` closes over. As in JAX, ``cg`` and
``bicgstab`` return ``(x, None)`` and ``gmres`` returns ``(x, info)``, ``info`` being -1 when
the solution has NaNs and 0 otherwise.
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax import tree_util
from plax.core.trace import Tracer
from plax.runtime.array import ArrayImpl
from plax.scipy.sparse import krylov_trees as kt
from plax.scipy.sparse.gmres_arnoldi import gmres_solve

__all__ = ["cg", "bicgstab", "gmres"]


def _identity(x):
    return x


def _matvec(A, what: str):
    """``A`` as a function: itself when callable, else ``x -> A @ x`` for a square matrix
    (an array, or any object with ``__matmul__``)."""
    if A is None:
        return _identity
    if callable(A):
        return A
    if isinstance(A, (ArrayImpl, Tracer, np.ndarray)):
        A = jnp.asarray(A)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: "
                             f"{A.shape} (the {what} must be an n x n matrix or a function "
                             "computing its product with a vector).")
        return functools.partial(jnp.dot, A, precision=kt.HIGHEST)
    if hasattr(A, "__matmul__"):  # any matrix-like object (a sparse matrix, ...)
        shape = getattr(A, "shape", None)
        if shape is not None and (len(shape) != 2 or shape[0] != shape[1]):
            raise ValueError(f"linear operator must be a square matrix, but has shape: "
                             f"{tuple(shape)} (the {what}).")
        return functools.partial(operator.matmul, A)
    raise TypeError(f"linear operator must be either a function or ndarray: {A!r} (the "
                    f"{what}).")


def _prepare(name, A, b, x0, M, maxiter):
    """Checked arguments shared by the solvers: (A, b, x0, M, maxiter)."""
    b = tree_util.tree_map(jnp.asarray, b)
    leaves = tree_util.tree_leaves(b)
    if not leaves:
        raise ValueError(f"{name}: b has no arrays (got {b!r}).")
    for leaf in leaves:
        if not jnp.issubdtype(leaf.dtype, jnp.inexact):
            raise TypeError(f"{name} solves for floating-point or complex b, got an array of "
                            f"dtype {leaf.dtype} (shape {leaf.shape}); convert it first, e.g. "
                            "b.astype(jnp.float32).")
    x0 = tree_util.tree_map(jnp.zeros_like, b) if x0 is None else \
        tree_util.tree_map(jnp.asarray, x0)
    if tree_util.tree_structure(x0) != tree_util.tree_structure(b):
        raise ValueError("x0 and b must have matching tree structure: "
                         f"{tree_util.tree_structure(x0)} vs {tree_util.tree_structure(b)}")
    x0_shapes = [x.shape for x in tree_util.tree_leaves(x0)]
    b_shapes = [x.shape for x in leaves]
    if x0_shapes != b_shapes:
        raise ValueError(f"arrays in x0 and b must have matching shapes: {x0_shapes} vs "
                         f"{b_shapes}")
    if maxiter is None:
        maxiter = 10 * sum(leaf.size for leaf in leaves)  # SciPy's default
    return _matvec(A, "operator A"), b, x0, _matvec(M, "preconditioner M"), maxiter


def _solve(name, method, A, b, x0, tol, atol, maxiter, M, symmetric_if_real):
    A, b, x0, M, maxiter = _prepare(name, A, b, x0, M, maxiter)
    solve = functools.partial(method, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    # A real operator cg applies to is symmetric positive definite: its transposed solve is
    # the solve itself.
    symmetric = symmetric_if_real and not any(
        jnp.iscomplexobj(leaf) for leaf in tree_util.tree_leaves(b))
    return lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve,
                                   symmetric=symmetric)


def _cg_iterate(A, b, *, x0, tol, atol, maxiter, M):
    """Preconditioned conjugate gradients: stops when ``||r||^2 <= max(tol^2 ||b||^2,
    atol^2)`` or after ``maxiter`` steps."""
    threshold = jnp.maximum(jnp.square(tol) * kt.vdot_real(b, b), jnp.square(atol))
    r0 = kt.sub(b, A(x0))
    z0 = M(r0)
    dtype = kt.result_dtype(z0)
    gamma0 = kt.vdot_real(r0, z0).astype(dtype)
    unpreconditioned = M is _identity

    def going(state):
        _, r, gamma, _, k = state
        rs = gamma.real if unpreconditioned else kt.vdot_real(r, r)
        return (rs > threshold) & (k < maxiter)

    def step(state):
        x, r, gamma, p, k = state
        Ap = A(p)
        alpha = gamma / kt.vdot_real(p, Ap).astype(dtype)
        x = kt.axpy(alpha, p, x)
        r = kt.axpy(-alpha, Ap, r)
        z = M(r)
        gamma_next = kt.vdot_real(r, z).astype(dtype)
        p = kt.axpy(gamma_next / gamma, p, z)
        return x, r, gamma_next, p, k + 1

    x, *_ = lax.while_loop(going, step, (x0, r0, gamma0, z0, 0))
    return x


def _bicgstab_iterate(A, b, *, x0, tol, atol, maxiter, M):
    """Preconditioned BiCGSTAB (van der Vorst's); stops when ``||r||^2 <= max(tol^2
    ||b||^2, atol^2)``, after ``maxiter`` steps, or on a breakdown (a zero rho, alpha or
    omega), keeping the last iterate."""
    threshold = jnp.maximum(jnp.square(tol) * kt.vdot_real(b, b), jnp.square(atol))
    r0 = kt.sub(b, A(x0))
    one = jnp.ones((), kt.result_dtype(b))

    def going(state):
        _, r, *_, k = state
        return (kt.vdot_real(r, r) > threshold) & (k < maxiter) & (k >= 0)

    def step(state):
        x, r, rhat, alpha, omega, rho, p, v, k = state
        rho_next = kt.vdot(rhat, r)
        beta = rho_next / rho * alpha / omega
        p = kt.add(r, kt.scale(beta, kt.sub(p, kt.scale(omega, v))))
        phat = M(p)
        v = A(phat)
        alpha = rho_next / kt.vdot(rhat, v)
        s = kt.axpy(-alpha, v, r)
        converged_half_way = kt.vdot_real(s, s) < threshold
        shat = M(s)
        t = A(shat)
        omega = kt.vdot(t, s) / kt.vdot(t, t)
        x_half = kt.axpy(alpha, phat, x)
        x = kt.where(converged_half_way, x_half, kt.axpy(omega, shat, x_half))
        r = kt.where(converged_half_way, s, kt.axpy(-omega, t, s))
        k = jnp.where((omega == 0) | (alpha == 0), -11, k + 1)  # breakdowns end the loop
        k = jnp.where(rho_next == 0, -10, k)
        return x, r, rhat, alpha, omega, rho_next, p, v, k

    # p and v start as r0 with rho = alpha = omega = 1: the first direction is then r0.
    x, *_ = lax.while_loop(going, step, (x0, r0, r0, one, one, one, r0, r0, 0))
    return x


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve ``A x = b`` by (preconditioned) conjugate gradients, for a Hermitian positive
    definite ``A`` (a matrix, or a function of a pytree like ``b``).

    Stops when ``norm(residual) <= max(tol * norm(b), atol)`` or after ``maxiter`` steps
    (default: ten times the size of ``b``). ``M`` approximates ``A``'s inverse. Returns
    ``(x, None)``; differentiable with respect to ``b`` and what ``A`` closes over.
    """
    x = _solve("cg", _cg_iterate, A, b, x0, tol, atol, maxiter, M, symmetric_if_real=True)
    return x, None


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve ``A x = b`` by the biconjugate gradient stabilized method, for a general
    square ``A`` (a matrix, or a function of a pytree like ``b``).

    Stopping rule, ``maxiter``, ``M`` and derivatives as in :func:`cg`. Returns
    ``(x, None)``.
    """
    x = _solve("bicgstab", _bicgstab_iterate, A, b, x0, tol, atol, maxiter, M,
               symmetric_if_real=False)
    return x, None


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """Solve ``A x = b`` by restarted GMRES, for a general square ``A`` (a matrix, or a
    function of a pytree like ``b``).

    Each cycle builds a Krylov basis of ``restart`` vectors (of ``M A``) and minimizes the
    preconditioned residual over it; at most ``maxiter`` cycles run (default: ten times
    the size of ``b``), stopping once the preconditioned residual's norm is at most
    ``max(tol * norm(b), atol)``. ``solve_method='incremental'`` triangularizes the
    least-squares problem with Givens rotations as the basis grows, ending a cycle early
    once converged; ``'batched'`` builds the whole basis and then solves it (fewer,
    larger operations, which suit accelerators). Returns ``(x, info)``: ``info`` is -1 if
    ``x`` has NaNs, else 0. Differentiable as :func:`cg`.
    """
    if solve_method not in ("incremental", "batched"):
        raise ValueError(f"invalid solve_method {solve_method}, must be either "
                         "'incremental' or 'batched'")
    A, b, x0, M, maxiter = _prepare("gmres", A, b, x0, M, maxiter)
    size = sum(leaf.size for leaf in tree_util.tree_leaves(b))
    restart = max(1, min(int(restart), size))
    b_norm = kt.norm(b)
    atol = jnp.maximum(tol * b_norm, atol)
    Mb_norm = kt.norm(M(b))
    # The preconditioned residual's target within a cycle (incremental's early exit).
    ptol = Mb_norm * jnp.minimum(1.0, jnp.where(b_norm > 0, atol / b_norm, 1.0))

    def solve(matvec, rhs):
        return gmres_solve(matvec, rhs, x0, atol=atol, ptol=ptol, restart=restart,
                           maxiter=maxiter, M=M, incremental=solve_method == "incremental")

    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    info = jnp.where(jnp.isnan(kt.norm(x)), -1, 0)
    return x, info
