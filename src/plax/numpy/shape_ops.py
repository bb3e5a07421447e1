"""Shape manipulation: reshape, transpose, joining, splitting, tiling, flipping (``pad`` is in
``padding.py``)."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.avals import from_array_protocol, has_array_protocol, shape_entries
from plax.first_order.sharding_constraint import takes_out_sharding
from plax.core.errors import SHAPE_PHRASE, ConcretizationTypeError, InconclusiveDimensionOperation
from plax.core.symbolic_shapes import DimExpr, clamped_slice
from plax.core.trace import Tracer, get_aval
from plax.numpy.creation import asarray
from plax.numpy.util import (as_operand, broadcast_shapes as _broadcast_shapes, canonicalize_axes,
                             canonicalize_axis, check_arraylike, convert)
from plax.runtime.array import ARRAY_TYPES

__all__ = [
    "reshape", "ravel", "transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis",
    "rollaxis", "expand_dims", "squeeze", "concatenate", "concat", "stack", "unstack", "hstack",
    "vstack", "dstack", "column_stack", "split", "array_split", "hsplit", "vsplit", "dsplit",
    "tile", "repeat", "broadcast_to", "broadcast_arrays", "broadcast_shapes", "flip", "fliplr",
    "flipud", "roll", "rot90", "atleast_1d", "atleast_2d", "atleast_3d", "ndim", "shape",
    "size", "isscalar", "iscomplexobj", "isrealobj",
]


# --- helpers ----------------------------------------------------------------------------
def _arr(name: str, a):
    """``a`` as a plax array (or tracer), after checking that it is array-like."""
    check_arraylike(name, a)
    return asarray(a)


def _shape(x) -> tuple:
    return get_aval(x).shape


def static_value(x, name: str):
    """A host value for an argument that must be static (concrete arrays are fetched)."""
    if isinstance(x, Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise ConcretizationTypeError(
                x, f"{SHAPE_PHRASE}: the problem arose with the `{name}` argument, which "
                   "sets the shape of the result, so it must be a concrete (static) value.")
        return np.asarray(val)
    if isinstance(x, ARRAY_TYPES):
        return np.asarray(x)
    if isinstance(x, (list, tuple)) and any(isinstance(v, ARRAY_TYPES) for v in x):
        return [static_value(v, name) for v in x]
    return x


def static_int_tuple(values, name: str) -> tuple:
    """Static integers given as one int or a sequence of ints."""
    values = static_value(values, name)
    if isinstance(values, np.ndarray):
        if values.ndim > 1:
            raise TypeError(f"{name} must be an integer or a 1-D sequence of integers, got an "
                            f"array of shape {values.shape}.")
        values = values.tolist() if values.ndim else values.item()
    values = shape_entries(values)
    try:
        return tuple(operator.index(v) for v in values)
    except InconclusiveDimensionOperation:  # symbolic sizes (plax.export)
        return tuple(v if type(v) is DimExpr else operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{SHAPE_PHRASE}, got "
                        f"{name}={tuple(values)!r}.") from None


def _prod(values) -> int:
    n = math.prod(values)
    return n if type(n) is DimExpr else int(n)


def _as_sequence(name: str, arrays) -> list:
    """The arrays of a joining function's first argument (an array is split along axis 0)."""
    if isinstance(arrays, (ARRAY_TYPES, np.ndarray)):
        arr = asarray(arrays)
        if get_aval(arr).ndim == 0:
            raise ValueError(f"{name} got a zero-dimensional array; pass a sequence of arrays.")
        return unstack(arr)
    arrays = list(arrays)
    check_arraylike(name, *arrays)
    return [as_operand(a) for a in arrays]


def _promote_all(arrays, dtype):
    """Convert ``arrays`` to their common dtype (or ``dtype``), keeping weak types as JAX does."""
    if dtype is None:
        dt, weak = dtypes.lattice_result(*arrays)
    else:
        dt, weak = dtypes.canonicalize_user_dtype(dtype), False
    return [asarray(convert(a, dt, weak)) for a in arrays]


