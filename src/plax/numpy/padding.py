"""``pad``: NumPy's padding modes (constant, edge, wrap, reflect, symmetric, linear_ramp, the
statistics, empty) on plax arrays."""
from __future__ import annotations

import builtins

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.errors import InconclusiveDimensionOperation
from plax.core.symbolic_shapes import DimExpr, dimension_as_value, max_dim, min_dim
from plax.core.trace import get_aval
from plax.numpy.shape_ops import _arr, _shape, broadcast_to, static_value
from plax.numpy.util import as_operand, convert
from plax.runtime.array import ARRAY_TYPES

__all__ = ["pad"]

_PAD_KWARGS = {
    "constant": {"constant_values"}, "edge": set(), "wrap": set(), "empty": set(),
    "reflect": {"reflect_type"}, "symmetric": {"reflect_type"}, "linear_ramp": {"end_values"},
    "maximum": {"stat_length"}, "minimum": {"stat_length"}, "mean": {"stat_length"},
    "median": {"stat_length"},
}


def _pad_widths(pad_width, ndim: int) -> list:
    w = np.asarray(static_value(pad_width, "pad_width"))
    if w.size == 0:
        w = w.astype(np.int64)
    if w.dtype == object and all(type(v) is DimExpr or isinstance(v, (int, np.integer))
                                 for v in w.flat):  # symbolic widths (plax.export)
        pass
    elif w.dtype.kind not in "iu":
        raise TypeError(f"`pad_width` must be of integral type, got {pad_width!r}.")
    if w.shape not in ((), (1,), (2,), (1, 2), (ndim, 2)):
        raise ValueError(f"pad: pad_width with nd={ndim} has unsupported shape {w.shape}. Valid "
                         f"shapes are ({ndim}, 2), (1, 2), (2,), (1,), or ().")
    if np.any(w < 0):
        raise ValueError(f"pad: index can't contain negative values, got pad_width="
                         f"{w.tolist()}.")
    return [tuple(v if type(v) is DimExpr else int(v) for v in row)
            for row in np.broadcast_to(w, (ndim, 2))]


def _per_axis_values(values, ndim: int, name: str) -> list:
    """``values`` broadcast to one (before, after) pair per axis; each a scalar operand."""
    if isinstance(values, ARRAY_TYPES):
        v = values
        vshape = _shape(v)
        if vshape == ():
            return [(v, v)] * ndim
        v = broadcast_to(v, (ndim, 2) if vshape != (ndim, 2) else vshape)
        return [tuple(lax.reshape(lax.slice(v, (i, j), (i + 1, j + 1)), ())
                      for j in (0, 1)) for i in range(ndim)]
    host = np.asarray(values)
    if host.dtype.kind not in "biufc":
        raise TypeError(f"pad: {name} must be numbers, got {values!r}.")
    try:
        host = np.broadcast_to(host, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad: {name} of shape {host.shape} does not broadcast to "
                         f"({ndim}, 2), one (before, after) pair per axis.") from None
    return [(host[i, 0], host[i, 1]) for i in range(ndim)]


def _scalar_like(v, x):
    """The scalar ``v`` converted to ``x``'s dtype, weak like ``x``."""
    aval = get_aval(x)
    if isinstance(v, (np.ndarray, np.generic)) and not isinstance(v, ARRAY_TYPES):
        v = v.item()
    return convert(as_operand(v), aval.dtype, aval.weak_type)


def _edge_block(x, axis: int, at_end: bool, width: int):
    n = _shape(x)[axis]
    edge = lax.slice_in_dim(x, n - 1 if at_end else 0, n if at_end else 1, 1, axis)
    shape = list(_shape(x))
    shape[axis] = width
    return lax.broadcast_in_dim(edge, tuple(shape), tuple(range(len(shape))))


def _join(axis, lo_block, x, hi_block):
    parts = [p for p in (lo_block, x, hi_block) if p is not None]
    return lax.concatenate(parts, axis) if len(parts) > 1 else x


def _pad_edge(x, axis, lo, hi):
    return _join(axis, _edge_block(x, axis, False, lo) if lo else None, x,
                 _edge_block(x, axis, True, hi) if hi else None)


