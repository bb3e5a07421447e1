"""plax.experimental.ode: ``odeint``, an adaptive Dormand-Prince (dopri5) integrator, as
``jax.experimental.ode``.

The solution is computed with a ``lax.scan`` over the requested times, each entry a
``lax.while_loop`` of adaptive Runge-Kutta steps; values at the requested times come from the
quartic interpolant of the last accepted step. Reverse-mode derivatives (with respect to the
initial state, the times and the extra arguments) use the adjoint method: a ``custom_vjp``
whose backward pass integrates the augmented system backwards in time with ``odeint`` itself,
so it is differentiable again. Forward mode is refused, as JAX's is (a custom_vjp).
"""
from __future__ import annotations

import builtins
import operator
from functools import partial
from typing import Callable

import numpy as np

import plax
import plax.numpy as jnp
from plax import api_util, lax
from plax.core.avals import is_valid_value
from plax.core.caches import WeakKeyCache
from plax.core.trace import EvalTrace, current_trace, get_aval
from plax.custom_derivatives import closure_convert
from plax.extend import linear_util as lu
from plax.flatten_util import ravel_pytree
from plax.numpy.util import promote_dtypes_inexact
from plax.tree_util import tree_flatten, tree_leaves, tree_map

__all__ = ["odeint", "ravel_first_arg", "ravel_first_arg_", "interp_fit_dopri",
           "fit_4th_order_polynomial", "initial_step_size", "runge_kutta_step", "abs2",
           "mean_error_ratio", "optimal_step_size", "ravel_pytree", "tree_leaves", "tree_map",
           "promote_dtypes_inexact", "map", "zip"]

map = api_util.safe_map


def zip(*iterables) -> list:  # noqa: A001 - the module's public name, as JAX's
    """``list(zip(*iterables))``, raising ValueError when the lengths differ."""
    return list(builtins.zip(*iterables, strict=True))


# --- the Dormand-Prince 5(4) tableau --------------------------------------------------------
# Stage times, stage weights (row i builds the input of stage i + 1 from the slopes so far,
# padded to seven columns), the fifth-order solution, the difference between the fifth- and
# fourth-order solutions (the error estimate), and the weights giving the state at mid-step
# for the interpolant.
_NODES = np.array([1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1., 0.])
_STAGE_WEIGHTS = np.array([
    [1 / 5, 0, 0, 0, 0, 0, 0],
    [3 / 40, 9 / 40, 0, 0, 0, 0, 0],
    [44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]])
_SOLUTION_WEIGHTS = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0])
_ERROR_WEIGHTS = np.array([
    35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
    -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60])
_MID_WEIGHTS = np.array([
    6025192743 / 30085553152, 0, 51252292925 / 65400821598, -2691868925 / 45128329728,
    187940372067 / 1594534317056, -1776094331 / 19743644256, 11237099 / 235043384]) / 2


def ravel_first_arg(f: Callable, unravel, debug_info=None):
    """``f(y, *args)`` as a function of a flat ``y`` (``unravel`` rebuilds the pytree) returning
    its result raveled."""
    if debug_info is None:
        debug_info = api_util.debug_info("odeint", f, (), {})
    return ravel_first_arg_(lu.wrap_init(f, debug_info=debug_info), unravel).call_wrapped


@lu.transformation2
def ravel_first_arg_(f, unravel, y_flat, *args):
    """The transformation under ``ravel_first_arg``: unravel the first argument, ravel the
    result."""
    return ravel_pytree(f(unravel(y_flat), *args))[0]


def fit_4th_order_polynomial(y0, y1, y_mid, dy0, dy1, dt):
    """The coefficients ``(a, b, c, d, e)`` (highest power first) of the quartic in the
    relative time ``s`` in [0, 1] with the given values at s = 0, 1/2, 1 and slopes ``dy0``,
    ``dy1`` (per unit time, over a step of length ``dt``) at its ends."""
    dt = dt.astype(y0.dtype)
    a = -2. * dt * dy0 + 2. * dt * dy1 - 8. * y0 - 8. * y1 + 16. * y_mid
    b = 5. * dt * dy0 - 3. * dt * dy1 + 18. * y0 + 14. * y1 - 32. * y_mid
    c = -4. * dt * dy0 + dt * dy1 - 11. * y0 - 5. * y1 + 16. * y_mid
    return a, b, c, dt * dy0, y0


