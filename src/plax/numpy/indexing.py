"""NumPy indexing on plax arrays.

``x[idx]`` with only integers, slices, None and Ellipsis stages as slice/rev/
dynamic_slice. An index holding integer arrays or boolean masks ("advanced"
indexing) lowers to one ``gather``; ``x.at[idx].set/add/...`` to one scatter.
Both share ``_plan``, which turns an index into gather/scatter dimension numbers
and an index array. Also ``take`` and ``take_along_axis``.

Out-of-bounds indices follow JAX: retrieval clamps them (the gather promises in-bounds
indices, which XLA clamps) and updates drop them (FILL_OR_DROP). Boolean masks must
be concrete: they become integer arrays on the host (``np.nonzero``).
"""
from __future__ import annotations

import functools
import operator
import warnings
from typing import NamedTuple

import numpy as np

from plax import lax
from plax.core import dtypes, errors
from plax.core.config import config
from plax.core.refs import Slice  # noqa: F401 (plax.ds makes them; indexing takes them)
from plax.core.source_info import pass_through_code, user_stacklevel
from plax.core.symbolic_shapes import (DimExpr, clamped_slice, dimension_as_value, max_dim,
                                       min_dim)
from plax.core.trace import Tracer, get_aval
from plax.first_order import indexing as lax_indexing
from plax.first_order import sharding_constraint
from plax.first_order.indexing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from plax.numpy import error_checks, util
from plax.runtime.array import ARRAY_TYPES

__all__ = ["take", "take_along_axis"]


class _DynamicSlices(Exception):
    """Raised by the index parser on a ``Slice``: the caller takes the dynamic-slice road
    (so the common path pays nothing for it)."""


def _split_dynamic(idx, ndim: int):
    """``idx`` with its ``Slice``s taken out: ``(slices, rest)``, ``slices`` a list of
    ``(axis, block start, block size)`` and ``rest`` the index to apply to the block."""
    items = idx if type(idx) is tuple else (idx,)
    if sum(i is Ellipsis for i in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for i in items if i is not Ellipsis and i is not None)
    expanded = []
    for i in items:
        expanded += [slice(None)] * (ndim - consumed) if i is Ellipsis else [i]
    slices, rest, axis = [], [], 0
    for i in expanded:
        if type(i) is Slice:
            slices.append((axis, i.start, (i.size - 1) * i.stride + 1 if i.size else 0))
            rest.append(slice(None, None, i.stride) if i.stride != 1 else slice(None))
        else:
            rest.append(i)
        if i is not None:
            axis += 1
    return slices, tuple(rest)


def _cut_blocks(arr, idx):
    """The block of ``arr`` the ``Slice``s of ``idx`` cut (dynamic slices, starts clamped
    as ``lax.dynamic_slice`` clamps them), their start indices, and the rest of ``idx``."""
    ndim = get_aval(arr).ndim
    slices, rest = _split_dynamic(idx, ndim)
    starts = [0] * ndim
    for axis, start, size in slices:
        starts[axis] = start
        arr = lax.dynamic_slice_in_dim(arr, start, size, axis=axis)
    return arr, starts, rest


def _take_with_dynamic_slices(arr, idx, **kw):
    block, _, rest = _cut_blocks(arr, idx)
    return rewriting_take(block, rest, **kw)


def _update_with_dynamic_slices(x, idx, y, kind, **kw):
    x = util.as_operand(x)
    block, starts, rest = _cut_blocks(x, idx)
    return _write_block(x, _scatter_update(block, rest, y, kind, **kw), starts)


def _write_block(x, block, starts):
    """``x`` with ``block`` written back where ``_cut_blocks`` cut it."""
    traced = [s for s in starts if not isinstance(s, int)]
    dtype = dtypes.result_type(*traced) if traced else np.dtype(np.int32)
    return lax.dynamic_update_slice(x, block, [lax.convert_element_type(s, dtype)
                                               for s in starts])


# --- parsing an index -------------------------------------------------------------------
class _Adv(NamedTuple):
    """An advanced index entry: an integer array (host or traced) indexing one axis, or the
    integer array a 0-d boolean turns into, which indexes no axis (``axis_free``)."""
    value: object
    axis_free: bool = False


class _Mask(NamedTuple):
    """A concrete boolean mask of rank >= 1 (expanded once its axes are known)."""
    value: np.ndarray


def _index_type_error(dtype) -> TypeError:
    return TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                     f"{np.dtype(dtype).name}")


def _bool0(flag) -> _Adv:
    """A 0-d boolean index: adds an axis of size 1 (True) or 0 (False)."""
    return _Adv(np.zeros(1 if flag else 0, np.int32), axis_free=True)


def _host_index(a: np.ndarray):
    """One entry from a host array (or a concrete plax array copied to the host)."""
    if a.dtype == np.bool_:
        return _bool0(bool(a)) if a.ndim == 0 else _Mask(a)
    if not np.issubdtype(a.dtype, np.integer):
        raise _index_type_error(a.dtype)
    return operator.index(a.item()) if a.ndim == 0 else _Adv(a)