# --- reshaping --------------------------------------------------------------------------
def _resolve_shape(shape: tuple, old: tuple, given) -> tuple:
    """``shape`` with a -1 entry replaced by the size that keeps the element count (errors
    show the shape as the caller ``given`` it, as JAX's do)."""
    size = _prod(old)
    if shape.count(-1) > 1:
        raise TypeError(f"can only specify one unknown axis size with a `-1` value, got {given}")
    if -1 in shape:
        known = _prod(d for d in shape if d != -1)
        if isinstance(size, DimExpr) or isinstance(known, DimExpr):
            # JAX's form: divided by the product with the -1 in it (-known), so that a
            # scope's equalities such as mod(a + mod(a, 2), -2) == 0 apply
            q, r = divmod(size, -known)
            missing = -q if isinstance(r, int) and r == 0 else None
        else:
            missing = size // known if known > 0 and not size % known else None
        if missing is None:
            raise TypeError(f"cannot reshape array of shape {old} (size {size}) into shape "
                            f"{given} because the product of specified axis sizes ({known}) "
                            f"does not evenly divide {size}")
        shape = tuple(missing if d == -1 else d for d in shape)
    if any(d < 0 for d in shape) or _prod(shape) != size:
        raise TypeError(f"cannot reshape array of shape {old} (size {size}) into shape {given} "
                        f"(size {_prod(shape)})")
    return shape


def reshape(a, shape, order: str = "C", *, copy=None, out_sharding=None):
    """``a`` with a new shape holding the same elements; one entry of ``shape`` may be -1.
    ``order``: "C" (row-major) or "F" (column-major). (``copy`` is accepted, as in JAX: the
    result is a new array either way.)"""
    return reshape_to(_arr("reshape", a), shape, order, out_sharding)


def reshape_to(a, shape, order: str = "C", out_sharding=None):
    """``reshape`` of an array, shared with the ``Array.reshape`` method."""
    if order == "A":
        raise NotImplementedError("np.reshape order=A is not implemented.")
    if order not in ("C", "F"):
        raise ValueError(f"Unexpected value for 'order' argument: {order}.")
    old = _shape(a)
    try:
        dims = static_int_tuple(shape, "shape")
    except TypeError as e:
        if not str(e).startswith(SHAPE_PHRASE):
            raise
        shown = shape if isinstance(shape, (list, tuple)) else [shape]
        raise TypeError(f"{SHAPE_PHRASE}, got {shown}.") from None
    shape = _resolve_shape(dims, old, shape)
    if order == "C":
        return lax.reshape(a, shape, out_sharding=out_sharding)
    if out_sharding is not None:
        raise NotImplementedError("reshape: out_sharding= is supported with order='C' only.")
    # Fortran order: reshape the reversed-axes view, then reverse back
    rev_in = tuple(range(len(old)))[::-1]
    out = lax.reshape(lax.transpose(a, rev_in), shape[::-1])
    return lax.transpose(out, tuple(range(len(shape)))[::-1])


@takes_out_sharding
def ravel(a, order: str = "C"):
    """``a`` flattened to one dimension."""
    a = _arr("ravel", a)
    if order not in ("C", "F"):
        raise NotImplementedError(f"ravel order={order!r} is not implemented; use 'C' or 'F'.")
    return reshape(a, (get_aval(a).size,), order=order)


def transpose(a, axes=None):
    """Permute the axes of ``a`` (reverse them when ``axes`` is None)."""
    a = _arr("transpose", a)
    ndim = get_aval(a).ndim
    if axes is None:
        perm = tuple(range(ndim))[::-1]
    else:
        perm = tuple(canonicalize_axis(ax, ndim) for ax in static_int_tuple(axes, "axes"))
    return lax.transpose(a, perm)


def permute_dims(a, /, axes):
    """Permute the axes of ``a`` (Array API name for transpose with explicit axes)."""
    return transpose(a, axes)


def matrix_transpose(x, /):
    """Swap the last two axes of ``x``."""
    x = _arr("matrix_transpose", x)
    ndim = get_aval(x).ndim
    if ndim < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={ndim}")
    return lax.transpose(x, tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))


