"""Restarted GMRES for ``plax.scipy.sparse.linalg.gmres``: the Arnoldi process on ``M A``
and the small least-squares problem each cycle ends with.

A cycle keeps the Krylov basis ``V`` as ``b``'s pytree with one more trailing axis
(``restart + 1`` columns, those not yet built zero) and the Hessenberg matrix row by row:
row ``j`` of ``H`` holds column ``j`` of the Hessenberg matrix. Rows not yet built are
rows of the identity, so the triangular solve at the end gives zero coefficients for
them. Givens rotations turn ``H`` into a triangle, either as each column arrives (the
'incremental' method, which also reads the residual's norm off the rotated right-hand
side and so may end a cycle early) or all at once after the basis is complete ('batched').
"""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax import tree_util
from plax.scipy.sparse import krylov_trees as kt

__all__ = ["gmres_solve"]


def _safe_normalize(x, threshold=None):
    """``(x / ||x||, ||x||)``, or zeros when ``||x|| <= threshold`` (machine epsilon by
    default): a direction that vanished, numerically."""
    n = kt.norm(x)
    if threshold is None:
        threshold = jnp.finfo(n.dtype).eps
    keep = n > threshold
    unit = tree_util.tree_map(
        lambda v: jnp.where(keep, v / n.astype(v.dtype), jnp.zeros_like(v)), x)
    return unit, jnp.where(keep, n, jnp.zeros_like(n))


def _column(V, k):
    return tree_util.tree_map(lambda X: lax.dynamic_index_in_dim(X, k, X.ndim - 1, False), V)


def _project(V, v):
    """The coefficients ``V^H v`` (one per column of V), summed over the leaves."""
    parts = [jnp.tensordot(X.conj(), u, axes=(tuple(range(u.ndim)), tuple(range(u.ndim))),
                           precision=kt.HIGHEST)
             for X, u in zip(tree_util.tree_leaves(V), tree_util.tree_leaves(v))]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _combine(V, c):
    """``V c``: the combination of V's columns with coefficients ``c``."""
    return tree_util.tree_map(
        lambda X: jnp.tensordot(X, c.astype(jnp.result_type(X, c)), axes=1,
                                precision=kt.HIGHEST).astype(X.dtype), V)


def _arnoldi_step(k, A, M, V, H, dtype):
    """Extend the basis by ``M A V[:, k]``, orthogonalized against the columns so far by
    classical Gram-Schmidt, twice (once more restores what rounding lost). Returns
    ``(V, H, breakdown)``; a breakdown is a new vector inside the span (an exact solution
    lies in the basis)."""
    v = M(A(_column(V, k)))
    start_norm = kt.norm(v)
    h = jnp.zeros(H.shape[1], dtype)
    for _ in range(2):
        c = _project(V, v).astype(dtype)
        v = kt.sub(v, _combine(V, c))
        h = h + c
    unit, v_norm = _safe_normalize(v, threshold=jnp.finfo(start_norm.dtype).eps * start_norm)
    h = h.at[k + 1].set(v_norm.astype(dtype))
    V = tree_util.tree_map(
        lambda X, u: lax.dynamic_update_index_in_dim(X, u.astype(X.dtype), k + 1, X.ndim - 1),
        V, unit)
    H = lax.dynamic_update_index_in_dim(H, h, k, 0)
    return V, H, v_norm == 0


def _givens(a, b):
    """``(c, s, r)`` with ``[[c, s], [-conj(s), c]] @ [a, b] == [r, 0]`` (``c`` real).
    Real and complex values are cast explicitly (strict dtype promotion refuses a mix)."""
    abs_a, abs_b = jnp.abs(a), jnp.abs(b)
    r_abs = jnp.sqrt(abs_a * abs_a + abs_b * abs_b)
    safe_r = jnp.where(r_abs == 0, jnp.ones_like(r_abs), r_abs).astype(a.dtype)
    safe_abs_a = jnp.where(abs_a == 0, jnp.ones_like(abs_a), abs_a).astype(a.dtype)
    phase = jnp.where(abs_a == 0, jnp.ones_like(a), a / safe_abs_a)
    c = jnp.where(r_abs == 0, jnp.ones_like(r_abs), abs_a / jnp.where(r_abs == 0, 1, r_abs))
    s = jnp.where(r_abs == 0, jnp.zeros_like(a), phase * jnp.conj(b) / safe_r)
    r = phase * r_abs.astype(a.dtype)
    return c, s, r