def _holds_plax_values(seq) -> bool:
    return any(isinstance(v, ARRAY_TYPES) or
               (isinstance(v, (list, tuple)) and _holds_plax_values(v)) for v in seq)


def _convert_entry(i):
    """An index entry as None, Ellipsis, a slice, a scalar integer (static int or 0-d
    integer plax value), an _Adv or a _Mask."""
    if isinstance(i, slice):
        if any(isinstance(v, Tracer) for v in (i.start, i.stop, i.step)):
            raise IndexError(
                "Array slice indices must have static start/stop/step to be used with NumPy "
                f"indexing syntax. Found {i}. To index a statically sized array at a dynamic "
                "position, try lax.dynamic_slice/dynamic_update_slice (or plax.ds).")
        return i
    if i is None or i is Ellipsis:
        return i
    if isinstance(i, (bool, np.bool_)):
        return _bool0(i)
    if isinstance(i, str):
        raise TypeError(f"JAX does not support string indexing (nor does plax); got "
                        f"idx={i!r}")
    if isinstance(i, ARRAY_TYPES):
        aval = get_aval(i)
        if dtypes.is_bool(aval.dtype):
            if isinstance(i, Tracer):
                raise errors.NonConcreteBooleanIndexError(i)
            return _host_index(np.asarray(i))
        if not dtypes.is_integer(aval.dtype):
            raise _index_type_error(aval.dtype)
        return i if aval.ndim == 0 else _Adv(i)
    if isinstance(i, (list, tuple)):
        if _holds_plax_values(i):
            from plax.numpy.creation import asarray
            return _convert_entry(asarray(i))
        a = np.asarray(i)
        if a.size == 0:
            a = a.astype(np.int32)
        elif a.dtype.kind == "f":
            a = a.astype(dtypes.canonicalize_dtype(a.dtype))
        return _host_index(a)
    if isinstance(i, (np.ndarray, np.generic)):
        return _host_index(np.asarray(i))
    if isinstance(i, (float, complex)):
        raise _index_type_error(np.asarray(i).dtype)
    if hasattr(i, "__index__"):
        k = operator.index(i)
        dt = dtypes.default_int_dtype()  # a Python int index becomes an array of this dtype
        if not np.iinfo(dt).min <= k <= np.iinfo(dt).max:
            raise OverflowError(f"Python int {k} too large to convert to {dt.name}")
        return k
    if type(i) is Slice:
        raise _DynamicSlices
    raise TypeError(f"Indexing with {i!r} of type {type(i).__name__} is not supported: indices "
                    "must be integers, slices, None, Ellipsis, or integer/boolean arrays.")


def _consumed(entry) -> int:
    """How many operand axes an entry indexes."""
    if entry is None or entry is Ellipsis or (isinstance(entry, _Adv) and entry.axis_free):
        return 0
    return entry.value.ndim if isinstance(entry, _Mask) else 1


def _parse(idx, shape: tuple) -> list:
    """The index as a list of entries covering every operand axis: Ellipsis expanded,
    masks turned into integer arrays, missing trailing axes filled with full slices."""
    if not isinstance(idx, tuple):
        if isinstance(idx, list):
            raise TypeError("Using a non-tuple sequence for multidimensional indexing is not "
                            "allowed; use `arr[array(seq)]` (integer array) or `arr[tuple(seq)]` "
                            "(one index per axis) instead of `arr[seq]`.")
        idx = (idx,)
    entries = [_convert_entry(i) for i in idx]
    if sum(e is Ellipsis for e in entries) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    ndim = len(shape)
    used = sum(_consumed(e) for e in entries)
    if used > ndim:
        raise IndexError(f"Too many indices: array is {ndim}-dimensional, but {used} were indexed")
    if not any(e is Ellipsis for e in entries):
        entries.append(Ellipsis)
    out, axis = _Entries(), 0
    # NumPy's rule: advanced entries apart in the index as written (an Ellipsis between them
    # separates them even where it stands for no axis) put their result axes first.
    adv = [k for k, e in enumerate(entries) if isinstance(e, (_Adv, _Mask)) or _is_scalar(e)]
    out.apart = bool(adv) and adv != list(range(adv[0], adv[-1] + 1))
    for pos, e in enumerate(entries):
        if e is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
            axis += ndim - used
        elif isinstance(e, _Mask):
            k = e.value.ndim
            # (an empty mask selects nothing whatever its shape, as in NumPy)
            if e.value.shape != shape[axis:axis + k] and e.value.size:
                raise IndexError(f"boolean index did not match shape of indexed array in index "
                                 f"{pos}: got {e.value.shape}, expected {list(shape[axis:axis + k])}")
            out.extend(_Adv(a) for a in np.nonzero(e.value))
            axis += k
        else:
            out.append(e)
            axis += _consumed(e)
    return out