def interp_fit_dopri(y0, y1, k, dt):
    """The quartic interpolant of one dopri5 step from ``y0`` to ``y1`` (stage slopes ``k``,
    step ``dt``), as a ``(5, n)`` array of coefficients for ``jnp.polyval``."""
    y_mid = y0 + dt.astype(y0.dtype) * jnp.dot(jnp.asarray(_MID_WEIGHTS, y0.dtype), k)
    return jnp.asarray(fit_4th_order_polynomial(y0, y1, y_mid, k[0], k[-1], dt))


def initial_step_size(fun, t0, y0, order, rtol, atol, f0):
    """A first step for a method of the given ``order`` from the state's and the slope's scale
    (Hairer, Norsett & Wanner, Solving ODEs I, section II.4)."""
    y0, f0 = promote_dtypes_inexact(y0, f0)
    dtype = y0.dtype
    scale = (atol + jnp.abs(y0) * rtol).astype(dtype)
    d0 = jnp.linalg.norm(y0 / scale)
    d1 = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = fun(y0 + h0.astype(dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1. / (order + 1.)))
    return jnp.minimum(100. * h0, h1)


def runge_kutta_step(func, y0, f0, t0, dt):
    """One dopri5 step of ``dt`` from ``(t0, y0)`` where ``func(y0, t0) = f0``: returns the new
    state, its slope, the local error estimate and the seven stage slopes ``k`` (7, n)."""
    dtype = f0.dtype
    nodes = jnp.asarray(_NODES, dt.dtype)
    stage_weights = jnp.asarray(_STAGE_WEIGHTS, dtype)
    h = dt.astype(dtype)

    def stage(i, k):
        y_i = y0 + h * jnp.dot(stage_weights[i - 1], k)
        return k.at[i].set(func(y_i, t0 + dt * nodes[i - 1]))

    k = jnp.zeros((7, f0.shape[0]), dtype).at[0].set(f0)
    k = lax.fori_loop(1, 7, stage, k)
    y1 = h * jnp.dot(jnp.asarray(_SOLUTION_WEIGHTS, dtype), k) + y0
    y1_error = h * jnp.dot(jnp.asarray(_ERROR_WEIGHTS, dtype), k)
    return y1, k[-1], y1_error, k


def abs2(x):
    """``|x|**2`` (for complex values the sum of the squared parts)."""
    if jnp.iscomplexobj(x):
        return x.real ** 2 + x.imag ** 2
    return x ** 2


def mean_error_ratio(error_estimate, rtol, atol, y0, y1):
    """The root-mean-square of the error estimate over the tolerance ``atol + rtol * |y|``
    (the larger of the step's two ends); a step is accepted when it is at most 1."""
    tolerance = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    return jnp.sqrt(jnp.mean(abs2(error_estimate / tolerance.astype(error_estimate.dtype))))


def optimal_step_size(last_step, mean_error_ratio, safety=0.9, ifactor=10.0, dfactor=0.2,
                      order=5.0):
    """The next step size from the last one and its error ratio: scaled by
    ``safety * ratio**(-1/order)``, never grown beyond ``ifactor``, never shrunk below
    ``dfactor`` (nor at all after an accepted step)."""
    shrink_floor = jnp.where(mean_error_ratio < 1, 1.0, dfactor)
    factor = jnp.minimum(ifactor,
                         jnp.maximum(mean_error_ratio ** (-1.0 / order) * safety, shrink_floor))
    return jnp.where(mean_error_ratio == 0, last_step * ifactor, last_step * factor)


