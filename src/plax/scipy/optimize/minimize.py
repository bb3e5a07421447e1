"""minimize: SciPy's entry point to the optimizers, with gradients from autodiff, returning
OptimizeResults (as JAX 0.10.2's jax.scipy.optimize.minimize)."""
from __future__ import annotations

from typing import Any, NamedTuple

from plax import numpy as jnp
from plax.numpy.util import check_arraylike
from plax.scipy.optimize.bfgs import minimize_bfgs
from plax.scipy.optimize.lbfgs import minimize_lbfgs

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """What ``minimize`` found: the solution ``x``, whether it ``success``-fully converged,
    the solver's ``status`` code (for BFGS: 0 converged, 1 out of iterations, 3 a line
    search's zoom gave up, 5 a line search ran out of steps, -1 otherwise), the value ``fun``
    and gradient ``jac`` there, ``hess_inv`` the inverse-Hessian estimate (None for
    L-BFGS), and the counts ``nfev``, ``njev`` (gradient evaluations) and ``nit``."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimize ``fun(x, *args)`` (a real scalar) over the vector ``x`` starting from ``x0``
    (shape (n,)), its gradient taken by autodiff. ``method`` is "BFGS" or
    "l-bfgs-experimental-do-not-rely-on-this" (any case). ``options`` are the solver's
    keywords: for BFGS ``maxiter``, ``norm``, ``gtol``, ``line_search_maxiter``; for L-BFGS
    also ``maxcor``, ``ftol``, ``maxfun``, ``maxgrad``, ``maxls``. As in JAX, ``tol`` is
    accepted and not used: set ``options["gtol"]``. Runs under jit and vmap."""
    del tol
    options = {} if options is None else options
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, got "
                        f"{args!r}: pass args=({args!r},) for a single extra argument.")
    check_arraylike("minimize", x0)
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize needs x0 of shape (n,), a vector; got shape {x0.shape}: "
                         "flatten the variables (x0.ravel()) and reshape them inside fun.")

    def objective(x):
        return fun(x, *args)

    name = method.lower()
    if name == "bfgs":
        r = minimize_bfgs(objective, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & ~r.failed, status=r.status,
                               fun=r.f_k, jac=r.g_k, hess_inv=r.H_k, nfev=r.nfev,
                               njev=r.ngev, nit=r.k)
    if name == "l-bfgs-experimental-do-not-rely-on-this":
        r = minimize_lbfgs(objective, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & ~r.failed, status=r.status,
                               fun=r.f_k, jac=r.g_k, hess_inv=None, nfev=r.nfev,
                               njev=r.ngev, nit=r.k)
    raise ValueError(f"Method {method} not recognized: use 'BFGS' or "
                     "'l-bfgs-experimental-do-not-rely-on-this'.")