class _Entries(list):
    """The entries of a parsed index; ``apart``: its advanced entries were not adjacent."""
    apart = False


def _is_advanced(entries) -> bool:
    return any(isinstance(e, _Adv) for e in entries)


# --- basic indexing: slice, rev, dynamic_slice ------------------------------------------
def _basic_take(arr, entries):
    """``arr[idx]`` for an index of integers, slices and None (entries from _parse)."""
    shape = get_aval(arr).shape
    starts, limits, strides, reverse, squeeze = [], [], [], [], []
    pre_reverse = []   # symbolic axes sliced with a negative step: reversed before slicing
    dynamic = {}       # axis -> traced index
    new_axes = []      # positions of None in the output
    axis = 0
    out_pos = 0
    for i in entries:
        if i is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        size = shape[axis]
        if isinstance(i, slice) and (type(size) is DimExpr or any(
                type(v) is DimExpr for v in (i.start, i.stop, i.step))):  # (plax.export)
            start, stop, step, flip = clamped_slice(i, size)
            if flip:
                pre_reverse.append(axis)
            starts.append(start)
            limits.append(stop)
            strides.append(step)
            out_pos += 1
        elif isinstance(i, slice):
            start, stop, step = i.indices(size)
            count = len(range(start, stop, step))
            if step > 0:
                starts.append(start)
                limits.append(start + max(count - 1, 0) * step + (1 if count else 0))
                strides.append(step)
            else:
                last = start + (count - 1) * step if count else 0
                starts.append(last)
                limits.append(start + 1 if count else 0)
                strides.append(-step)
                reverse.append(axis)
            out_pos += 1
        elif isinstance(i, Tracer):
            if size == 0:
                raise IndexError(f"index is out of bounds for axis {axis} with size 0")
            dynamic[axis] = i
            starts.append(0)
            limits.append(size)
            strides.append(1)
            squeeze.append(axis)
        else:
            k = operator.index(i)
            if size == 0:
                raise IndexError(f"index is out of bounds for axis {axis} with size 0")
            # As JAX: negative indices wrap once, then out-of-bounds indices clamp.
            k = min_dim(max_dim(k + size if k < 0 else k, 0), size - 1)
            starts.append(k)
            limits.append(k + 1)
            strides.append(1)
            squeeze.append(axis)
        axis += 1
    out = lax.rev(arr, tuple(pre_reverse)) if pre_reverse else arr
    if any(s != 0 for s in starts) or tuple(limits) != shape or any(s != 1 for s in strides):
        out = lax.slice(out, tuple(starts), tuple(limits),
                        None if all(s == 1 for s in strides) else tuple(strides))
    if reverse:
        out = lax.rev(out, tuple(reverse))
    if dynamic:
        cur = get_aval(out).shape
        idx_operands = [dynamic.get(d, 0) for d in range(len(cur))]
        sizes = [1 if d in dynamic else cur[d] for d in range(len(cur))]
        out = lax.dynamic_slice(out, idx_operands, sizes)
    if squeeze:
        out = lax.squeeze(out, tuple(squeeze))
    if new_axes:
        out = lax.expand_dims(out, tuple(new_axes))
    if out is arr and isinstance(arr, np.ndarray):
        return arr.copy()
    return out


# --- the gather/scatter plan ------------------------------------------------------------
class _Plan(NamedTuple):
    """What ``x[idx]`` reads, as a gather: ``indices`` (batch_shape + (n_components,)),
    the dimension numbers and slice sizes, and the shape of the result."""
    indices: object
    offset_dims: tuple
    collapsed_dims: tuple
    index_map: tuple
    slice_sizes: tuple
    out_shape: tuple

    def gather_dnums(self):
        return GatherDimensionNumbers(self.offset_dims, self.collapsed_dims, self.index_map)

    def scatter_dnums(self):
        return ScatterDimensionNumbers(self.offset_dims, self.collapsed_dims, self.index_map)


def _index_dtype(shape) -> np.dtype:
    """int32 where every dimension fits in it; else (or with symbolic ones) the default int."""
    big = any(type(n) is DimExpr or n > np.iinfo(np.int32).max for n in shape)
    return dtypes.canonicalize_dtype(np.int64) if big else np.dtype(np.int32)


def _normalize_component(v, size: int, dtype: np.dtype, wrap: bool):
    """An index component in ``dtype`` with negative values counted from the end."""
    if not isinstance(v, ARRAY_TYPES):
        v = np.asarray(v)
        wrap_here = wrap and v.dtype.kind == "i" and bool((v < 0).any())
        if wrap_here and type(size) is not DimExpr:
            v = np.where(v < 0, v + size, v)
        info = np.iinfo(dtype)
        v = np.clip(v, info.min, info.max).astype(dtype)
        if not (wrap_here and type(size) is DimExpr):
            return v
    src = get_aval(v).dtype
    if src != dtype:
        v = lax.convert_element_type(v, dtype)
    if wrap and not dtypes.is_unsigned(src):
        n = lax.convert_element_type(dimension_as_value(size), dtype) \
            if type(size) is DimExpr else np.asarray(size, dtype)
        v = lax.select_n(lax.lt(v, np.zeros((), dtype)), v, lax.add(v, n))
    return v


