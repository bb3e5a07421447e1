"""The inexact line search BFGS and L-BFGS step with: find a step along a descent direction
satisfying the strong Wolfe conditions (Nocedal & Wright, Numerical Optimization, algorithms
3.5 and 3.6), by doubling the trial step until the minimum is bracketed, then zooming in on
the bracket with cubic, quadratic or bisection steps.

Every decision (the first trial step, the interpolation guards, when a zoom gives up, the
counts) follows JAX 0.10.2's line search, so the optimizers built on it take JAX's iterates.
Both loops are ``lax.while_loop``s of ``jnp.where`` updates: the search runs under jit and vmap.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.autodiff import value_and_grad
from plax.core import dtypes
from plax.numpy.util import promote_dtypes_inexact

__all__ = ["LineSearchResult", "line_search"]

_ZOOM_MAX_STEPS = 30       # a zoom gives up after this many trial steps
_CUBIC_MARGIN = 0.2        # an interpolated step this close (in bracket widths) to either end
_QUADRATIC_MARGIN = 0.1    # of the bracket is not trusted: the next fallback is used


class LineSearchResult(NamedTuple):
    """The step taken: ``failed`` (no step met the Wolfe conditions), ``nit`` doubling steps,
    ``nfev``/``ngev`` evaluations, ``a_k`` the step, ``f_k``/``g_k`` the value and gradient
    there, ``status`` 0 (found), 1 (a zoom gave up) or 3 (out of doubling steps)."""
    failed: Any
    nit: Any
    nfev: Any
    ngev: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


class _Trial(NamedTuple):
    """A trial step and phi (the objective along the line), its slope and gradient there."""
    a: Any
    phi: Any
    dphi: Any


def _where(pred, new, old):
    """``new`` where ``pred``, field by field (NamedTuples of matching fields)."""
    return type(old)(*(jnp.where(pred, n, o) for n, o in zip(new, old)))


def _cubic_minimizer(lo: _Trial, hi: _Trial, rec: _Trial):
    """The minimizer of the cubic through (lo.a, lo.phi) with slope lo.dphi, (hi.a, hi.phi)
    and (rec.a, rec.phi); NaN when there is none (the bracket guard then rejects it)."""
    db, dc = hi.a - lo.a, rec.a - lo.a
    rb = hi.phi - lo.phi - lo.dphi * db
    rc = rec.phi - lo.phi - lo.dphi * dc
    denom = (db * dc) ** 2 * (db - dc)
    cubic = (dc ** 2 * rb - db ** 2 * rc) / denom
    square = (-dc ** 3 * rb + db ** 3 * rc) / denom
    return lo.a + (-square + jnp.sqrt(square * square - 3.0 * cubic * lo.dphi)) / (3.0 * cubic)


def _quadratic_minimizer(lo: _Trial, hi: _Trial):
    """The minimizer of the parabola through (lo.a, lo.phi) with slope lo.dphi and
    (hi.a, hi.phi)."""
    db = hi.a - lo.a
    curvature = (hi.phi - lo.phi - lo.dphi * db) / db ** 2
    return lo.a - lo.dphi / (2.0 * curvature)


class _Zoom(NamedTuple):
    done: Any
    failed: Any
    j: Any
    lo: _Trial
    hi: _Trial
    rec: _Trial        # the previous hi (or lo), the cubic's third point
    star: _Trial
    g_star: Any
    nfev: Any


def _zoom(evaluate, too_high, flat_enough, lo: _Trial, hi: _Trial, g_0, skip):
    """Shrink the bracket [lo.a, hi.a] (in either order) to a step meeting both Wolfe
    conditions; ``skip`` runs no step. Gives up when the bracket is narrower than 1e-5
    (1e-10 in 64-bit) or after 30 steps; the star it returns is then (1, lo.phi, lo.dphi, g_0)."""
    tiny_bracket = 1e-5 if dtypes.finfo(lo.a.dtype).bits < 64 else 1e-10
    start = _Zoom(done=False, failed=False, j=0, lo=lo, hi=hi,
                  rec=_Trial((lo.a + hi.a) / 2.0, (lo.phi + hi.phi) / 2.0, lo.dphi),
                  star=_Trial(jnp.ones_like(lo.a), lo.phi, lo.dphi), g_star=g_0, nfev=0)

    def step(z: _Zoom) -> _Zoom:
        width = z.hi.a - z.lo.a
        left, right = jnp.minimum(z.hi.a, z.lo.a), jnp.maximum(z.hi.a, z.lo.a)
        failed = z.failed | (width <= tiny_bracket)
        cubic = _cubic_minimizer(z.lo, z.hi, z.rec)
        use_cubic = ((z.j > 0) & (cubic > left + _CUBIC_MARGIN * width)
                     & (cubic < right - _CUBIC_MARGIN * width))
        quadratic = _quadratic_minimizer(z.lo, z.hi)
        use_quadratic = (~use_cubic & (quadratic > left + _QUADRATIC_MARGIN * width)
                         & (quadratic < right - _QUADRATIC_MARGIN * width))
        a = jnp.where(use_cubic, cubic,
                      jnp.where(use_quadratic, quadratic, (z.lo.a + z.hi.a) / 2.0))
        phi, dphi, g = evaluate(a)
        trial = _Trial(a, phi.astype(z.lo.phi.dtype), dphi.astype(z.lo.dphi.dtype))
        g = g.astype(z.g_star.dtype)

        new_hi = too_high(a, trial.phi) | (trial.phi >= z.lo.phi)
        found = flat_enough(trial.dphi) & ~new_hi
        new_lo = ~new_hi & ~found
        flip = new_lo & (trial.dphi * (z.hi.a - z.lo.a) >= 0.0)
        # too high: it closes the bracket; past the minimum: the old lo closes it instead;
        # either way it becomes the new lo. The cubic's third point is the end dropped.
        hi_ = _where(new_hi, trial, _where(flip, z.lo, z.hi))
        rec = _where(new_hi | flip, z.hi, _where(new_lo, z.lo, z.rec))
        lo_ = _where(new_lo, trial, z.lo)
        return _Zoom(done=z.done | found, failed=failed | (z.j + 1 >= _ZOOM_MAX_STEPS),
                     j=z.j + 1, lo=lo_, hi=hi_, rec=rec,
                     star=_where(found, trial, z.star), g_star=jnp.where(found, g, z.g_star),
                     nfev=z.nfev + 1)

    return lax.while_loop(lambda z: ~z.done & ~skip & ~z.failed, step, start)


class _Search(NamedTuple):
    done: Any
    failed: Any
    i: Any
    prev: _Trial
    star: _Trial
    g_star: Any
    nfev: Any


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20):
    """A step ``a`` along ``pk`` from ``xk`` meeting the strong Wolfe conditions
    f(xk + a pk) <= f(xk) + c1 a f'(xk).pk and |f'(xk + a pk).pk| <= c2 |f'(xk).pk|.

    ``old_fval``/``gfk`` are f and its gradient at ``xk`` (computed when absent); with
    ``old_old_fval`` (f at the previous iterate) the first trial step is the one that would
    repeat the last decrease, capped at 1, else 1. Trial steps double up to ``maxiter``."""
    xk, pk = promote_dtypes_inexact(xk, pk)

    def evaluate(a):
        value, grad = value_and_grad(f)(xk + jnp.asarray(a, dtype=pk.dtype) * pk)
        return value, jnp.real(jnp.dot(grad, pk, precision=lax.Precision.HIGHEST)), grad

    counted = old_fval is None or gfk is None
    if counted:
        phi_0, dphi_0, gfk = evaluate(0)
    else:
        phi_0 = old_fval
        dphi_0 = jnp.real(jnp.dot(gfk, pk, precision=lax.Precision.HIGHEST))
    if old_old_fval is None:
        first_step = 1
    else:
        repeat_decrease = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        first_step = jnp.where(repeat_decrease > 1, 1.0, repeat_decrease)

    def too_high(a, phi):  # the sufficient-decrease (first Wolfe) condition fails
        return phi > phi_0 + c1 * a * dphi_0

    def flat_enough(dphi):  # the curvature (second, strong Wolfe) condition holds
        return jnp.abs(dphi) <= -c2 * dphi_0

    start = _Search(done=jnp.array(False), failed=jnp.array(False), i=1,
                    prev=_Trial(0.0, phi_0, dphi_0), star=_Trial(0.0, phi_0, dphi_0),
                    g_star=gfk, nfev=int(counted))

    def step(s: _Search) -> _Search:
        a = jnp.where(s.i == 1, first_step, s.prev.a * 2.0)
        phi, dphi, g = evaluate(a)
        trial = _Trial(a, phi, dphi)
        overshot = too_high(a, phi) | ((phi >= s.prev.phi) & (s.i > 1))
        accept = flat_enough(dphi) & ~overshot
        rising = (dphi >= 0.0) & ~overshot & ~accept
        # one zoom: bracketed from the previous step (overshot) or back to it (rising)
        z = _zoom(evaluate, too_high, flat_enough, _where(overshot, s.prev, trial),
                  _where(overshot, trial, s.prev), gfk, ~(overshot | rising))
        zoomed = overshot | rising
        return _Search(done=s.done | zoomed | accept, failed=s.failed | (zoomed & z.failed),
                       i=s.i + 1, prev=trial,
                       star=_where(accept, trial, _where(zoomed, z.star, s.star)),
                       g_star=jnp.where(accept, g, jnp.where(zoomed, z.g_star, s.g_star)),
                       nfev=s.nfev + 1 + z.nfev)

    s = lax.while_loop(lambda s: ~s.done & (s.i <= maxiter) & ~s.failed, step, start)
    status = jnp.where(s.failed, 1, jnp.where(s.i > maxiter, 3, 0))
    a_k = jnp.asarray(s.star.a)
    if dtypes.finfo(a_k.dtype).bits != 64:
        # (below 64 bits, a vanishing step would stall the optimizer: keep it at 1e-8)
        a_k = jnp.where(jnp.abs(a_k) < 1e-8, jnp.sign(a_k) * 1e-8, a_k)
    return LineSearchResult(failed=s.failed | ~s.done, nit=s.i - 1, nfev=s.nfev, ngev=s.nfev,
                            a_k=a_k, f_k=s.star.phi, g_k=s.g_star, status=status)