def _rotate(x, i, c, s):
    """Apply rotation ``(c, s)`` to entries ``i, i + 1`` of the vector ``x``."""
    xi, xj = x[i], x[i + 1]
    c = c.astype(x.dtype)  # (real: no mixed real-complex product, which strict promotion refuses)
    x = x.at[i].set((c * xi + s * xj).astype(x.dtype))
    return x.at[i + 1].set((-jnp.conj(s) * xi + c * xj).astype(x.dtype))


def _triangularize_column(H, g, rotations, k):
    """Rotate column ``k`` of the Hessenberg matrix (row ``k`` of ``H``) by the rotations so
    far, then zero its subdiagonal entry with a new one, applied to ``g`` too. Rotations
    not yet made are the identity, so all of them apply."""
    h = H[k]

    def apply(i, h):
        return _rotate(h, i, rotations[0][i], rotations[1][i])

    h = lax.fori_loop(0, H.shape[0], apply, h)
    c, s, r = _givens(h[k], h[k + 1])
    h = h.at[k].set(r).at[k + 1].set(jnp.zeros((), h.dtype))
    rotations = (rotations[0].at[k].set(c), rotations[1].at[k].set(s))
    return H.at[k].set(h), _rotate(g, k, c, s), rotations


def _cycle(A, b, M, x, unit_residual, residual_norm, ptol, restart, incremental):
    """One GMRES cycle from ``x``: returns the new ``x``, its unit preconditioned residual
    and that residual's norm."""
    dtype = kt.result_dtype(b)
    V = tree_util.tree_map(
        lambda u: jnp.concatenate([u[..., None], jnp.zeros(u.shape + (restart,), u.dtype)],
                                  axis=-1), unit_residual)
    H = jnp.eye(restart, restart + 1, dtype=dtype)
    g = jnp.zeros(restart + 1, dtype).at[0].set(residual_norm.astype(dtype))
    real = kt.real_dtype(dtype)
    rotations = (jnp.ones(restart, real), jnp.zeros(restart, dtype))

    if incremental:
        def going(state):
            k, err, breakdown = state[:3]
            return (k < restart) & (err > ptol) & ~breakdown

        def step(state):
            k, _, _, V, H, g, rotations = state
            V, H, breakdown = _arnoldi_step(k, A, M, V, H, dtype)
            H, g, rotations = _triangularize_column(H, g, rotations, k)
            return k + 1, jnp.abs(g[k + 1]), breakdown, V, H, g, rotations

        state = (0, residual_norm, False, V, H, g, rotations)
        _, _, _, V, H, g, _ = lax.while_loop(going, step, state)
    else:
        def going(state):
            k, breakdown = state[:2]
            return (k < restart) & ~breakdown

        def step(state):
            k, _, V, H = state
            V, H, breakdown = _arnoldi_step(k, A, M, V, H, dtype)
            return k + 1, breakdown, V, H

        _, _, V, H = lax.while_loop(going, step, (0, False, V, H))

        def rotate_all(k, state):
            return _triangularize_column(*state, k)

        H, g, _ = lax.fori_loop(0, restart, rotate_all, (H, g, rotations))
    # H's rows are now the columns of an upper triangle R: solve R y = g.
    R = H[:, :restart].T
    y = lax.linalg.triangular_solve(R, g[:restart, None], left_side=True, lower=False)[:, 0]
    dx = _combine(tree_util.tree_map(lambda X: X[..., :restart], V), y)
    x = kt.add(x, dx)
    residual = M(kt.sub(b, A(x)))
    unit, n = _safe_normalize(residual)
    return x, unit, n


def gmres_solve(A, b, x0, *, atol, ptol, restart, maxiter, M, incremental):
    """Restarted GMRES from ``x0``: cycles until the preconditioned residual's norm is at
    most ``atol`` or ``maxiter`` cycles have run."""
    unit, n = _safe_normalize(M(kt.sub(b, A(x0))))

    def going(state):
        _, k, _, n = state
        return (k < maxiter) & (n > atol)

    def cycle(state):
        x, k, unit, n = state
        x, unit, n = _cycle(A, b, M, x, unit, n, ptol, restart, incremental)
        return x, k + 1, unit, n

    x, *_ = lax.while_loop(going, cycle, (x0, 0, unit, n))
    return x