def _place(v, axes: tuple, batch_shape: tuple):
    """``v`` broadcast to ``batch_shape + (1,)``, its axes at ``axes`` (NumPy broadcasting
    over size-1 axes)."""
    full = tuple(batch_shape) + (1,)
    if not isinstance(v, ARRAY_TYPES):
        shape = [1] * len(full)
        for a, n in zip(axes, np.shape(v)):
            shape[a] = n
        return np.broadcast_to(np.reshape(v, shape), full)
    vshape = get_aval(v).shape
    if any(n == 1 and full[a] != 1 for a, n in zip(axes, vshape)):
        keep = tuple(d for d, (a, n) in enumerate(zip(axes, vshape)) if not (n == 1 and full[a] != 1))
        v = lax.reshape(v, tuple(vshape[d] for d in keep))
        axes = tuple(axes[d] for d in keep)
    return lax.broadcast_in_dim(v, full, tuple(axes))


def _plan(shape: tuple, entries: list, wrap_negative: bool = True) -> _Plan:
    """The gather reading ``x[idx]`` from an operand of ``shape`` (entries from _parse)."""
    adv_pos = [k for k, e in enumerate(entries) if isinstance(e, _Adv) or _is_scalar(e)]
    adv_vals = [e.value if isinstance(e, _Adv) else e for k, e in enumerate(entries)
                if k in adv_pos]
    bshape = util.broadcast_shapes(*[util.shape_of(v) for v in adv_vals]) if adv_vals else ()
    contiguous = (adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) if adv_pos else True) \
        and not getattr(entries, "apart", False)
    batch_sizes: list = []      # index batch axes, in output order
    out_kinds: list = []        # "b" (batch) or "o" (window) per output axis
    components: list = []       # (operand axis, value, its batch axes)
    slice_sizes = list(shape)
    collapsed: list = []
    adv_axes: tuple = ()

    def add_broadcast_axes():
        nonlocal adv_axes
        adv_axes = tuple(range(len(batch_sizes), len(batch_sizes) + len(bshape)))
        batch_sizes.extend(bshape)
        out_kinds.extend("b" * len(bshape))

    if not contiguous:
        add_broadcast_axes()
    axis = 0
    for k, e in enumerate(entries):
        if contiguous and adv_pos and k == adv_pos[0]:
            add_broadcast_axes()
        if e is None:
            batch_sizes.append(1)
            out_kinds.append("b")
        elif isinstance(e, slice):
            start, stop, step = e.indices(shape[axis])
            count = len(range(start, stop, step))
            if step == 1:
                slice_sizes[axis] = count
                out_kinds.append("o")
                if start and count:
                    components.append((axis, np.asarray(start), ()))
            else:
                components.append((axis, start + step * np.arange(count), (len(batch_sizes),)))
                batch_sizes.append(count)
                out_kinds.append("b")
                slice_sizes[axis] = 1
                collapsed.append(axis)
            axis += 1
        elif isinstance(e, _Adv) and e.axis_free:
            pass
        else:  # an integer array or scalar: one collapsed axis
            v = e.value if isinstance(e, _Adv) else e
            nd = len(util.shape_of(v))
            components.append((axis, v, adv_axes[len(adv_axes) - nd:]))
            slice_sizes[axis] = 1
            collapsed.append(axis)
            axis += 1
    batch_shape = tuple(batch_sizes)
    idt = _index_dtype(shape)
    placed = [_place(_normalize_component(v, shape[a], idt, wrap_negative), axes, batch_shape)
              for a, v, axes in components]
    if not placed:
        indices = np.zeros(batch_shape + (0,), idt)
    elif all(isinstance(p, np.ndarray) for p in placed):
        indices = np.concatenate(placed, axis=-1)
    else:
        indices = placed[0] if len(placed) == 1 else lax.concatenate(placed, len(batch_shape))
    out_shape, sizes = [], iter(slice_sizes[d] for d in range(len(shape)) if d not in collapsed)
    batch = iter(batch_shape)
    for kind in out_kinds:
        out_shape.append(next(batch) if kind == "b" else next(sizes))
    offset_dims = tuple(p for p, kind in enumerate(out_kinds) if kind == "o")
    return _Plan(indices, offset_dims, tuple(collapsed), tuple(a for a, _, _ in components),
                 tuple(slice_sizes), tuple(out_shape))


def _is_scalar(e) -> bool:
    return (isinstance(e, (int, np.integer)) and not isinstance(e, bool)) or \
        isinstance(e, ARRAY_TYPES)


