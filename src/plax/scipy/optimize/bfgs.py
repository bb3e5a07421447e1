"""BFGS (Nocedal & Wright, Numerical Optimization, algorithm 6.1): a quasi-Newton method
carrying a dense estimate of the inverse Hessian, stepping along -H g with the strong-Wolfe
line search, as JAX 0.10.2's ``minimize(method="BFGS")`` does (the same iterates and counts).
The iteration is one ``lax.while_loop``: it runs under jit and vmap."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.autodiff import value_and_grad
from plax.scipy.optimize.line_search import line_search

__all__ = ["BFGSState", "minimize_bfgs"]


class BFGSState(NamedTuple):
    """Where BFGS stopped: ``converged`` (the gradient's norm fell below gtol), ``failed``
    (the last line search found no Wolfe step), ``k`` iterations, ``nfev``/``ngev``
    evaluations, ``x_k``/``f_k``/``g_k`` the last iterate, its value and gradient, ``H_k``
    the inverse-Hessian estimate, and ``status``: 0 converged, 1 out of iterations,
    2 + the line search's status when it failed, -1 otherwise."""
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    f_before: Any       # f at the previous iterate (the line search's first-step guess)
    status: Any
    line_search_status: Any


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def minimize_bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    """Minimize ``fun`` (a scalar function of the vector ``x0``'s shape) from ``x0`` until
    the ``norm``-norm of the gradient is below ``gtol``, for at most ``maxiter`` iterations
    (200 per variable by default), each line search taking at most ``line_search_maxiter``
    doubling steps."""
    if maxiter is None:
        maxiter = np.size(x0) * 200
    n = x0.shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    start = BFGSState(converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=False, k=0,
                      nfev=1, ngev=1, x_k=x0, f_k=f_0, g_k=g_0, H_k=jnp.eye(n, dtype=x0.dtype),
                      f_before=f_0 + jnp.linalg.norm(g_0) / 2, status=0, line_search_status=0)

    def going(s: BFGSState):
        return ~s.converged & ~s.failed & (s.k < maxiter)

    def iterate(s: BFGSState) -> BFGSState:
        direction = -_dot(s.H_k, s.g_k)
        ls = line_search(fun, s.x_k, direction, old_fval=s.f_k, old_old_fval=s.f_before,
                         gfk=s.g_k, maxiter=line_search_maxiter)
        step = ls.a_k * direction
        change = ls.g_k - s.g_k
        rho = jnp.reciprocal(_dot(change, step))
        # H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T, kept when y.s is 0
        left = jnp.eye(n, dtype=rho.dtype) - rho * jnp.outer(step, change)
        H = _dot(_dot(left, s.H_k), left.T) + (rho * step)[:, None] * step[None, :]
        return BFGSState(converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, failed=ls.failed,
                         k=s.k + 1, nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev,
                         x_k=s.x_k + step, f_k=ls.f_k, g_k=ls.g_k,
                         H_k=jnp.where(jnp.isfinite(rho), H, s.H_k), f_before=s.f_k,
                         status=s.status, line_search_status=ls.status)

    s = lax.while_loop(going, iterate, start)
    status = jnp.where(s.converged, 0,
                       jnp.where(s.k == maxiter, 1,
                                 jnp.where(s.failed, 2 + s.line_search_status, -1)))
    return s._replace(status=status)
