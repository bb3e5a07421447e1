"""L-BFGS (Nocedal & Wright, Numerical Optimization, algorithm 7.5): BFGS with the inverse
Hessian kept implicitly as the last ``maxcor`` step and gradient-change pairs, applied by the
two-loop recursion; real or complex variables (Sorber, Van Barel and De Lathauwer, 2012).
As JAX 0.10.2's ``minimize(method="l-bfgs-experimental-do-not-rely-on-this")``: the same
iterates, counts and statuses; one ``lax.while_loop``, so it runs under jit and vmap."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.autodiff import value_and_grad
from plax.core import dtypes
from plax.scipy.optimize.line_search import line_search

__all__ = ["LBFGSState", "minimize_lbfgs"]


class LBFGSState(NamedTuple):
    """Where L-BFGS stopped: ``converged`` (gradient norm below gtol), ``failed`` (stopped
    otherwise), ``k`` iterations, ``nfev``/``ngev`` evaluations, the last iterate ``x_k``,
    ``f_k``, ``g_k``, the history (oldest first, zeros until filled), the scale ``gamma``
    of the initial inverse Hessian, and ``status``: 0 nominal, 1 out of iterations, 2 out of
    function evaluations, 3 out of gradient evaluations, 4 too little decrease (ftol),
    5 the line search failed; ``ls_status`` the last line search's."""
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    s_history: Any
    y_history: Any
    rho_history: Any
    gamma: Any
    status: Any
    ls_status: Any


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def _push(history, new):
    """``history`` with its oldest entry dropped and ``new`` appended."""
    return jnp.concatenate([history[1:], jnp.expand_dims(new, 0).astype(history.dtype)])


def _direction(s: LBFGSState):
    """-H g by the two-loop recursion over the filled part of the history (newest first,
    then oldest first), starting from H0 = gamma I."""
    size = s.rho_history.shape[0]
    used = jnp.minimum(s.k, size)
    dtype = s.rho_history.dtype

    def newest_first(j, carry):
        q, alphas = carry
        i = size - 1 - j
        alpha = s.rho_history[i] * _dot(jnp.conj(s.s_history[i]), q).real.astype(dtype)
        return q - alpha * jnp.conj(s.y_history[i]), alphas.at[i].set(alpha)

    q, alphas = lax.fori_loop(0, used, newest_first,
                              (-jnp.conj(s.g_k), jnp.zeros_like(s.rho_history)))
    q = s.gamma * q

    def oldest_first(j, q):
        i = size - used + j
        beta = s.rho_history[i] * _dot(s.y_history[i], q).real.astype(dtype)
        return q + (alphas[i] - beta) * s.s_history[i]

    return lax.fori_loop(0, used, oldest_first, q)


def minimize_lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10, ftol=2.220446049250313e-09,
                   gtol=1e-05, maxfun=None, maxgrad=None, maxls=20):
    """Minimize ``fun`` from ``x0`` until the gradient's ``norm``-norm is below ``gtol``, the
    decrease of one step is below ``ftol``, a line search (of at most ``maxls`` steps) fails,
    or ``maxiter`` iterations / ``maxfun`` / ``maxgrad`` evaluations are spent (200
    iterations per variable when none of the three is given); ``maxcor`` pairs are kept."""
    n = len(x0)
    dtype = dtypes.dtype(x0)
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = n * 200
    maxiter, maxfun, maxgrad = (np.inf if m is None else m for m in (maxiter, maxfun, maxgrad))
    f_0, g_0 = value_and_grad(fun)(x0)
    start = LBFGSState(converged=jnp.array(False), failed=jnp.array(False), k=0, nfev=1,
                       ngev=1, x_k=x0, f_k=f_0, g_k=g_0,
                       s_history=jnp.zeros((maxcor, n), dtype=dtype),
                       y_history=jnp.zeros((maxcor, n), dtype=dtype),
                       rho_history=jnp.zeros((maxcor,), dtype=dtype), gamma=1.0, status=0,
                       ls_status=0)

    def iterate(s: LBFGSState) -> LBFGSState:
        direction = _direction(s)
        ls = line_search(fun, s.x_k, direction, old_fval=s.f_k, gfk=s.g_k, maxiter=maxls)
        step = jnp.asarray(ls.a_k).astype(direction.dtype) * direction
        change = ls.g_k - s.g_k
        curvature = jnp.real(_dot(change, step))
        gamma = curvature / jnp.real(_dot(jnp.conj(change), change))
        # the last matching reason wins: a failed line search over the counts over ftol
        status = jnp.where(ls.failed, 5,
                           jnp.where(s.k >= maxiter, 1,
                                     jnp.where(s.nfev >= maxfun, 2,
                                               jnp.where(s.ngev >= maxgrad, 3,
                                                         jnp.where(s.f_k - ls.f_k < ftol, 4,
                                                                   0)))))
        converged = jnp.linalg.norm(ls.g_k, ord=norm) < gtol
        return LBFGSState(
            converged=converged, failed=(status > 0) & ~converged, k=s.k + 1,
            nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev,
            x_k=(s.x_k + step).astype(s.x_k.dtype), f_k=ls.f_k.astype(s.f_k.dtype),
            g_k=ls.g_k.astype(s.g_k.dtype), s_history=_push(s.s_history, step),
            y_history=_push(s.y_history, change),
            rho_history=_push(s.rho_history, jnp.reciprocal(curvature).astype(change.dtype)),
            gamma=gamma.astype(s.g_k.dtype), status=jnp.where(converged, 0, status),
            ls_status=ls.status)

    return lax.while_loop(lambda s: ~s.converged & ~s.failed, iterate, start)
