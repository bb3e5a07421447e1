"""qdwh: the polar decomposition x = u h by the QR-based dynamically weighted Halley
iteration (Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl. 31(5), 2010).

Written on plax's own operations, so it jits and vmaps as any program does. The weights of
each step depend only on the dtype's eps (a lower bound on the scaled smallest singular
value), so they are computed here in Python: early steps (large weight c) take a QR of
[sqrt(c) u; I], later ones the cheaper Cholesky of c uᴴu + I; once the weights have settled,
plain Halley steps run until the iterate stops moving (at most ``max_iterations`` steps in
all), and one Newton-Schulz step polishes the result. Every loop is a scan, so unlike
JAX's (a while loop) it is differentiable in reverse mode too.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from plax.core.trace import concrete_or_error

__all__ = ["qdwh"]

_QR_ABOVE = 100.0  # weights c above this use the QR form (the Cholesky one loses accuracy)


def _weights(eps: float, max_iterations: int):
    """The (a, b, c) of each weighted step while the lower bound l on the smallest singular
    value of the scaled iterate is not yet within 5 eps of 1."""
    steps, lower, tol = [], eps, 5 * eps
    while lower + tol < 1 and len(steps) < max_iterations:
        l2 = lower * lower
        d = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        root = math.sqrt(1 + d)
        a = root + math.sqrt(2 - d + 2 * (2 - l2) / (l2 * root))
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        lower = lower * (a + b * l2) / (1 + c * l2)
        steps.append((a, b, c))
    return steps


def _within(x, rows, cols, fill):
    """``x`` where (row < rows, col < cols), ``fill`` elsewhere (the padding of a matrix
    whose true shape is rows x cols; None means the whole dimension)."""
    import plax.numpy as jnp
    from plax import lax
    keep = None
    for axis, size in ((0, rows), (1, cols)):
        if size is not None:
            inside = lax.broadcasted_iota(np.int32, x.shape, axis) < size
            keep = inside if keep is None else keep & inside
    return x if keep is None else jnp.where(keep, x, fill)


def _qr_step(u, rows, cols, weights):
    """u ↦ (b/c) u + (a - b/c)/sqrt(c) · q1 q2ᴴ for [sqrt(c) u; I] = [q1; q2] r."""
    import plax.numpy as jnp
    from plax.lax.linalg.qr import qr
    keep, mix, root = weights
    big_m, big_n = u.shape
    eye = jnp.eye(big_n, dtype=u.dtype)
    # Padding rows of u are zero, so they give zero rows of q wherever they sit.
    q, _ = qr(jnp.concatenate([root * u, eye], axis=0), full_matrices=False)
    q1 = _within(q[:big_m], rows, cols, 0)
    q2 = _within(q[big_m:], cols, cols, 0)
    return keep * u + mix * jnp.matmul(q1, q2.conj().T, precision="highest")


def _cholesky_step(u, rows, cols, weights):
    """u ↦ (b/c) u + (a - b/c) · u (c uᴴu + I)⁻¹, through the Cholesky factor of c uᴴu + I."""
    import plax.numpy as jnp
    from plax.lax.linalg.cholesky import cholesky
    from plax.lax.linalg.triangular import triangular_solve
    keep, mix, c = weights
    big_n = u.shape[1]
    eye = jnp.eye(big_n, dtype=u.dtype)
    gram = c * jnp.matmul(u.conj().T, u, precision="highest") + eye
    gram = _within(gram, cols, cols, eye)  # keep the padded corner positive definite
    low = cholesky(gram, symmetrize_input=False)
    # z = u (L Lᴴ)⁻¹, as (L Lᴴ)⁻ᴴ uᴴ = L⁻ᴴ L⁻¹ uᴴ (the Gram matrix is Hermitian).
    half = triangular_solve(low, u.conj().T, left_side=True, lower=True, transpose_a=False,
                            conjugate_a=False)
    z = triangular_solve(low, half, left_side=True, lower=True, transpose_a=True,
                         conjugate_a=True).conj().T
    return keep * u + mix * z


def _iterate(x, rows, cols, max_iterations, eps):
    import plax.numpy as jnp
    from plax import lax
    from plax.higher_order.loops import fori_loop
    from plax.higher_order.scan import scan
    dtype = x.dtype
    real = np.finfo(dtype).dtype
    norm1 = jnp.max(jnp.sum(jnp.abs(x), axis=0))
    norm_inf = jnp.max(jnp.sum(jnp.abs(x), axis=1))
    # 1 / sqrt(‖x‖₁ ‖x‖∞) ≤ 1 / ‖x‖₂: the scaled iterate has singular values at most 1.
    scale = jnp.where(norm1 == 0, jnp.ones((), real), lax.rsqrt(norm1) * lax.rsqrt(norm_inf))
    u = x * scale.astype(dtype)
    tol = (5 * eps) ** (1 / 3)

    steps = _weights(eps, max_iterations)
    qr_steps = [(b / c, (a - b / c) / math.sqrt(c), math.sqrt(c)) for a, b, c in steps
                if c > _QR_ABOVE]
    chol_steps = [(b / c, a - b / c, c) for a, b, c in steps if c <= _QR_ABOVE]

    def run(u, table, step, watch):
        if not table:
            return u, jnp.asarray(True)
        weights = jnp.asarray(np.asarray(table, np.float64)).astype(dtype)

        def body(k, carry):
            u, _ = carry
            new = step(u, rows, cols, tuple(weights[k, i] for i in range(3)))
            moving = (jnp.linalg.norm(new - u) > tol) if watch else jnp.asarray(True)
            return new, moving
        return fori_loop(0, len(table), body, (u, jnp.asarray(True)))

    u, _ = run(u, qr_steps, _qr_step, False)
    u, moving = run(u, chol_steps, _cholesky_step, True)

    halley = tuple(np.asarray(w, dtype) for w in (1 / 3, 3 - 1 / 3, 3))  # a, b, c = 3, 1, 3

    # Plain Halley steps while the iterate still moves, up to max_iterations steps in all: a
    # scan over the steps left whose body skips once settled (so reverse mode works, where
    # a while loop's would not), counting the steps taken.
    def halley_step(state, _):
        k, u, moving = state

        def advance(u):
            new = _cholesky_step(u, rows, cols, halley)
            return new, jnp.linalg.norm(new - u) > tol

        u, still = lax.cond(moving, advance, lambda u: (u, jnp.asarray(False)), u)
        return (k + moving.astype(np.int32), u, still), None

    done = len(qr_steps) + len(chol_steps)
    state = (jnp.asarray(done, np.int32), u, moving)
    if max_iterations > done:
        state, _ = scan(halley_step, state, None, length=max_iterations - done)
    num_iters, u, moving = state
    # One Newton-Schulz step: u (3 I - uᴴu) / 2.
    u = 1.5 * u - 0.5 * jnp.matmul(u, jnp.matmul(u.conj().T, u, precision="highest"),
                                   precision="highest")
    h = jnp.matmul(u.conj().T, x, precision="highest")
    return u, (h + h.conj().T) / 2, num_iters, jnp.logical_not(moving)


def qdwh(x, *, is_hermitian: bool = False, max_iterations: int | None = None,
         eps: float | None = None, dynamic_shape: tuple[int, int] | None = None):
    """``(u, h, num_iters, is_converged)``: the polar decomposition ``x = u @ h`` of a
    full-rank M x N matrix (M >= N) by the QR-based dynamically weighted Halley iteration:
    ``u`` with orthonormal columns, ``h`` Hermitian positive semi-definite, the number of
    steps taken and whether the iterate settled (‖uₖ - uₖ₋₁‖ below (5 eps)^(1/3)) within
    ``max_iterations`` (default 10) steps. ``dynamic_shape=(m, n)`` treats ``x`` as an m x n
    matrix padded with zeros. ``is_hermitian`` is accepted and unused, as in JAX. One
    matrix at a time (vmap it for batches). Differentiable (JAX's is not in reverse mode)."""
    import plax.numpy as jnp
    concrete_or_error(bool, is_hermitian, "The `is_hermitian` argument must be statically "
                      "specified to use `qdwh` within JAX transformations.")
    max_iterations = 10 if max_iterations is None else int(concrete_or_error(
        int, max_iterations, "The `max_iterations` argument must be statically specified to "
        "use `qdwh` within JAX transformations."))
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"qdwh takes one matrix (rank 2), got shape {x.shape}; use "
                         "jax.vmap(qdwh) for a batch of matrices.")
    if x.shape[0] < x.shape[1]:
        raise ValueError(f"The input matrix of shape M x N must have M >= N; got {x.shape}. "
                         "Decompose the adjoint of a wide matrix instead.")
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    eps = float(np.finfo(x.dtype).eps) if eps is None else float(eps)
    return _compiled()(x, dynamic_shape, max_iterations=max_iterations, eps=eps)


def _qdwh(x, dynamic_shape, *, max_iterations, eps):
    rows, cols = (None, None) if dynamic_shape is None else dynamic_shape
    if dynamic_shape is not None:
        x = _within(x, rows, cols, 0)
    return _iterate(x, rows, cols, max_iterations, eps)


@functools.cache
def _compiled():
    """jit(_qdwh), built on first use (plax.api is not importable while plax.lax loads)."""
    from plax.api.jit import jit
    return jit(_qdwh, static_argnames=("max_iterations", "eps"))