def _empty_axis_result(arr, plan: _Plan):
    """A gather cannot read a window of size 1 from an empty axis: an empty result is
    made directly; reading from an empty axis is an IndexError."""
    shape = get_aval(arr).shape
    for d in plan.collapsed_dims:
        if shape[d] == 0:
            if 0 in plan.out_shape:
                # Both are empty, so a reshape makes it, of any dtype (key arrays too).
                return lax.reshape(arr, plan.out_shape)
            raise IndexError(f"index is out of bounds for axis {d} with size 0")
    return None


def _gather(arr, entries, *, mode=None, fill_value=None, indices_are_sorted=False,
            unique_indices=False, wrap_negative=True):
    shape = get_aval(arr).shape
    plan = _plan(shape, entries, wrap_negative)
    empty = _empty_axis_result(arr, plan)
    if empty is not None:
        return empty
    if mode is None:  # (a mode given says what out-of-bounds indices mean: not an error)
        error_checks.check_gather_in_bounds([shape[a] for a in plan.index_map],
                                            plan.indices)
    return lax_indexing.gather(arr, plan.indices, plan.gather_dnums(), plan.slice_sizes,
                               mode=mode, fill_value=fill_value,
                               indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices)


def _checks_static_indices(mode) -> bool:
    """Whether ``jax_check_static_indices`` asks to validate static integers: for the modes
    that promise in-bounds indices (None and 'promise_in_bounds')."""
    return config.read("jax_check_static_indices") and (
        mode is None or GatherScatterMode.from_any(mode) is GatherScatterMode.PROMISE_IN_BOUNDS)


def validate_static_indices(entries, shape: tuple, normalize: bool = True) -> None:
    """An IndexError for a static integer entry (of ``_parse``) out of bounds; negative
    ones count from the end when ``normalize``."""
    axis = 0
    for e in entries:
        if isinstance(e, (int, np.integer)) and not isinstance(e, bool):
            size = shape[axis]
            k = int(e) + size if normalize and e < 0 else int(e)
            if not 0 <= k < size:
                raise IndexError(f"index {int(e)} out of bounds for axis {axis} with size "
                                 f"{size} (normalize_indices={normalize})")
        axis += _consumed(e)


def gather_take(arr, idx, *, mode=None, fill_value=None, indices_are_sorted=False,
                unique_indices=False, wrap_negative=True):
    """``arr[idx]`` as one gather, whatever the index (``plax.ds`` slices cut first)."""
    arr = util.as_operand(arr)
    kw = dict(mode=mode, fill_value=fill_value, indices_are_sorted=indices_are_sorted,
              unique_indices=unique_indices)
    try:
        entries = _parse(idx, get_aval(arr).shape)
    except _DynamicSlices:
        block, _, rest = _cut_blocks(arr, idx)
        return gather_take(block, rest, wrap_negative=wrap_negative, **kw)
    return _gather(arr, entries, wrap_negative=wrap_negative, **kw)


def rewriting_take(arr, idx, *, mode=None, fill_value=None, indices_are_sorted=False,
                   unique_indices=False):
    """``arr[idx]``: basic indices stage as slices, advanced ones as one gather."""
    arr = util.as_operand(arr)
    try:
        entries = _parse(idx, get_aval(arr).shape)
        if _checks_static_indices(mode):
            validate_static_indices(entries, get_aval(arr).shape)
    except _DynamicSlices:  # plax.ds(start, size) entries: dynamic slices first
        return _take_with_dynamic_slices(arr, idx, mode=mode, fill_value=fill_value,
                                         indices_are_sorted=indices_are_sorted,
                                         unique_indices=unique_indices)
    if not _is_advanced(entries) and mode is None and fill_value is None:
        return _basic_take(arr, entries)
    return _gather(arr, entries, mode=mode, fill_value=fill_value,
                   indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)


# --- x.at[idx]: scatter updates ---------------------------------------------------------
def _safe_to_cast(value, dtype: np.dtype) -> bool:
    return dtypes.result_type(value, dtype) == dtype


def _broadcast_updates(y, shape: tuple):
    """The updates broadcast to the indexed shape (NumPy rules; no extra leading axes)."""
    ys = util.shape_of(y)
    if len(ys) > len(shape):
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: arr_shape={ys} "
                         f"shape={shape}")
    if ys == shape:
        return y
    if not ys:
        return lax.broadcast_in_dim(y, shape, ())
    return util.broadcast_to_shape(y, shape)


_SCATTERS = {"set": lax_indexing.scatter, "add": lax_indexing.scatter_add,
             "sub": lax_indexing.scatter_sub, "mul": lax_indexing.scatter_mul,
             "min": lax_indexing.scatter_min, "max": lax_indexing.scatter_max}