def _pad_wrap(x, axis, lo, hi):
    n = _shape(x)[axis]
    reps_lo, reps_hi = -(-lo // n), -(-hi // n)
    big = lax.concatenate([x] * (reps_lo + 1 + reps_hi), axis) if reps_lo + reps_hi else x
    start = reps_lo * n - lo
    return lax.slice_in_dim(big, start, start + lo + n + hi, 1, axis)


def _pad_reflect(x, axis, lo, hi, symmetric: bool, odd: bool):
    """Mirror ``x`` about its edges ('symmetric' repeats the edge element, 'reflect' does not)."""
    try:
        return _pad_reflect_sized(x, axis, lo, hi, symmetric, odd)
    except InconclusiveDimensionOperation as e:  # symbolic sizes or widths (plax.export)
        mode = "symmetric" if symmetric else "reflect"
        raise ValueError(
            f"Shape polymorphism is supported for jnp.pad with '{mode}' padding mode only "
            f"when the sizes of the pieces mirrored can be decided at lowering time: axis "
            f"{axis} of size {_shape(x)[axis]} padded by ({lo}, {hi}). {e}") from e


def _pad_reflect_sized(x, axis, lo, hi, symmetric: bool, odd: bool):
    if _shape(x)[axis] == 1 and not symmetric:
        return _pad_edge(x, axis, lo, hi)
    off = 0 if symmetric else 1
    left = _mirror_block(x, axis, lo, off, odd) if lo else None
    right = lax.rev(_mirror_block(lax.rev(x, (axis,)), axis, hi, off, odd), (axis,)) if hi else None
    return _join(axis, left, x, right)


def _mirror_block(x, axis, width, off, odd):
    """The ``width`` values that mirror ``x`` beyond its start. Each step mirrors all that is
    built so far, which keeps every new edge on a mirror point of the periodic (or, for
    'odd', point-symmetric) extension; that is NumPy's result for widths beyond the axis."""
    grown = 0
    while grown < width:
        n = _shape(x)[axis]
        k = min(width - grown, n - off)
        chunk = lax.rev(lax.slice_in_dim(x, off, off + k, 1, axis), (axis,))
        if odd:
            chunk = _odd(chunk, lax.slice_in_dim(x, 0, 1, 1, axis))
        x, grown = lax.concatenate([chunk, x], axis), grown + k
    return lax.slice_in_dim(x, 0, width, 1, axis)


def _odd(chunk, edge):
    """2 * edge - chunk: the reflection through the edge value."""
    edge = lax.broadcast_in_dim(edge, _shape(chunk), tuple(range(len(_shape(chunk)))))
    return lax.sub(lax.add(edge, edge), chunk)


def _to_float(x):
    dt = get_aval(x).dtype
    return x if dtypes.is_inexact(dt) else lax.convert_element_type(x, dtypes.to_inexact_dtype(dt))


def _from_float(y, dtype):
    """``y`` cast back to ``dtype``, rounding half to even for integers as NumPy's pad does."""
    if dtypes.is_inexact(dtype):
        return lax.convert_element_type(y, dtype)
    y = lax.round(y, lax.RoundingMethod.TO_NEAREST_EVEN)
    return lax.convert_element_type(y, dtype)


def _stat(x, axis: int, mode: str):
    if mode == "maximum":
        return lax.reduce_max(x, (axis,))
    if mode == "minimum":
        return lax.reduce_min(x, (axis,))
    dt = get_aval(x).dtype
    n = _shape(x)[axis]
    if mode == "mean":
        total = lax.reduce_sum(_to_float(x), (axis,))
        return _from_float(lax.div(total, convert(n, get_aval(total).dtype)), dt)
    s = lax.sort(x, axis)  # median
    mid = lax.index_in_dim(s, (n - 1) // 2, axis, keepdims=False)
    if n % 2:
        return mid
    mid2 = lax.index_in_dim(s, n // 2, axis, keepdims=False)
    both = lax.add(_to_float(mid), _to_float(mid2))
    return _from_float(lax.mul(both, convert(0.5, get_aval(both).dtype)), dt)


def _pad_stat(x, axis, lo, hi, mode, stat_length):
    n = _shape(x)[axis]
    blocks = []
    for width, at_end, length in ((lo, False, stat_length[0]), (hi, True, stat_length[1])):
        if not width:
            blocks.append(None)
            continue
        length = n if length is None else max_dim(1, min_dim(
            length if type(length) is DimExpr else int(length), n))
        region = lax.slice_in_dim(x, n - length if at_end else 0, n if at_end else length, 1,
                                  axis)
        value = lax.expand_dims(_stat(region, axis, mode), (axis,))
        shape = list(_shape(x))
        shape[axis] = width
        blocks.append(lax.broadcast_in_dim(value, tuple(shape), tuple(range(len(shape)))))
    return _join(axis, blocks[0], x, blocks[1])


def _pad_ramp(x, axis, lo, hi, end_values):
    dt = get_aval(x).dtype
    ramps = []
    for width, at_end, end in ((lo, False, end_values[0]), (hi, True, end_values[1])):
        if not width:
            ramps.append(None)
            continue
        edge = _to_float(_edge_block(x, axis, at_end, width))
        fdt = get_aval(edge).dtype
        end = convert(as_operand(end.item() if isinstance(end, np.generic) else end), fdt)
        # end + i * step for i = 0 .. width-1: from the end value toward the edge (excluded)
        i = lax.broadcasted_iota(fdt, _shape(edge), axis)
        if at_end:
            i = lax.rev(i, (axis,))
        step = lax.div(lax.sub(edge, end), lax.convert_element_type(
            dimension_as_value(width), fdt) if type(width) is DimExpr else convert(width, fdt))
        ramp = lax.add(lax.mul(i, step), end)
        if not dtypes.is_inexact(dt):  # integer ramps round down, as NumPy's linspace
            ramp = lax.floor(ramp)
        ramps.append(lax.convert_element_type(ramp, dt))
    return _join(axis, ramps[0], x, ramps[1])


def pad(array, pad_width, mode="constant", **kwargs):
    """Pad ``array`` by ``pad_width`` (int, (before, after) or one pair per axis).

    Modes as numpy.pad: 'constant' (``constant_values``), 'edge', 'reflect' and 'symmetric'
    (``reflect_type`` 'even' or 'odd'), 'wrap', 'linear_ramp' (``end_values``), 'maximum',
    'minimum', 'mean', 'median' (``stat_length``) and 'empty' (zeros here). A callable mode
    ``f(vector, (before, after), axis, kwargs)`` returns each zero-padded 1-D line filled in
    (axis by axis, as NumPy's; unlike NumPy's it returns the vector rather than editing it).
    """
    x = _arr("pad", array)
    ndim = get_aval(x).ndim
    widths = _pad_widths(pad_width, ndim)
    if callable(mode):
        return _pad_with_function(x, widths, mode, kwargs)
    if mode not in _PAD_KWARGS:
        raise NotImplementedError(f"Unimplemented padding mode {mode!r} for pad; use one of "
                                  f"{sorted(_PAD_KWARGS)}.")
    extra = set(kwargs) - _PAD_KWARGS[mode]
    if extra:
        raise ValueError(f"unsupported keyword arguments for mode {mode!r}: {extra}")
    if mode in ("constant", "empty"):
        values = kwargs.get("constant_values", 0) if mode == "constant" else 0
        return _pad_constant(x, widths, values)
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}.")
    if mode in ("maximum", "minimum", "mean", "median"):
        stat = kwargs.get("stat_length")
        if stat is not None and any(type(v) is DimExpr for v in np.ravel(
                np.asarray(stat, dtype=object))):  # symbolic lengths (plax.export)
            stats = _pad_widths(stat, ndim)
        else:
            stats = [(None, None)] * ndim if stat is None else \
                [tuple(int(v) for v in p) for p in _per_axis_values(stat, ndim, "stat_length")]
    if mode == "linear_ramp":
        ends = _per_axis_values(kwargs.get("end_values", 0), ndim, "end_values")
    for axis, (lo, hi) in enumerate(widths):
        if not lo and not hi:
            continue
        if _shape(x)[axis] == 0:
            raise ValueError(f"Cannot apply {mode!r} padding to empty axis {axis}; only "
                             "'constant' and 'empty' padding can extend an empty axis.")
        if mode == "edge":
            x = _pad_edge(x, axis, lo, hi)
        elif mode == "wrap":
            x = _pad_wrap(x, axis, lo, hi)
        elif mode in ("reflect", "symmetric"):
            x = _pad_reflect(x, axis, lo, hi, mode == "symmetric", reflect_type == "odd")
        elif mode == "linear_ramp":
            x = _pad_ramp(x, axis, lo, hi, ends[axis])
        else:
            x = _pad_stat(x, axis, lo, hi, mode, stats[axis])
    return x


def _pad_constant(x, widths, values):
    ndim = len(widths)
    if ndim == 0:
        return x
    if not isinstance(values, ARRAY_TYPES) and np.ndim(values) == 0 or \
            isinstance(values, ARRAY_TYPES) and get_aval(values).ndim == 0:
        return lax.pad(x, _scalar_like(values, x), [(lo, hi, 0) for lo, hi in widths])
    pairs = _per_axis_values(values, ndim, "constant_values")
    for axis, ((lo, hi), (v_lo, v_hi)) in enumerate(zip(widths, pairs)):
        for width, v, at_end in ((lo, v_lo, False), (hi, v_hi, True)):
            if width:
                config = [(0, 0, 0)] * ndim
                config[axis] = (0, width, 0) if at_end else (width, 0, 0)
                x = lax.pad(x, _scalar_like(v, x), config)
    return x


def _pad_with_function(x, widths, func, kwargs):
    from plax.numpy.array_edit import apply_along_axis  # (array_edit imports this module)
    x = _pad_constant(x, widths, 0)
    for axis, width in enumerate(widths):
        x = apply_along_axis(func, axis, x, tuple(width), axis, kwargs)
    return x