# --- the public entry -----------------------------------------------------------------------
def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=jnp.inf, hmax=jnp.inf):
    """Solve ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0`` with adaptive dopri5 steps.

    ``y0`` is an array or a pytree of arrays; ``t`` a float array of increasing times. Returns
    the solution at each time in ``t``, shaped as ``y0`` with a leading axis of ``len(t)``.
    ``rtol``/``atol`` bound the local error, ``mxstep`` the number of steps taken towards each
    time (the integration stops there), ``hmax`` the step size. Reverse-mode differentiable
    with respect to ``y0``, ``t`` and ``args`` (adjoint method).
    """
    for arg in tree_leaves(args):
        if not is_valid_value(arg):
            raise TypeError("The contents of odeint *args must be arrays or scalars, but got "
                            f"{arg}.")
    t_dtype = getattr(t, "dtype", None)
    if t_dtype is None or not jnp.issubdtype(t_dtype, jnp.floating):
        raise TypeError(f"t must be an array of floats, but got {t}.")
    if np.ndim(t) != 1:
        raise ValueError(f"odeint: t must be a 1-D array of times, but got shape {np.shape(t)}.")
    converted, consts = _converted(func, y0, t[0], *args)
    return _odeint_wrapper(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


_conversions = WeakKeyCache("odeint closure_convert")


def _converted(func, y0, t0, *args):
    """closure_convert of ``func``; an eager call keeps it per (function, argument types), so
    repeated calls reuse one jitted solver (as JAX's cached conversion). Under a trace the
    function may close over that trace's values, so it is converted afresh."""
    eager = type(current_trace()) is EvalTrace
    if eager:
        leaves, tree = tree_flatten((y0, t0, *args))
        key = (tree, tuple(get_aval(x) for x in leaves))
        try:
            hit = _conversions.get(func, key)
        except TypeError:  # not weakly referenceable
            eager = False
        else:
            if hit is not None:
                return hit, []
    converted, consts = closure_convert(func, y0, t0, *args)
    if eager and not consts:
        _conversions.put(func, key, converted)
    return converted, consts


@partial(plax.jit, static_argnums=(0, 1, 2, 3, 4))
def _odeint_wrapper(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    y0_flat, unravel = ravel_pytree(y0)
    flat_func = ravel_first_arg(func, unravel)
    with plax.default_matmul_precision("highest"):
        ys = _odeint(flat_func, rtol, atol, mxstep, hmax, y0_flat, ts, *args)
    return plax.vmap(unravel)(ys)


def _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    """The solution at ``ts`` of the flat system ``func(y, t, *args)``."""
    def slope(y, t):
        return func(y, t, *args)

    def advance_to(carry, target_t):
        def keep_stepping(state):
            steps, _, _, t, dt, _, _ = state
            return (t < target_t) & (steps < mxstep) & (dt > 0)

        def attempt_step(state):
            steps, y, f, t, dt, last_t, coeffs = state
            next_y, next_f, error, k = runge_kutta_step(slope, y, f, t, dt)
            ratio = mean_error_ratio(error, rtol, atol, y, next_y)
            next_coeffs = interp_fit_dopri(y, next_y, k, dt)
            next_dt = jnp.clip(optimal_step_size(dt, ratio), min=0., max=hmax)
            accepted = (steps + 1, next_y, next_f, t + dt, next_dt, t, next_coeffs)
            rejected = (steps + 1, y, f, t, next_dt, last_t, coeffs)
            return tuple(jnp.where(ratio <= 1., a, r) for a, r in builtins.zip(accepted, rejected))

        _, *carry = lax.while_loop(keep_stepping, attempt_step, (0, *carry))
        _, _, t, _, last_t, coeffs = carry
        s = (target_t - last_t) / (t - last_t)
        return carry, jnp.polyval(coeffs, s.astype(coeffs.dtype))

    f0 = slope(y0, ts[0])
    dt0 = jnp.clip(initial_step_size(slope, ts[0], y0, 4, rtol, atol, f0), min=0., max=hmax)
    coeffs0 = jnp.array([y0] * 5)
    _, ys = lax.scan(advance_to, [y0, f0, ts[0], dt0, ts[0], coeffs0], ts[1:])
    return jnp.concatenate((y0[None], ys))


_solve.__name__ = "_odeint"
_odeint = plax.custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3, 4))


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_rev(func, rtol, atol, mxstep, hmax, residuals, g):
    """The adjoint method: between consecutive output times, integrate the state, its
    cotangent and the cotangents of t[0] and ``args`` backwards (in negated time), adding each
    output's cotangent where it was observed."""
    ys, ts, args = residuals

    def augmented(state, neg_t, *args):
        y, y_bar, *_ = state
        y_dot, pullback = plax.vjp(func, y, -neg_t, *args)
        return (-y_dot, *pullback(y_bar))

    def back_one_interval(carry, i):
        y_bar, t0_bar, args_bar = carry
        # moving the observation time t[i] changes the output by func(y_i, t_i)
        t_bar = jnp.dot(func(ys[i], ts[i], *args), g[i]).real
        t0_bar = t0_bar - t_bar
        with plax.default_matmul_precision("highest"):
            _, y_bar, t0_bar, args_bar = odeint(
                augmented, (ys[i], y_bar, t0_bar, args_bar), jnp.array([-ts[i], -ts[i - 1]]),
                *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_map(operator.itemgetter(1), (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    start = (g[-1], 0., tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), later_ts_bar = lax.scan(
        back_one_interval, start, jnp.arange(len(ts) - 1, 0, -1))
    ts_bar = jnp.concatenate([jnp.array([t0_bar]), later_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_rev)