def _scatter_update(x, idx, y, kind: str, *, indices_are_sorted=False, unique_indices=False,
                    mode=None, wrap_negative_indices=True):
    """``x`` with ``y`` combined (``kind``) into ``x[idx]``: one scatter. The operation runs
    in the promoted dtype of ``x`` and ``y``; the result has the dtype of ``x``."""
    x = util.as_operand(x)
    try:
        entries = _parse(idx, get_aval(x).shape)
    except _DynamicSlices:  # plax.ds(start, size) entries: a dynamic slice updated
        return _update_with_dynamic_slices(
            x, idx, y, kind, indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices)
    if isinstance(y, (list, tuple)):  # a list may hold traced values: x.at[i].set([0, t])
        from plax.numpy.creation import asarray
        y = asarray(y) if _holds_plax_values(y) else np.asarray(y)
    util.check_arraylike(f"x.at[idx].{kind}", y)
    y = util.as_operand(y)
    xa = get_aval(x)
    if not _safe_to_cast(y, xa.dtype):
        warnings.warn(f"scatter inputs have incompatible types: cannot safely cast value from "
                      f"dtype={dtypes.result_type(y)} to dtype={xa.dtype}. The values are "
                      "converted; future versions may make this an error.", FutureWarning,
                      stacklevel=user_stacklevel())
    x_p, y_p = util.promote_dtypes(x, y)
    dt = get_aval(x_p).dtype
    if dtypes.is_bool(dt) and kind in ("add", "mul"):
        raise TypeError(f"{kind} does not accept dtype bool: x.at[idx].{kind} needs a numeric "
                        "array (use set, min or max for booleans).")
    basic = not _is_advanced(entries)
    plan = _plan(xa.shape, entries, wrap_negative_indices)
    y_p = _broadcast_updates(y_p, plan.out_shape)
    if any(xa.shape[d] == 0 for d in plan.collapsed_dims) or 0 in plan.out_shape:
        out = x_p  # nothing is written
    else:
        out = _SCATTERS[kind](x_p, plan.indices, y_p, plan.scatter_dnums(),
                              indices_are_sorted=indices_are_sorted or basic,
                              unique_indices=unique_indices or basic, mode=mode)
    return util.convert(out, xa.dtype, xa.weak_type)


