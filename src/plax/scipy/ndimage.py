"""plax.scipy.ndimage (JAX's ``jax.scipy.ndimage``): map_coordinates.

Interpolation of order 0 (nearest) or 1 (linear) at arbitrary coordinates. The boundary
modes follow SciPy's documentation, as JAX's do: ``'constant'`` is SciPy's
``'grid-constant'`` and ``'wrap'`` its ``'grid-wrap'`` (pixels outside the input take
``cval``, or the periodic copy), while ``'nearest'``, ``'mirror'`` and ``'reflect'`` agree
with SciPy.
"""
from __future__ import annotations

import itertools
import operator
from functools import reduce

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.numpy.util import check_arraylike

__all__ = ["map_coordinates"]


def _mirror(index, size):
    """Reflect about the edge pixels' centres: ... 2 1 | 0 1 2 | 1 0 ... (a triangle wave)."""
    if size == 1:
        return jnp.zeros_like(index)
    period = 2 * (size - 1)
    return jnp.abs((index + size - 1) % period - (size - 1))


def _reflect(index, size):
    """Reflect about the edges themselves: ... 1 0 | 0 1 2 | 2 1 ..."""
    period = 2 * size
    folded = index % period
    return jnp.where(folded < size, folded, period - 1 - folded)


# mode -> the in-range index an out-of-range one reads
_FOLDS = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(x):
    return x if dtypes.issubdtype(x.dtype, np.integer) else lax.round(x)


def _nodes(coordinate, order):
    """The (index, weight) pairs of one axis: one for order 0, two for order 1."""
    if order == 0:
        return [(_round_half_away(coordinate).astype(np.int32), None)]
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


@jit(static_argnums=(2, 3))
def _map_coordinates(input, coordinates, order, mode, cval):
    cval = jnp.asarray(cval, input.dtype)
    fold = _FOLDS[mode]
    per_axis = [[(fold(index, size), index, weight) for index, weight in _nodes(c, order)]
                for c, size in zip(coordinates, input.shape)]
    total = None
    for corner in itertools.product(*per_axis):
        value = input[tuple(index for index, _, _ in corner)]
        if mode == "constant":
            inside = reduce(operator.and_, [(raw >= 0) & (raw < size)
                                            for (_, raw, _), size in zip(corner, input.shape)])
            value = jnp.where(inside, value, cval)
        weights = [w for _, _, w in corner if w is not None]
        if weights:
            value = reduce(operator.mul, weights) * value
        total = value if total is None else total + value
    if dtypes.issubdtype(input.dtype, np.integer):
        total = _round_half_away(total)
    return total.astype(input.dtype)


def map_coordinates(input, coordinates, order: int, mode: str = "constant", cval=0.0):
    """The values of ``input`` interpolated at ``coordinates`` (one array per dimension of
    ``input``, all of the output's shape), with spline ``order`` 0 (nearest) or 1 (linear);
    points outside the input follow ``mode`` (``'constant'``, ``'nearest'``, ``'wrap'``,
    ``'mirror'``, ``'reflect'``), ``'constant'`` filling with ``cval``."""
    check_arraylike("map_coordinates", input)
    input = jnp.asarray(input)
    coordinates = [jnp.asarray(c) for c in coordinates]
    if len(coordinates) != input.ndim:
        raise ValueError(f"map_coordinates: coordinates must be a sequence of length "
                         f"input.ndim, but {len(coordinates)} != {input.ndim}; give one "
                         "coordinate array per dimension of input.")
    if mode not in _FOLDS:
        raise NotImplementedError(f"map_coordinates does not yet support mode {mode!r}. "
                                  f"Currently supported modes are {sorted(_FOLDS)}.")
    if order not in (0, 1):
        raise NotImplementedError(f"map_coordinates currently requires order<=1, got order="
                                  f"{order!r} (0: nearest, 1: linear).")
    shapes = {c.shape for c in coordinates}
    if len(shapes) > 1:
        try:
            out_shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(f"map_coordinates: the coordinate arrays must have one shape (or "
                             f"broadcast to one), got {sorted(shapes)}.") from None
        coordinates = [jnp.broadcast_to(c, out_shape) for c in coordinates]
    return _map_coordinates(input, coordinates, int(order), mode, cval)