def swapaxes(a, axis1: int, axis2: int):
    """Interchange two axes of ``a``."""
    a = _arr("swapaxes", a)
    ndim = get_aval(a).ndim
    i, j = canonicalize_axis(axis1, ndim), canonicalize_axis(axis2, ndim)
    perm = list(range(ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def moveaxis(a, source, destination):
    """Move the axes ``source`` to the positions ``destination``; the others keep their order."""
    a = _arr("moveaxis", a)
    ndim = get_aval(a).ndim
    src, dst = static_int_tuple(source, "source"), static_int_tuple(destination, "destination")
    if len(src) != len(dst):
        raise ValueError(f"Inconsistent number of elements: {len(src)} vs {len(dst)}")
    src = canonicalize_axes(src, ndim)
    dst = canonicalize_axes(dst, ndim)
    perm = [i for i in range(ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return lax.transpose(a, tuple(perm))


def rollaxis(a, axis: int, start: int = 0):
    """Move ``axis`` so that it sits before position ``start`` (NumPy's older moveaxis)."""
    a = _arr("rollaxis", a)
    ndim = get_aval(a).ndim
    axis = canonicalize_axis(axis, ndim)
    if not -ndim <= start <= ndim:
        raise ValueError(f"start={start} must satisfy {-ndim} <= start <= {ndim}")
    start = start + ndim if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


def expand_dims(a, axis):
    """Insert size-1 axes at the positions ``axis`` of the result."""
    a = _arr("expand_dims", a)
    axes = static_int_tuple(axis, "axis")
    canon = canonicalize_axes(axes, get_aval(a).ndim + len(axes))
    return lax.expand_dims(a, canon)


def squeeze(a, axis=None):
    """Remove size-1 axes (all of them, or those in ``axis``, which must have size 1)."""
    a = _arr("squeeze", a)
    shape = _shape(a)
    if axis is None:
        if any(type(d) is DimExpr for d in shape):  # (whether a symbolic size is 1 is unknown)
            raise ValueError(f"jnp.squeeze with axis=None is not supported with shape "
                             f"polymorphism: the shape {shape} has symbolic dimensions; give "
                             "the axes to squeeze.")
        dims = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        dims = tuple(canonicalize_axis(ax, len(shape)) for ax in static_int_tuple(axis, "axis"))
        if len(set(dims)) != len(dims):
            raise ValueError(f"squeeze: dimensions are not unique: {tuple(axis)}")
    return lax.squeeze(a, dims)


def atleast_1d(*arys):
    """Each argument viewed with at least one dimension (a list when given several)."""
    return _atleast("atleast_1d", arys, lambda s: (1,) if not s else s)


def atleast_2d(*arys):
    """Each argument viewed with at least two dimensions (1-D arrays become rows)."""
    return _atleast("atleast_2d", arys, lambda s: (1,) * (2 - len(s)) + s if len(s) < 2 else s)


def atleast_3d(*arys):
    """Each argument viewed with at least three dimensions, as numpy.atleast_3d."""
    def shape3(s):
        return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)
    return _atleast("atleast_3d", arys, shape3)


def _atleast(name, arys, new_shape):
    check_arraylike(name, *arys)
    outs = []
    for a in arys:
        a = asarray(a)
        outs.append(lax.reshape(a, new_shape(_shape(a))))
    return outs[0] if len(outs) == 1 else outs


# --- joining ----------------------------------------------------------------------------
def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along an existing ``axis`` (flattening them first when ``axis`` is None)."""
    if isinstance(arrays, (ARRAY_TYPES, np.ndarray)):
        arr = asarray(arrays) if dtype is None else asarray(arrays, dtype=dtype)
        shape = _shape(arr)
        if axis is None:
            return ravel(arr)
        if len(shape) < 2:
            raise ValueError("Zero-dimensional arrays cannot be concatenated.")
        axis = canonicalize_axis(axis, len(shape) - 1)
        # blocks along axis 0 become the major part of the joined axis
        moved = moveaxis(arr, 0, axis)
        new = shape[1:axis + 1] + (shape[0] * shape[axis + 1],) + shape[axis + 2:]
        return lax.reshape(moved, new)
    arrays = _as_sequence("concatenate", arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        arrays = [ravel(asarray(a)) for a in arrays]
        axis = 0
    arrays = _promote_all(arrays, dtype)
    ndim = get_aval(arrays[0]).ndim
    if ndim == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    return lax.concatenate(arrays, canonicalize_axis(axis, ndim))


def concat(arrays, /, *, axis=0):
    """Join arrays along ``axis`` (Array API name for concatenate)."""
    return concatenate(arrays, axis=axis)


def stack(arrays, axis: int = 0, out=None, dtype=None):
    """Join same-shape arrays along a new ``axis``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to stack is not supported.")
    if isinstance(arrays, (ARRAY_TYPES, np.ndarray)):
        arr = asarray(arrays) if dtype is None else asarray(arrays, dtype=dtype)
        if get_aval(arr).ndim == 0:
            raise ValueError("Zero-dimensional arrays cannot be stacked as a sequence.")
        return moveaxis(arr, 0, canonicalize_axis(axis, get_aval(arr).ndim))
    arrays = _as_sequence("stack", arrays)
    if not arrays:
        raise ValueError("Need at least one array to stack.")
    shapes = [_shape(a) for a in arrays]
    if len(set(shapes)) != 1:
        raise ValueError("All input arrays must have the same shape. Got "
                         f"{', '.join(str(s) for s in shapes)}.")
    axis = canonicalize_axis(axis, len(shapes[0]) + 1)
    arrays = _promote_all(arrays, dtype)
    return lax.concatenate([lax.expand_dims(a, (axis,)) for a in arrays], axis)


def unstack(x, /, *, axis: int = 0):
    """The slices of ``x`` along ``axis``, as a tuple."""
    x = _arr("unstack", x)
    shape = _shape(x)
    if not shape:
        raise ValueError("Unstack requires arrays with rank > 0, however a scalar array was "
                         "passed.")
    axis = canonicalize_axis(axis, len(shape))
    return tuple(lax.index_in_dim(x, i, axis, keepdims=False) for i in range(shape[axis]))


def hstack(tup, dtype=None):
    """Join arrays column-wise (along axis 1, or axis 0 for 1-D arrays)."""
    arrs = [atleast_1d(a) for a in _as_sequence("hstack", tup)]
    axis = 0 if arrs and get_aval(arrs[0]).ndim == 1 else 1
    return concatenate(arrs, axis, dtype)


def vstack(tup, dtype=None):
    """Join arrays row-wise (along axis 0), 1-D arrays becoming rows."""
    return concatenate([atleast_2d(a) for a in _as_sequence("vstack", tup)], 0, dtype)


def dstack(tup, dtype=None):
    """Join arrays depth-wise (along axis 2)."""
    return concatenate([atleast_3d(a) for a in _as_sequence("dstack", tup)], 2, dtype)


def column_stack(tup):
    """Join 1-D arrays as columns (and 2-D arrays as they are) into a 2-D array."""
    cols = []
    for a in _as_sequence("column_stack", tup):
        a = asarray(a)
        cols.append(lax.reshape(a, (get_aval(a).size, 1)) if get_aval(a).ndim < 2 else a)
    return concatenate(cols, 1)


# --- splitting --------------------------------------------------------------------------
def _split(name, ary, indices_or_sections, axis, equal: bool) -> list:
    ary = _arr(name, ary)
    shape = _shape(ary)
    axis = canonicalize_axis(axis, len(shape))
    size = shape[axis]
    if type(indices_or_sections) is DimExpr:
        raise ValueError(f"jax.numpy.split with a symbolic number of sections is not "
                         f"supported: {name} got {indices_or_sections} sections; give the "
                         "split indices instead.")
    sections = static_value(indices_or_sections, "indices_or_sections")
    if isinstance(sections, np.ndarray) and sections.ndim == 0:
        sections = sections.item()
    if isinstance(sections, (int, np.integer)) and not isinstance(sections, bool):
        n = int(sections)
        if n <= 0:
            raise ValueError(f"{name}: number of sections must be larger than 0, got {n}.")
        if equal and size % n:
            raise ValueError(f"array split does not result in an equal division: an axis of "
                             f"size {size} cannot be split into {n} equal sections (use "
                             "array_split for unequal sections).")
        base, extra = divmod(size, n)
        if type(extra) is DimExpr:
            raise ValueError(f"{name}: the axis of symbolic size {size} is split into {n} "
                             "sections whose sizes depend on its value; give the split "
                             "indices instead.")
        sizes = [base + 1] * extra + [base] * (n - extra)
        bounds = np.cumsum([0] + sizes).tolist()
        pieces = list(zip(bounds[:-1], bounds[1:]))
    else:
        idx = static_int_tuple(sections, "indices_or_sections")
        # NumPy semantics: each piece is ary[prev:idx] as a Python slice
        pieces = []
        for lo, hi in zip((0,) + idx, idx + (size,)):
            if any(type(v) is DimExpr for v in (lo, hi, size)):  # (plax.export)
                pieces.append(clamped_slice(builtins.slice(lo, hi), size)[:2])
                continue
            lo, hi, _ = builtins.slice(lo, hi).indices(size)
            pieces.append((lo, max(lo, hi)))
    return [lax.slice_in_dim(ary, lo, hi, 1, axis) for lo, hi in pieces]


def split(ary, indices_or_sections, axis: int = 0) -> list:
    """Split ``ary`` into equal sections, or at the given indices, along ``axis``."""
    return _split("split", ary, indices_or_sections, axis, equal=True)


def array_split(ary, indices_or_sections, axis: int = 0) -> list:
    """Like split, but an integer number of sections need not divide the axis evenly."""
    return _split("array_split", ary, indices_or_sections, axis, equal=False)


def hsplit(ary, indices_or_sections) -> list:
    """Split along axis 1 (axis 0 for 1-D arrays)."""
    a = _arr("hsplit", ary)
    if get_aval(a).ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(a, indices_or_sections, 1 if get_aval(a).ndim > 1 else 0)


def vsplit(ary, indices_or_sections) -> list:
    """Split along axis 0."""
    a = _arr("vsplit", ary)
    if get_aval(a).ndim == 0:
        raise ValueError("vsplit only works on arrays of 1 or more dimensions")
    return split(a, indices_or_sections, 0)


def dsplit(ary, indices_or_sections) -> list:
    """Split along axis 2."""
    a = _arr("dsplit", ary)
    if get_aval(a).ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(a, indices_or_sections, 2)


# --- tiling and repeating ---------------------------------------------------------------
def tile(A, reps):
    """``A`` repeated ``reps`` times along each axis (NumPy's rules for differing ranks)."""
    A = _arr("tile", A)
    reps = static_int_tuple(reps, "reps")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be nonnegative, got {reps}.")
    shape = _shape(A)
    nd = max(len(reps), len(shape))
    shape = (1,) * (nd - len(shape)) + shape
    reps = (1,) * (nd - len(reps)) + reps
    A = lax.reshape(A, shape)
    # broadcast to (r0, s0, r1, s1, ...), then merge each (r, s) pair
    pairs = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    out = lax.broadcast_in_dim(A, pairs, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(out, tuple(r * s for r, s in zip(reps, shape)))


def _static_repeats(repeats):
    """Repeats as a host int or 1-D int array, or None when they are traced."""
    if isinstance(repeats, Tracer) and repeats.to_concrete_value() is None:
        return None
    r = np.asarray(static_value(repeats, "repeats"))
    if r.dtype.kind not in "iub":
        raise TypeError(f"repeat: repeats must be integers, got dtype {r.dtype}.")
    if r.ndim > 1:
        raise ValueError(f"repeat: repeats must be a scalar or 1-D, got shape {r.shape}.")
    if np.any(r < 0):
        raise ValueError(f"repeat: repeats may not contain negative values, got {r.tolist()}.")
    return int(r) if r.ndim == 0 else r.astype(np.int64)


@takes_out_sharding
def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Repeat each element of ``a`` along ``axis`` (flattened when None) ``repeats`` times.

    ``repeats`` is an int or one count per element; traced counts need
    ``total_repeat_length``, the static length of the result. When the counts sum to
    more than ``total_repeat_length`` the extra values are dropped; when to less, the
    last element of the axis fills the rest.
    """
    a = _arr("repeat", a)
    if axis is None or get_aval(a).ndim == 0:  # a scalar repeats as a 1-D array
        if axis is not None:
            canonicalize_axis(axis, 1)
        a, axis = ravel(a), 0
    shape = _shape(a)
    axis = canonicalize_axis(axis, len(shape))
    n = shape[axis]
    total = None if total_repeat_length is None else operator.index(total_repeat_length)
    if n == 0 and total:
        raise ValueError(f"repeat: cannot fill total_repeat_length={total} from an empty axis.")
    if type(repeats) is DimExpr:  # (plax.export) every element a symbolic number of times
        if total is not None:
            raise ValueError("jnp.repeat with a non-constant `repeats` is supported only for "
                             f"an integer or a symbolic dimension without total_repeat_length, "
                             f"got repeats={repeats} and total_repeat_length={total}.")
        return _repeat_int(a, repeats, axis)
    reps = _static_repeats(repeats)
    if reps is None:
        if total is None:
            raise ConcretizationTypeError(
                repeats, "The problem arose with the `repeats` argument of repeat: traced "
                         "repeats need total_repeat_length, the static length of the result.")
        return _repeat_traced(a, repeats, axis, total)
    if isinstance(reps, np.ndarray):
        if reps.shape[0] == 1:
            reps = int(reps[0])
        elif reps.shape[0] != n:
            raise ValueError(f"repeat: repeats has {reps.shape[0]} entries but axis {axis} of "
                             f"the array has size {n}.")
    if isinstance(reps, int):
        if total is None or total == reps * n:
            return _repeat_int(a, reps, axis)
        reps = np.full(n, reps, np.int64)
    if total is not None:
        reps = _fit_total(reps, total)
    if reps.size == 0 or np.all(reps == reps[0]):
        return _repeat_int(a, int(reps[0]) if reps.size else 0, axis)
    return _repeat_by_sort(a, axis, reps, host_keys=True)


def _repeat_int(a, r: int, axis: int):
    shape = _shape(a)
    wide = shape[:axis + 1] + (r,) + shape[axis + 1:]
    dims = tuple(range(axis + 1)) + tuple(range(axis + 2, len(shape) + 1))
    out = lax.broadcast_in_dim(a, wide, dims)
    return lax.reshape(out, shape[:axis] + (shape[axis] * r,) + shape[axis + 1:])


def _fit_total(reps: np.ndarray, total: int) -> np.ndarray:
    """Counts that sum to ``total``: cut from the end, or give the surplus to the last element."""
    kept = np.minimum(np.cumsum(reps), total)
    out = np.diff(kept, prepend=0)
    if reps.size:
        out[-1] += total - kept[-1]
    return out


def _repeat_by_sort(a, axis: int, reps, host_keys: bool, width: int | None = None,
                    total: int | None = None):
    """Repeat element i of ``axis`` reps[i] times: widen every element to the largest count,
    key the copies that are kept by their output position and the rest past the end, and
    sort (stably) by those keys so the kept copies come first, in order.
    """
    shape = _shape(a)
    n = shape[axis]
    if host_keys:
        width = int(reps.max())
        total = int(reps.sum())
        k = np.arange(width)
        starts = np.cumsum(reps) - reps
        keys = np.where(k[None, :] < reps[:, None], starts[:, None] + k[None, :], n * width)
        keys = keys.reshape(-1).astype(np.int32)
    else:
        keys = _traced_keys(reps, n, width)
    wide = _repeat_int(a, width, axis)
    keys = lax.broadcast_in_dim(keys, _shape(wide), (axis,))
    _, out = lax.sort_key_val(keys, wide, dimension=axis)
    return lax.slice_in_dim(out, 0, total, 1, axis)


def _traced_keys(reps, n: int, width: int):
    """Sort keys for traced int32 counts ``reps`` of shape (n,)."""
    starts = lax.sub(lax.cumsum(reps, 0), reps)
    k = lax.broadcasted_iota(np.int32, (n, width), 1)
    pos = lax.add(lax.broadcast_in_dim(starts, (n, width), (0,)), k)
    kept = lax.lt(k, lax.broadcast_in_dim(reps, (n, width), (0,)))
    keys = lax.select(kept, pos, lax.broadcast_in_dim(np.int32(n * width), (n, width), ()))
    return lax.reshape(keys, (n * width,))


def _repeat_traced(a, repeats, axis: int, total: int):
    shape = _shape(a)
    n = shape[axis]
    if total == 0:
        return _repeat_int(a, 0, axis)
    reps = lax.convert_element_type(asarray(repeats), np.int32)
    if get_aval(reps).size == 1:
        reps = lax.broadcast_in_dim(lax.reshape(reps, ()), (n,), ())
    if get_aval(reps).shape != (n,):
        raise ValueError(f"repeat: repeats has shape {get_aval(reps).shape} but axis {axis} of "
                         f"the array has size {n}.")
    out = _repeat_by_sort(a, axis, reps, host_keys=False, width=total, total=total)
    # positions past sum(repeats) hold the last element of the axis
    count = lax.reduce_sum(reps, (0,))
    out_shape = _shape(out)
    last = lax.broadcast_in_dim(lax.slice_in_dim(a, n - 1, n, 1, axis), out_shape,
                                tuple(range(len(shape))))
    pos = lax.broadcasted_iota(np.int32, out_shape, axis)
    return lax.select(lax.lt(pos, lax.broadcast_in_dim(count, out_shape, ())), out, last)


# --- broadcasting -----------------------------------------------------------------------
def broadcast_shapes(*shapes) -> tuple:
    """The shape that arrays of ``shapes`` broadcast to."""
    shapes = [static_int_tuple(s, "shape") for s in shapes]
    return _broadcast_shapes(*shapes) if shapes else ()


@takes_out_sharding
def broadcast_to(array, shape):
    """``array`` broadcast to ``shape`` (NumPy rules)."""
    a = _arr("broadcast_to", array)
    shape = static_int_tuple(shape, "shape")
    old = _shape(a)
    if any(d < 0 for d in shape):
        raise ValueError(f"broadcast_to: shape must be nonnegative, got {shape}.")
    if len(shape) < len(old):
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: arr_shape={old} "
                         f"shape={shape}")
    lead = len(shape) - len(old)
    if any(s not in (1, t) for s, t in zip(old, shape[lead:])):
        aval = get_aval(a)
        raise ValueError(f"Incompatible shapes for broadcasting: cannot broadcast an array of "
                         f"shape {old} ({aval.str_short()}) to the requested shape {shape}.")
    return lax.broadcast_in_dim(a, shape, tuple(range(lead, len(shape))))


def broadcast_arrays(*args) -> list:
    """The arguments broadcast against each other."""
    check_arraylike("broadcast_arrays", *args)
    arrays = [asarray(a) for a in args]
    target = _broadcast_shapes(*(_shape(a) for a in arrays)) if arrays else ()
    return [broadcast_to(a, target) for a in arrays]


# --- flipping and rolling ---------------------------------------------------------------
def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (all axes when None)."""
    m = _arr("flip", m)
    axes = canonicalize_axes(None if axis is None else static_int_tuple(axis, "axis"),
                             get_aval(m).ndim)
    return lax.rev(m, axes) if axes else m


def fliplr(m):
    """Reverse the order of columns (axis 1)."""
    return flip(m, 1)


def flipud(m):
    """Reverse the order of rows (axis 0)."""
    return flip(m, 0)


def _roll_static(a, shift: int, axis: int):
    n = _shape(a)[axis]
    if n == 0 or shift % n == 0:
        return a
    s = shift % n
    tail = lax.slice_in_dim(a, n - s, n, 1, axis)
    head = lax.slice_in_dim(a, 0, n - s, 1, axis)
    return lax.concatenate([tail, head], axis)


def _roll_dynamic(a, shift, axis: int):
    n = _shape(a)[axis]
    if n == 0:
        return a
    shift = lax.convert_element_type(shift, np.int32)
    s = lax.rem(shift, np.int32(n))
    s = lax.select(lax.lt(s, np.int32(0)), lax.add(s, np.int32(n)), s)
    doubled = lax.concatenate([a, a], axis)
    return lax.dynamic_slice_in_dim(doubled, lax.sub(np.int32(n), s), n, axis,
                                    allow_negative_indices=False)


def roll(a, shift, axis=None):
    """Shift elements cyclically by ``shift`` along ``axis`` (the flattened array when None)."""
    a = _arr("roll", a)
    if has_array_protocol(shift):
        shift = as_operand(shift)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    ndim = get_aval(a).ndim
    axes = static_int_tuple(axis, "axis")
    if isinstance(shift, Tracer) and shift.to_concrete_value() is None:
        shifts = ([shift] if shift.ndim == 0 else list(unstack(shift)))
        if len(shifts) == 1:
            shifts = shifts * len(axes)
        elif len(axes) == 1:
            axes = axes * len(shifts)
        if len(shifts) != len(axes):
            raise ValueError(f"roll: {len(shifts)} shifts do not match {len(axes)} axes.")
        for s, ax in zip(shifts, axes):
            a = _roll_dynamic(a, s, canonicalize_axis(ax, ndim))
        return a
    shifts = np.asarray(static_value(shift, "shift"))
    if shifts.dtype.kind not in "iubf":
        raise TypeError(f"roll: shift must be integers, got {shifts!r}.")
    try:
        shifts, axes_b = np.broadcast_arrays(shifts.astype(np.int64), np.asarray(axes))
    except ValueError:
        raise ValueError(f"roll: shift {shifts.tolist()} and axis {axes} must broadcast "
                         "together.") from None
    for s, ax in zip(shifts.reshape(-1).tolist(), axes_b.reshape(-1).tolist()):
        a = _roll_static(a, s, canonicalize_axis(ax, ndim))
    return a


def rot90(m, k: int = 1, axes=(0, 1)):
    """Rotate ``m`` by 90 degrees ``k`` times in the plane of ``axes`` (from the first toward
    the second)."""
    m = _arr("rot90", m)
    ndim = get_aval(m).ndim
    if ndim < 2:
        raise ValueError(f"rot90 requires its first argument to have ndim at least two, but got "
                         f"first argument of shape {_shape(m)}, which has ndim {ndim}")
    axes = static_int_tuple(axes, "axes")
    if len(axes) != 2:
        raise ValueError(f"rot90: len(axes) must be 2, got axes={axes}.")
    ax0, ax1 = canonicalize_axis(axes[0], ndim), canonicalize_axis(axes[1], ndim)
    if ax0 == ax1:
        raise ValueError("Axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return lax.rev(m, (ax0, ax1))
    perm = list(range(ndim))
    perm[ax0], perm[ax1] = perm[ax1], perm[ax0]
    if k == 1:
        return lax.transpose(lax.rev(m, (ax1,)), tuple(perm))
    return lax.rev(lax.transpose(m, tuple(perm)), (ax1,))


# --- sizes ------------------------------------------------------------------------------
def ndim(a) -> int:
    """The number of dimensions of ``a``."""
    return len(shape(a))


def shape(a) -> tuple:
    """The shape of ``a``."""
    if isinstance(a, ARRAY_TYPES):
        return _shape(a)
    if has_array_protocol(a):
        return _shape(as_operand(a))
    return tuple(int(d) for d in np.shape(a))


def size(a, axis=None) -> int:
    """The number of elements of ``a`` (along ``axis`` if given)."""
    s = shape(a)
    if axis is None:
        return _prod(s)
    return _prod(s[ax] for ax in canonicalize_axes(axis, len(s)))


def isscalar(element) -> bool:
    """Whether ``element`` is a scalar: unlike NumPy, 0-d arrays (and tracers) count, so the
    answer is the same under jit."""
    if isinstance(element, (ARRAY_TYPES, np.ndarray)):  # tracers are Arrays to isinstance
        return element.ndim == 0
    if has_array_protocol(element):
        return get_aval(from_array_protocol(element)).ndim == 0
    return bool(np.isscalar(element))


def iscomplexobj(x) -> bool:
    """Whether ``x`` has a complex dtype (by type: a zero imaginary part still counts).

    Anything with a ``dtype`` (arrays, ShapeDtypeStructs, and plax's scalar types such as
    ``jnp.complex64``) is judged by it, as in JAX."""
    if x is None:
        return False
    if has_array_protocol(x):
        x = as_operand(x)
    dt = getattr(x, "dtype", None)
    if not isinstance(dt, np.dtype) and not dtypes.is_extended(dt):
        if isinstance(x, (type, np.dtype)):
            raise TypeError(f"iscomplexobj/isrealobj take an array or a scalar, got the type "
                            f"{x!r}: for a type or dtype ask jnp.issubdtype({x!r}, "
                            "jnp.complexfloating).")
        dt = np.asarray(x).dtype
    return getattr(dt, "kind", None) == "c"


def isrealobj(x) -> bool:
    """Whether ``x`` does not have a complex dtype."""
    return not iscomplexobj(x)