class IndexUpdateHelper:
    """``x.at``: index it to get a reference whose methods return updated copies of ``x``."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


def _takes_out_sharding(method):
    """An ``.at[idx]`` method gaining ``out_sharding=`` (a PartitionSpec or NamedSharding):
    the result laid out so, as ``plax.first_order.sharding_constraint.with_out_sharding`` does it."""
    @functools.wraps(method)
    def wrapped(self, *args, out_sharding=None, **kwargs):
        if out_sharding is None:
            return method(self, *args, **kwargs)
        index = self.index
        return sharding_constraint.with_out_sharding(
            lambda x, *a: method(_IndexUpdateRef(x, index), *a, **kwargs), out_sharding,
            self.array, *args)
    pass_through_code.add(wrapped.__code__)  # errors name the method, not the wrapper
    return wrapped


class _IndexUpdateRef:
    """``x.at[idx]``: functional versions of ``x[idx] = y``, ``x[idx] += y``, ...

    Each method returns a new array. ``mode`` says what happens to out-of-bounds indices
    (updates: dropped by default, or "clip"; get: clamped by default, or "fill" with
    ``fill_value``). With repeated indices ``set`` keeps one of the values (which one is
    unspecified) while ``add``/``multiply``/``min``/``max`` combine all of them.
    """
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    @_takes_out_sharding
    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None,
            wrap_negative_indices=True):
        """``x[idx]``, with control over out-of-bounds indices (and the result's sharding)."""
        x = util.as_operand(self.array)
        try:
            entries = _parse(self.index, get_aval(x).shape)
            if _checks_static_indices(mode):
                validate_static_indices(entries, get_aval(x).shape, wrap_negative_indices)
        except _DynamicSlices:
            block, _, rest = _cut_blocks(x, self.index)
            return _IndexUpdateRef(block, rest).get(
                indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                mode=mode, fill_value=fill_value, wrap_negative_indices=wrap_negative_indices)
        if (not _is_advanced(entries) and mode is None and fill_value is None
                and wrap_negative_indices and _static_in_bounds(entries, get_aval(x).shape)):
            return _basic_take(x, entries)
        return _gather(x, entries, mode=mode, fill_value=fill_value,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       wrap_negative=wrap_negative_indices)

    def _update(self, kind, values, kw):
        return _scatter_update(self.array, self.index, values, kind, **kw)

    @_takes_out_sharding
    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] = values``."""
        return self._update("set", values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    @_takes_out_sharding
    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] += values`` (repeated indices accumulate)."""
        return self._update("add", values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    @_takes_out_sharding
    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """``x[idx] -= values`` (repeated indices accumulate; a scatter-sub)."""
        if dtypes.is_bool(dtypes.result_type(self.array, values)):
            raise TypeError("subtract does not accept dtype bool: x.at[idx].subtract needs a "
                            "numeric array.")
        return self._update("sub", values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    @_takes_out_sharding
    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """``x[idx] *= values`` (repeated indices multiply)."""
        return self._update("mul", values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               wrap_negative_indices=True, out_sharding=None):
        """``x[idx] /= values``: ``x`` divided by the product of the values landing on each
        element (true division: integer arrays give floats). As in JAX, ``out_sharding`` lays
        out that product; the quotient's sharding combines it with ``x``'s."""
        from plax.numpy import ufuncs
        kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode, wrap_negative_indices=wrap_negative_indices)
        return ufuncs.divide(self.array, _IndexUpdateRef(_ones_like(self.array), self.index)
                             .multiply(values, out_sharding=out_sharding, **kw))

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True, out_sharding=None):
        """``x[idx] **= values``: ``x`` to the product of the values landing on each element
        (``out_sharding`` as in ``divide``)."""
        from plax.numpy import ufuncs
        kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode, wrap_negative_indices=wrap_negative_indices)
        return ufuncs.power(self.array, _IndexUpdateRef(_ones_like(self.array), self.index)
                            .multiply(values, out_sharding=out_sharding, **kw))

    @_takes_out_sharding
    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] = minimum(x[idx], values)`` (over all values landing on an element)."""
        return self._update("min", values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    @_takes_out_sharding
    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] = maximum(x[idx], values)`` (over all values landing on an element)."""
        return self._update("max", values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """``x[idx] = func(x[idx])`` for an elementwise ``func``, as one scatter: an element
        indexed k times gets ``func`` applied k times (as NumPy's ``ufunc.at``)."""
        x = util.as_operand(self.array)
        try:
            entries = _parse(self.index, get_aval(x).shape)
        except _DynamicSlices:  # plax.ds entries: apply within the dynamic block
            block, starts, rest = _cut_blocks(x, self.index)
            block = _IndexUpdateRef(block, rest).apply(
                func, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                mode=mode, wrap_negative_indices=wrap_negative_indices)
            return _write_block(x, block, starts)
        xa = get_aval(x)
        plan = _plan(xa.shape, entries, wrap_negative_indices)
        if any(xa.shape[d] == 0 for d in plan.collapsed_dims) or 0 in plan.out_shape:
            return x  # nothing is selected
        basic = not _is_advanced(entries)
        return lax_indexing.scatter_apply(
            x, plan.indices, func, plan.scatter_dnums(), update_shape=plan.out_shape,
            indices_are_sorted=indices_are_sorted or basic,
            unique_indices=unique_indices or basic, mode=mode)


def _ones_like(x):
    xa = get_aval(util.as_operand(x))
    return lax.broadcast_in_dim(np.ones((), xa.dtype), xa.shape, ())


def _static_in_bounds(entries, shape) -> bool:
    """Whether the static integers of a basic index are in bounds (else .get clamps them
    through a gather, as JAX does, where x[idx] raises)."""
    axis = 0
    for e in entries:
        if e is None:
            continue
        if isinstance(e, (int, np.integer)) and not -shape[axis] <= e < shape[axis]:
            return False
        axis += 1
    return True


# --- take, take_along_axis --------------------------------------------------------------
def _index_mode(mode, fn: str):
    """The gather mode for ``take``'s mode names (None: "fill")."""
    if isinstance(mode, GatherScatterMode):
        return mode
    if mode is None or mode == "fill":
        return GatherScatterMode.FILL_OR_DROP
    if mode == "raise":
        raise NotImplementedError(f"The 'raise' mode to {fn} is not supported: indices cannot "
                                  "be checked inside compiled code; use mode='clip' or 'fill'.")
    if mode == "wrap":
        return "wrap"
    return GatherScatterMode.from_any(mode)


def _integer_indices(indices, fn: str, error=TypeError):
    if isinstance(indices, (list, tuple)):
        indices = np.asarray(indices)
    util.check_arraylike(fn, indices)
    idx = util.as_operand(indices)
    dt = dtypes.dtype(idx)
    if not dtypes.is_integer(dt):
        raise error(f"{fn} indices must have an integer type, got {dt.name}")
    return idx


def _prepare_indices(idx, size: int, mode, wrap_negative: bool):
    """Indices as int32/int64 with negatives counted from the end, or wrapped."""
    idt = _index_dtype((size,))
    if mode == "wrap":
        from plax.numpy import ufuncs
        return ufuncs.remainder(_normalize_component(idx, size, idt, False),
                                np.asarray(size, idt))
    return _normalize_component(idx, size, idt, wrap_negative)


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (the flattened array if None).

    ``mode``: "fill" (default: out-of-bounds indices give ``fill_value``, NaN for inexact
    types), "clip", "wrap" or "promise_in_bounds"; negative indices count from the end.
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to take is not supported: plax arrays "
                                  "are immutable; use the returned array.")
    util.check_arraylike("take", a)
    a = util.as_operand(a)
    gmode = _index_mode(mode, "take")
    idx = _integer_indices(indices, "take", ValueError)  # a ValueError here, as in JAX
    if axis is None:
        a = lax.reshape(a, (int(np.prod(get_aval(a).shape, dtype=np.int64)),))
        axis = 0
    shape = get_aval(a).shape
    axis = util.canonicalize_axis(axis, len(shape))
    ishape = util.shape_of(idx)
    out_shape = shape[:axis] + ishape + shape[axis + 1:]
    if shape[axis] == 0:
        if 0 in ishape:
            return lax.broadcast_in_dim(np.zeros((), get_aval(a).dtype), out_shape, ())
        raise IndexError("Cannot do a non-empty take() from an empty axis.")
    idx = _expand_last(_prepare_indices(idx, shape[axis], gmode, True))
    fill_value = _fill_param(gmode, fill_value, get_aval(a).dtype)
    offset = tuple(range(axis)) + tuple(range(axis + len(ishape), len(out_shape)))
    dn = GatherDimensionNumbers(offset, (axis,), (axis,))
    sizes = shape[:axis] + (1,) + shape[axis + 1:]
    return lax_indexing.gather(a, idx, dn, sizes, mode=None if gmode == "wrap" else gmode,
                               fill_value=fill_value, unique_indices=unique_indices,
                               indices_are_sorted=indices_are_sorted)


