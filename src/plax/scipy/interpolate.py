"""plax.scipy.interpolate (JAX's ``jax.scipy.interpolate``): RegularGridInterpolator."""
from __future__ import annotations

import itertools
import operator
from functools import partial, reduce

import numpy as np

from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.trace import Tracer
from plax.numpy.util import check_arraylike, promote_dtypes_inexact
from plax.tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method {method!r} is not defined; RegularGridInterpolator knows "
                         f"{', '.join(map(repr, _METHODS))}.")


def _sample_points(xi, ndim):
    """Query points as one ``(..., ndim)`` array: a tuple of per-dimension coordinate arrays
    (broadcast together) or an array whose last axis runs over the dimensions."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        check_arraylike("RegularGridInterpolator", *xi)
        parts = jnp.broadcast_arrays(*xi)
        return jnp.stack([p.astype(dtypes.default_float_dtype()) for p in parts], axis=-1)
    check_arraylike("RegularGridInterpolator", xi)
    xi = jnp.asarray(xi)
    return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


def _check_ascending(axis, points):
    """A grid axis known now must be strictly increasing (a decreasing one would give wrong
    values silently); a traced one cannot be checked."""
    if isinstance(points, Tracer) and points.to_concrete_value() is None:
        return
    values = np.asarray(points if not isinstance(points, Tracer)
                        else points.to_concrete_value())
    if values.ndim != 1 or values.shape[0] < 2 or not np.all(np.diff(values) > 0):
        raise ValueError(f"RegularGridInterpolator: the points in dimension {axis} must be "
                         f"strictly ascending, with at least two of them, got {values}. "
                         "(Descending axes are not supported: reverse the axis and that "
                         "axis of values.)")


class RegularGridInterpolator:
    """Interpolation on a rectilinear grid: ``points`` holds each dimension's strictly
    increasing coordinates, ``values`` the data on the grid (trailing dimensions beyond
    ``len(points)`` are carried along). ``method`` is ``"linear"`` or ``"nearest"``; points
    outside the grid get ``fill_value`` (NaN by default), or are extrapolated when it is
    None. As in JAX, ``bounds_error=True`` is not supported (it cannot raise under jit) and
    decreasing axes are not checked."""

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        _check_method(method)
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: `bounds_error` takes no effect "
                                      "under JIT; pass bounds_error=False and test the "
                                      "points against the grid yourself.")
        check_arraylike("RegularGridInterpolator", values)
        values = jnp.asarray(values)
        if len(points) > values.ndim:
            raise ValueError(f"RegularGridInterpolator: there are {len(points)} point arrays, "
                             f"but values has {values.ndim} dimensions.")
        values, = promote_dtypes_inexact(values)
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = jnp.asarray(fill_value)
            if not jnp.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError("RegularGridInterpolator: fill_value must be either 'None' or "
                                 f"of a type compatible with values ({values.dtype}), got "
                                 f"{fill_value.dtype}.")
        check_arraylike("RegularGridInterpolator", *points)
        for axis, p in enumerate(points):
            _check_ascending(axis, p)
        self.method = method
        self.bounds_error = bounds_error
        self.fill_value = fill_value
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi, method=None):
        """The interpolated values at ``xi``: shape ``xi.shape[:-1] + values.shape[ndim:]``."""
        method = self.method if method is None else method
        _check_method(method)
        ndim = len(self.grid)
        xi = _sample_points(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"RegularGridInterpolator: the requested sample points xi have "
                             f"dimension {xi.shape[-1]}, but this RegularGridInterpolator has "
                             f"dimension {ndim}.")
        return _interpolate(self.grid, self.values, self.fill_value, xi, method)


@partial(jit, static_argnums=(4,))
def _interpolate(grids, values, fill_value, xi, method):
    ndim = len(grids)
    lead = xi.shape[:-1]
    xi = xi.reshape(-1, ndim)
    lower, fraction, outside = [], [], jnp.zeros(xi.shape[0], bool)
    for x, grid in zip(xi.T, grids):
        # the cell [grid[i], grid[i + 1]] holding x (the first or last beyond the ends)
        i = jnp.clip(jnp.searchsorted(grid, x) - 1, 0, grid.shape[0] - 2)
        lower.append(i)
        fraction.append((x - grid[i]) / (grid[i + 1] - grid[i]))
        outside = outside | (x < grid[0]) | (x > grid[-1])
    trailing = (slice(None),) + (None,) * (values.ndim - ndim)
    if method == "linear":
        result = None
        for corner in itertools.product((0, 1), repeat=ndim):
            index = tuple(i + step for i, step in zip(lower, corner))
            weight = reduce(operator.mul, [t if step else 1 - t
                                           for t, step in zip(fraction, corner)])
            term = values[index] * weight[trailing]
            result = term if result is None else result + term
    else:
        result = values[tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(lower, fraction))]
    if fill_value is not None:
        result = jnp.where(outside[trailing], fill_value, result)
    return result.reshape(lead + values.shape[ndim:])


def _flatten(interpolator):
    return ((interpolator.grid, interpolator.values, interpolator.fill_value),
            (interpolator.method, interpolator.bounds_error))


def _unflatten(aux, children):
    interpolator = object.__new__(RegularGridInterpolator)
    interpolator.grid, interpolator.values, interpolator.fill_value = children
    interpolator.method, interpolator.bounds_error = aux
    return interpolator


register_pytree_node(RegularGridInterpolator, _flatten, _unflatten)