def _fill_param(gmode, fill_value, dtype):
    """The fill value, made explicit for "fill" mode (as JAX prints it in jaxprs)."""
    if gmode is GatherScatterMode.FILL_OR_DROP and fill_value is None:
        return lax_indexing.default_fill_value(dtype)
    return fill_value


def _expand_last(idx):
    """Indices with a trailing index-vector axis of size 1."""
    if isinstance(idx, np.ndarray):
        return idx[..., None]
    shape = get_aval(idx).shape
    return lax.broadcast_in_dim(idx, shape + (1,), tuple(range(len(shape))))


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
    """``arr`` indexed along ``axis`` by ``indices`` of the same rank (other axes
    broadcast), e.g. with the output of argsort. Modes as for ``take`` except "wrap"."""
    util.check_arraylike("take_along_axis", arr)
    arr = util.as_operand(arr)
    idx = _integer_indices(indices, "take_along_axis")
    if mode == "wrap":
        raise ValueError('Unknown gather mode "wrap": take_along_axis supports "fill", "clip" '
                         'and "promise_in_bounds".')
    gmode = _index_mode(mode, "take_along_axis")
    if axis is None:
        if len(util.shape_of(idx)) != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape "
                             f"{util.shape_of(idx)}")
        arr = lax.reshape(arr, (int(np.prod(get_aval(arr).shape, dtype=np.int64)),))
        axis = 0
    shape, ishape = get_aval(arr).shape, util.shape_of(idx)
    if len(shape) != len(ishape):
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{len(ishape)} vs. {len(shape)}")
    axis = util.canonicalize_axis(axis, len(shape))
    rest = util.broadcast_shapes(shape[:axis] + (1,) + shape[axis + 1:],
                                 ishape[:axis] + (1,) + ishape[axis + 1:])
    arr_shape = rest[:axis] + (shape[axis],) + rest[axis + 1:]
    idx_shape = rest[:axis] + (ishape[axis],) + rest[axis + 1:]
    if arr_shape != shape:
        arr = util.broadcast_to_shape(arr, arr_shape)
    if idx_shape != ishape:
        idx = np.broadcast_to(idx, idx_shape) if isinstance(idx, np.ndarray) else \
            util.broadcast_to_shape(idx, idx_shape)
    if 0 in idx_shape:  # an empty result (a gather cannot slice a size-0 batch dimension)
        return lax.broadcast_in_dim(np.zeros((), get_aval(arr).dtype), idx_shape, ())
    if shape[axis] == 0:
        raise IndexError("Cannot do a non-empty take_along_axis() from an empty axis.")
    # (as JAX: negative indices are left alone under "promise_in_bounds" unless asked)
    wrap = mode != "promise_in_bounds" if wrap_negative_indices is None else \
        bool(wrap_negative_indices)
    idx = _prepare_indices(idx, shape[axis], gmode, wrap)
    # (the index-vector axis added by a reshape, as JAX does: TPU kernels lower that)
    idx = idx[..., None] if isinstance(idx, np.ndarray) else \
        lax.reshape(idx, idx_shape + (1,))
    fill_value = _fill_param(gmode, fill_value, get_aval(arr).dtype)
    batch = tuple(d for d in range(len(shape)) if d != axis)
    dn = GatherDimensionNumbers((), (axis,), (axis,), batch, batch)
    return lax_indexing.gather(arr, idx, dn, (1,) * len(shape), mode=gmode,
                               fill_value=fill_value)
