"""The state primitives: reading and writing a mutable reference in a jaxpr.

``get_p.bind(ref, *leaves, tree=tree)`` reads the value ``ref`` holds seen through its chain
of transforms (``plax.core.refs``: ``NDIndexer``s, ``RefReshaper``s, ``RefBitcaster``s),
which ``tree``
rebuilds from ``leaves`` (the dynamic parts of the indices, operands of the equation).
``swap_p.bind(ref, value, *leaves, tree=tree)`` writes ``value`` there and returns what was
there; ``addupdate_p.bind(ref, value, *leaves, tree=tree)`` adds ``value`` into it (no
results). Their equations carry a ``ReadEffect``/``WriteEffect``/``AccumEffect`` on the
reference, and print as ``x <- r[i]``, ``x, r[i] <- r[i], v`` and ``r[i] += v``.

Rules: jvp reads and writes the tangent reference alongside; transpose turns a read into an
accumulation into the cotangent reference (and the reverse); vmap folds the batch
dimensions of the reference and of the indices into the index (an iota index for the
reference's when an index is batched); discharge (``plax.transforms.discharge``) computes
on the value the reference holds with ``read_view``/``update_view`` (dynamic slices, and a
gather or scatter for integer-array indices).

``ref_get``/``ref_swap``/``ref_set``/``ref_addupdate`` are the user-level forms; they take a
reference, a ``TransformedRef`` view (``ref.at[idx]``, ``ref.reshape(...)``,
``ref.bitcast(dtype)``) or a
``plax.ref.Ref`` box (which reads and writes the array it holds itself).
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.effects import AccumEffect, ReadEffect, WriteEffect
from plax.core.jaxpr import Literal
from plax.core.primitive import Primitive
from plax.core.refs import (AbstractRef, NDIndexer, RefBitcaster, RefReshaper, Slice,
                             is_int_like, transformed_aval)
from plax.core.rules import (Zero, batch_rules, discharge_rules, is_undefined, jvp_rules,
                             not_mapped, pp_eqn_rules, register_lowering, transpose_rules)
from plax.core.trace import Tracer, get_aval
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import comparison, conversion, shapes, slicing
from plax.first_order import indexing as lax_indexing
from plax.first_order.ad_util import instantiate
from plax.first_order.arithmetic import add
from plax.first_order.batch_util import move_batch_dim, moveaxis

__all__ = ["get_p", "swap_p", "addupdate_p", "ref_get", "ref_set", "ref_swap",
           "ref_addupdate", "TransformedRef", "read_view", "update_view"]

get_p = Primitive("get")
swap_p = Primitive("swap")
addupdate_p = Primitive("addupdate", multiple_results=True)


# --- the user-level forms -------------------------------------------------------------------
class TransformedRef:
    """A view of reference ``ref`` through ``transforms``: reads and writes act on that part
    of the value ``ref`` holds."""

    __slots__ = ("ref", "transforms")

    def __init__(self, ref, transforms):
        self.ref, self.transforms = ref, tuple(transforms)

    @property
    def multiref(self) -> bool:
        """Whether this views one of several references (``ref`` their tuple, the one
        transform a ``RefSelector``: ``pl.select_ref``)."""
        return type(self.ref) is tuple

    @property
    def aval(self):
        if self.multiref:
            avals = [_ref_aval(r, "select_ref") for r in self.ref]
            if any(a != avals[0] for a in avals[1:]):
                raise TypeError("Cannot select from Refs of different types: "
                                f"{[a.str_short() for a in avals]}")
            return avals[0]
        return AbstractRef(transformed_aval(_inner_aval(self.ref), self.transforms))

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @property
    def at(self):
        return RefIndexer(self)

    def reshape(self, *shape):
        return reshape_ref(self, *shape)

    def bitcast(self, dtype):
        return bitcast_ref(self, dtype)

    def __getitem__(self, idx):
        return ref_get(self, idx)

    def __setitem__(self, idx, value):
        ref_set(self, idx, value)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        return f"TransformedRef(ref={self.ref!r}, transforms={self.transforms})"


class RefIndexer:
    """``ref.at[idx]``: the view of ``ref`` at ``idx`` (a ``TransformedRef``)."""

    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref

    def __getitem__(self, idx):
        ref, transforms = _split(self.ref)
        view = transformed_aval(_inner_aval(ref), transforms)
        return TransformedRef(ref, transforms + (_indexer(idx, view),))


def reshape_ref(ref, *shape) -> TransformedRef:
    """The view of ``ref`` as ``shape`` (one entry may be -1)."""
    ref, transforms = _split(ref)
    view = transformed_aval(_inner_aval(ref), transforms)
    return TransformedRef(ref, transforms + (
        RefReshaper.from_ref_new_shape(view.shape, view.dtype, *shape),))


def bitcast_ref(ref, dtype) -> TransformedRef:
    """The view of ``ref``'s bits as ``dtype`` (TPU's layout: elements of another width pack
    into, or unpack from, the second-minor axis)."""
    ref, transforms = _split(ref)
    view = transformed_aval(_inner_aval(ref), transforms)
    return TransformedRef(ref, transforms + (
        RefBitcaster.from_ref_new_dtype(view.shape, view.dtype, dtype),))


def _split(ref):
    # (a view of several references stays whole: the views of it go after its selection)
    if type(ref) is TransformedRef and not ref.multiref:
        return ref.ref, ref.transforms
    return ref, ()


def _ref_aval(ref, what: str):
    aval = (ref.aval if hasattr(type(ref), "_transformed_get") or type(ref) is TransformedRef
            else get_aval(ref))
    if not isinstance(aval, AbstractRef):
        raise ValueError(f"`{what}` takes a mutable array reference (a Ref), got a value of "
                         f"type {aval.str_short() if hasattr(aval, 'str_short') else aval}.")
    return aval


def _inner_aval(ref):
    return _ref_aval(ref, "a reference view").inner_aval


def _indexer(idx, view) -> NDIndexer:
    if idx is None:
        idx = ()
    shape = getattr(view, "shape", None)
    if shape is None:  # (a token: only the whole value)
        return NDIndexer((), (), ())
    indexer = NDIndexer.from_indices_shape(idx, shape)
    for i in indexer.indices:
        if type(i) is not Slice and not is_int_like(i):
            raise TypeError(f"Reference indices must be integers, slices or integer arrays, "
                            f"got {i!r}.")
    return indexer


def _transforms(ref, idx, what: str):
    ref, transforms = _split(ref)
    if type(ref) is TransformedRef:
        raise NotImplementedError(f"ref_{what} with multi-ref TransformedRef is not supported "
                                  "(a pl.select_ref view is a DMA operand only).")
    view = transformed_aval(_ref_aval(ref, what).inner_aval, transforms)
    return ref, transforms + (_indexer(idx, view),), view


def _as_value(value, want, what: str):
    """``value`` as a value of ``want``'s dtype: weakly typed values (Python scalars) are
    converted; others must match."""
    have = get_aval(value)
    if isinstance(have, AbstractRef):
        raise ValueError("Cannot store a Ref into another Ref: read the value it holds "
                         f"with `[...]` before writing it ({what}).")
    if not hasattr(want, "shape"):
        return value
    if have.dtype != want.dtype and (have.weak_type or not isinstance(value, Tracer) and
                                     not hasattr(value, "dtype")):
        value = conversion.convert_element_type(value, want.dtype)
    return value


def _bind(prim, ref, transforms, *value):
    leaves, tree = tree_flatten(tuple(transforms))
    return prim.bind(ref, *value, *leaves, tree=tree)


def ref_get(ref, idx=()):
    """The value ``ref`` (a reference or a view of one) holds at ``idx``."""
    ref, transforms, _ = _transforms(ref, idx, "get")
    if hasattr(type(ref), "_transformed_get"):
        return ref._transformed_get(transforms)
    return _bind(get_p, ref, transforms)


def ref_swap(ref, idx, value, _function_name: str = "swap"):
    """Write ``value`` at ``ref[idx]``; what was there."""
    ref, transforms, view = _transforms(ref, idx, _function_name)
    value = _as_value(value, transformed_aval(view, transforms[-1:]), _function_name)
    if hasattr(type(ref), "_transformed_get"):
        return ref._transformed_swap(transforms, value)
    return _bind(swap_p, ref, transforms, value)


def ref_set(ref, idx, value) -> None:
    """Write ``value`` at ``ref[idx]``."""
    ref_swap(ref, idx, value, _function_name="set")


def ref_addupdate(ref, idx, x) -> None:
    """Add ``x`` into ``ref[idx]``."""
    ref, transforms, view = _transforms(ref, idx, "addupdate")
    x = _as_value(x, transformed_aval(view, transforms[-1:]), "addupdate")
    if hasattr(type(ref), "_transformed_get"):
        return ref._transformed_addupdate(transforms, x)
    _bind(addupdate_p, ref, transforms, x)
    return None


# --- abstract evaluation --------------------------------------------------------------------
def _view(ref, leaves, tree, what: str):
    if not isinstance(ref, AbstractRef):
        raise ValueError(f"`{what}` takes a mutable array reference (a Ref), got a value of "
                         f"type {ref.str_short() if hasattr(ref, 'str_short') else ref}.")
    return transformed_aval(ref.inner_aval, tree_unflatten(tree, leaves))


def _check_value(view, val, what: str) -> None:
    if not hasattr(view, "shape"):
        return
    if tuple(val.shape) != tuple(view.shape):
        raise ValueError(f"Invalid shape for `{what}`. Ref shape: {view.shape}. Expected "
                         f"shape: {view.shape}. Value shape: {tuple(val.shape)}.")
    if val.dtype != view.dtype:
        raise ValueError(f"Invalid dtype for `{what}`. Ref dtype: {view.dtype}. Value "
                         f"dtype: {val.dtype}.")


@get_p.def_effectful_abstract_eval
def _get_abstract(ref, *leaves, tree):
    return _view(ref, leaves, tree, "get"), {ReadEffect(0)}


@swap_p.def_effectful_abstract_eval
def _swap_abstract(ref, val, *leaves, tree):
    view = _view(ref, leaves, tree, "swap")
    _check_value(view, val, "swap")
    return view, {WriteEffect(0)}


@addupdate_p.def_effectful_abstract_eval
def _addupdate_abstract(ref, val, *leaves, tree):
    view = _view(ref, leaves, tree, "addupdate")
    _check_value(view, val, "addupdate")
    return [], {AccumEffect(0)}


# --- printing -------------------------------------------------------------------------------
def _pp_index(t, printer) -> str:
    if type(t) is RefReshaper:
        return "{reshape(" + ",".join(map(str, t.shape)) + ")}"
    if type(t) is RefBitcaster:
        return f"{{bitcast({t.dtype})}}"
    if not t.indices or all(type(i) is Slice and _static(i.start) == 0 and i.stride == 1
                            and i.size == d for i, d in zip(t.indices, t.shape)):
        return "[...]"

    def one(i, d):  # (as JAX: a bound at the axis' edge is left out)
        if type(i) is not Slice:
            return _atom(i, printer)
        start = _static(i.start)
        end = start + i.size * i.stride - (i.stride - 1) if start is not None else None
        end = f"{_atom(i.start, printer)}+{i.size}" if end is None else \
            "" if end == d else str(end)
        text = f"{'' if start == 0 else _atom(i.start, printer)}:{end}"
        return text + (f":{i.stride}" if i.stride != 1 else "")
    return "[" + ",".join(one(i, d) for i, d in zip(t.indices, t.shape)) + "]"


def _static(x):
    if type(x) is Literal:
        x = x.val
    return int(x) if isinstance(x, (int, np.integer)) else None


def _atom(x, printer) -> str:
    if type(x) is Literal:
        return str(x.val.item() if hasattr(x.val, "item") else x.val)
    return printer.name(x)


def _pp_ref(eqn, printer, n_values: int) -> str:
    ref = eqn.invars[0]
    transforms = tree_unflatten(eqn.params["tree"], eqn.invars[1 + n_values:])
    shown = [text for text in (_pp_index(t, printer) for t in transforms) if text != "[...]"]
    return printer.name(ref) + ("".join(shown) if shown else "[...]")


def _pp_get(eqn, printer):
    return f"{printer.out_binder(eqn.outvars[0])} <- {_pp_ref(eqn, printer, 0)}"


def _pp_swap(eqn, printer):
    target = _pp_ref(eqn, printer, 1)
    value = printer.name(eqn.invars[1])
    out = eqn.outvars[0]
    if printer.used is not None and out not in printer.used:
        return f"{target} <- {value}"
    return f"{printer.binder(out)}, {target} <- {target}, {value}"


def _pp_addupdate(eqn, printer):
    return f"{_pp_ref(eqn, printer, 1)} += {printer.name(eqn.invars[1])}"


pp_eqn_rules[get_p] = _pp_get
pp_eqn_rules[swap_p] = _pp_swap
pp_eqn_rules[addupdate_p] = _pp_addupdate


# --- the value seen through a view, and the value with the view updated -------------------
def _int32(i):
    return conversion.convert_element_type(i, np.int32) if get_aval(i).dtype != np.int32 \
        else i


def _window(x, t: NDIndexer, keep_ints: bool):
    """The block of ``x`` the ``Slice``s of ``t`` cut (integer axes kept whole when
    ``keep_ints``, else cut to the one element), and its starts."""
    starts, sizes = [], []
    for i, d in zip(t.indices, t.shape):
        if type(i) is Slice:
            starts.append(i.start)
            sizes.append((i.size - 1) * i.stride + 1 if i.size else 0)
        elif keep_ints:
            starts.append(0)
            sizes.append(d)
        else:
            starts.append(i)
            sizes.append(1)
    if all(isinstance(s, (int, np.integer)) and int(s) == 0 for s in starts) and \
            tuple(sizes) == tuple(t.shape):
        return x, starts
    return slicing.dynamic_slice(x, [_int32(s) if isinstance(s, Tracer) else s
                                     for s in starts], sizes), starts


def _strides(t: NDIndexer):
    return [i.stride if type(i) is Slice else 1 for i in t.indices]


def _gather_plan(w, t: NDIndexer):
    """The index array and dimension numbers a gather (or scatter) of the integer indices of
    ``t`` from block ``w`` uses."""
    axes = t.int_positions()
    shape = t.int_indexer_shape
    parts = []
    for k in axes:
        i = _int32(t.indices[k]) if isinstance(t.indices[k], Tracer) or hasattr(
            t.indices[k], "dtype") else np.int32(t.indices[k])
        d = t.shape[k]
        i = comparison.select_n(comparison.lt(i, np.int32(0)), i, add(i, np.int32(d)))
        rank = len(get_aval(i).shape)
        i = shapes.broadcast_in_dim(i, shape, tuple(range(len(shape) - rank, len(shape))))
        parts.append(shapes.reshape(i, shape + (1,)))
    indices = parts[0] if len(parts) == 1 else shapes.concatenate(parts, len(shape))
    out_rank = len(shape) + len(t.indices) - len(axes)
    start = t.int_dims_start()
    window_dims = tuple(p for p in range(out_rank) if not start <= p < start + len(shape))
    sizes = tuple(1 if k in axes else get_aval(w).shape[k] for k in range(len(t.indices)))
    return indices, window_dims, tuple(axes), sizes


def _has_arrays(t: NDIndexer) -> bool:
    return any(np.shape(i) != () if not hasattr(i, "shape") else tuple(i.shape) != ()
               for i in t.indices if type(i) is not Slice)


def packing_bitcast(x, *, ty):
    """``x``'s bits as ``ty``, narrower elements packed along the second-minor axis (the
    value of ``pltpu.bitcast`` and of a bitcast view; no checks)."""
    src, dst = dtypes.itemsize_bits(get_aval(x).dtype), dtypes.itemsize_bits(ty)
    if src < dst:  # consecutive rows pack into one element
        *lead, m, n = get_aval(x).shape
        k = dst // src
        x = shapes.reshape(x, (*lead, m // k, k, n))
        x = shapes.transpose(x, tuple(range(len(lead))) + tuple(
            len(lead) + p for p in (0, 2, 1)))
        return conversion.bitcast_convert_type(x, ty)
    if src > dst:  # one element unpacks into consecutive rows
        y = conversion.bitcast_convert_type(x, ty)
        *lead, m, n, k = get_aval(y).shape
        y = shapes.transpose(y, tuple(range(len(lead))) + tuple(
            len(lead) + p for p in (0, 2, 1)))
        return shapes.reshape(y, (*lead, m * k, n))
    return conversion.bitcast_convert_type(x, ty)


def _read_one(x, t):
    if type(t) is RefReshaper:
        return shapes.reshape(x, t.shape)
    if type(t) is RefBitcaster:
        return packing_bitcast(x, ty=t.dtype)
    if not hasattr(get_aval(x), "shape") or t.is_trivial():
        return x
    arrays = _has_arrays(t)
    w, _ = _window(x, t, keep_ints=arrays)
    strides = _strides(t)
    if any(s != 1 for s in strides):
        ws = get_aval(w).shape
        w = slicing.slice(w, (0,) * len(ws), ws, strides)
    if not arrays:
        ints = tuple(k for k, i in enumerate(t.indices) if type(i) is not Slice)
        return shapes.squeeze(w, ints) if ints else w
    indices, window_dims, axes, sizes = _gather_plan(w, t)
    dn = lax_indexing.GatherDimensionNumbers(window_dims, axes, axes)
    return lax_indexing.gather(w, indices, dn, sizes, mode=lax_indexing.GatherScatterMode.CLIP)


def _write_one(x, t, new, accumulate: bool):
    """``x`` with the part ``t`` selects replaced by (``accumulate``: increased by) ``new``."""
    if type(t) is RefReshaper:
        return shapes.reshape(add(shapes.reshape(x, t.shape), new) if accumulate else new,
                              get_aval(x).shape)
    if type(t) is RefBitcaster:
        if accumulate:
            new = add(packing_bitcast(x, ty=t.dtype), new)
        return packing_bitcast(new, ty=get_aval(x).dtype)
    if not hasattr(get_aval(x), "shape") or t.is_trivial():
        return add(x, new) if accumulate else new
    if any(s != 1 for s in _strides(t)):
        raise NotImplementedError("Writing a reference through a strided slice is not "
                                  "supported yet.")
    arrays = _has_arrays(t)
    w, starts = _window(x, t, keep_ints=arrays)
    if not arrays:
        new = shapes.reshape(new, get_aval(w).shape)
        w = add(w, new) if accumulate else new
    else:
        indices, window_dims, axes, _ = _gather_plan(w, t)
        dn = lax_indexing.ScatterDimensionNumbers(window_dims, axes, axes)
        scatter = lax_indexing.scatter_add if accumulate else lax_indexing.scatter
        w = scatter(w, indices, new, dn, mode=lax_indexing.GatherScatterMode.CLIP)
    if get_aval(w).shape == get_aval(x).shape:
        return w
    return slicing.dynamic_update_slice(x, w, [_int32(s) if isinstance(s, Tracer) else s
                                               for s in starts])


def read_view(x, transforms):
    """The part of value ``x`` seen through ``transforms``."""
    for t in transforms:
        x = _read_one(x, t)
    return x


def update_view(x, transforms, new, accumulate: bool = False):
    """``x`` with the part seen through ``transforms`` replaced by (or, ``accumulate``,
    increased by) ``new``."""
    if not transforms:
        return add(x, new) if accumulate else new
    if len(transforms) == 1:
        return _write_one(x, transforms[0], new, accumulate)
    inner = _read_one(x, transforms[0])
    return _write_one(x, transforms[0], update_view(inner, transforms[1:], new, accumulate),
                      False)


def _get_discharge(should, in_avals, out_avals, x, *leaves, tree):
    return [None] * (1 + len(leaves)), read_view(x, tree_unflatten(tree, leaves))


def _swap_discharge(should, in_avals, out_avals, x, val, *leaves, tree):
    transforms = tree_unflatten(tree, leaves)
    old = read_view(x, transforms)
    return [update_view(x, transforms, val), None] + [None] * len(leaves), old


def _addupdate_discharge(should, in_avals, out_avals, x, val, *leaves, tree):
    new = update_view(x, tree_unflatten(tree, leaves), val, accumulate=True)
    return [new, None] + [None] * len(leaves), []


discharge_rules[get_p] = _get_discharge
discharge_rules[swap_p] = _swap_discharge
discharge_rules[addupdate_p] = _addupdate_discharge


# --- differentiation ------------------------------------------------------------------------
def _tangent(t):
    """A real tangent for ``t``: a scalar zero is a constant (a literal when staged)."""
    if type(t) is Zero and t.aval.shape == () and not dtypes.is_extended(t.aval.dtype):
        return np.zeros((), t.aval.dtype)
    return instantiate(t)


def _get_jvp(primals, tangents, *, tree):
    ref, *leaves = primals
    out = get_p.bind(ref, *leaves, tree=tree)
    ref_t = tangents[0]
    if type(ref_t) is Zero:
        return out, Zero(get_aval(out).to_tangent_aval())
    return out, get_p.bind(ref_t, *leaves, tree=tree)


def _swap_jvp(primals, tangents, *, tree):
    ref, val, *leaves = primals
    out = swap_p.bind(ref, val, *leaves, tree=tree)
    ref_t, val_t = tangents[:2]
    if type(ref_t) is Zero:
        return out, Zero(get_aval(out).to_tangent_aval())
    return out, swap_p.bind(ref_t, _tangent(val_t), *leaves, tree=tree)


def _addupdate_jvp(primals, tangents, *, tree):
    ref, val, *leaves = primals
    addupdate_p.bind(ref, val, *leaves, tree=tree)
    ref_t, val_t = tangents[:2]
    if type(ref_t) is not Zero:
        addupdate_p.bind(ref_t, _tangent(val_t), *leaves, tree=tree)
    return [], []


jvp_rules[get_p] = _get_jvp
jvp_rules[swap_p] = _swap_jvp
jvp_rules[addupdate_p] = _addupdate_jvp


# A reference being transposed holds the cotangent of its value: a read becomes an
# accumulation into it, a write of x reads x's cotangent out (and the reverse).
def _get_transpose(ct, ref, *leaves, tree):
    if type(ct) is not Zero:
        addupdate_p.bind(ref, ct, *leaves, tree=tree)
    return [None] * (1 + len(leaves))


def _swap_transpose(ct, ref, val, *leaves, tree):
    if not is_undefined(val):
        raise NotImplementedError("swap is transposed only in the value it writes.")
    ct = instantiate(ct) if type(ct) is Zero else ct
    return [None, swap_p.bind(ref, ct, *leaves, tree=tree)] + [None] * len(leaves)


def _addupdate_transpose(cts, ref, val, *leaves, tree):
    if not is_undefined(val):
        raise NotImplementedError("addupdate is transposed only in the value it adds.")
    return [None, get_p.bind(ref, *leaves, tree=tree)] + [None] * len(leaves)


transpose_rules[get_p] = _get_transpose
transpose_rules[swap_p] = _swap_transpose
transpose_rules[addupdate_p] = _addupdate_transpose


# --- batching -------------------------------------------------------------------------------
def _insert(t: tuple, at: int, item) -> tuple:
    return t[:at] + (item,) + t[at:]


def _batch_indexer(t: NDIndexer, dims, value_dim, size: int):
    """``t`` (its index leaves batched along ``dims``, a matching tree) applied to a value
    batched along ``value_dim``: the indexer doing it for every member at once, where the
    batch dimension is in what it selects, and the permutation (or None) taking that to the
    members' own layout (an iota index for the value's batch dimension may part the integer
    indices, whose dimensions then go first)."""
    int_dims = [d for i, d in zip(t.indices, dims) if type(i) is not Slice]
    if any(type(i) is Slice and d.start is not not_mapped for i, d in zip(t.indices, dims)):
        raise NotImplementedError("vmap of a reference slice whose start is batched.")
    if all(d is not_mapped for d in int_dims):
        if value_dim is not_mapped:
            return t, not_mapped
        new = NDIndexer(_insert(t.indices, value_dim, Slice(0, size)),
                        _insert(t.shape, value_dim, size), t.int_indexer_shape)
        k = sum(1 for i in new.indices[:value_dim] if type(i) is Slice)
        if new.int_positions():
            start = new.int_dims_start()
            return new, k if k < start else k + len(new.int_indexer_shape), None
        return new, k, None
    rank = len(t.int_indexer_shape)
    indices = []
    for i, d in zip(t.indices, dims):
        if type(i) is not Slice and d is not not_mapped:
            i = moveaxis(i, d, 0)
            shape = get_aval(i).shape
            i = shapes.reshape(i, (size,) + (1,) * (rank - len(shape) + 1) + shape[1:])
        indices.append(i)
    shape = t.shape
    if value_dim is not not_mapped:
        iota = shapes.broadcasted_iota(np.int32, (size,) + (1,) * rank, 0)
        indices, shape = _insert(tuple(indices), value_dim, iota), _insert(shape, value_dim, size)
    new = NDIndexer(indices, shape, (size,) + t.int_indexer_shape)
    start = t.int_dims_start()
    if new.int_dims_first() and start:  # (batch, ints, slices) -> (batch, slices[:s], ints, ..)
        k, n = len(t.int_indexer_shape), len(new.get_indexer_shape())
        perm = ((0,) + tuple(range(1 + k, 1 + k + start)) + tuple(range(1, 1 + k))
                + tuple(range(1 + k + start, n)))
        return new, 0, perm
    return new, new.int_dims_start(), None


def _batch_transforms(transforms, dims, ref_dim, size: int):
    """The transforms doing ``transforms`` for every member at once, where the batch
    dimension is in what they select, and the permutation (or None) putting that in the
    members' layout."""
    new, at, perm = [], ref_dim, None
    for t, d in zip(transforms, dims):
        if perm is not None:
            raise NotImplementedError("vmap of a reference view whose batched indices are "
                                      "parted by its batch dimension, viewed further.")
        if type(t) is RefReshaper:
            if at is not not_mapped:
                if at != 0:
                    raise NotImplementedError("vmap of a reshaped reference batched along an "
                                              "axis other than its first.")
                t = RefReshaper(t.dtype, (size,) + t.shape)
            new.append(t)
        elif type(t) is RefBitcaster:
            if at is not not_mapped:
                if at >= len(t.shape) - 1:  # (the bitcast packs along the last two axes)
                    raise NotImplementedError("vmap of a bitcast reference batched along "
                                              "one of its last two axes.")
                t = RefBitcaster(t.dtype, _insert(t.shape, at, size))
            new.append(t)
        else:
            t, at, perm = _batch_indexer(t, d.indices, at, size)
            new.append(t)
    return tuple(new), at, perm


def _permuted(x, perm):
    return x if perm is None else shapes.transpose(x, perm)


def _unpermuted(x, perm):
    return x if perm is None else shapes.transpose(x, tuple(np.argsort(perm)))


def _unflatten_dims(tree, dims):
    return tree_unflatten(tree, dims)


def _get_batch(axis, vals, dims, *, tree):
    ref, *leaves = vals
    transforms = tree_unflatten(tree, leaves)
    new, at, perm = _batch_transforms(transforms, _unflatten_dims(tree, dims[1:]), dims[0],
                                      axis.size)
    return _permuted(_bind(get_p, ref, new), perm), at


def _check_batched_ref(ref_dim, val_dim, dims, prim: str) -> None:
    if ref_dim is not_mapped and (val_dim is not not_mapped or any(
            d is not not_mapped for d in dims)):
        raise ValueError(
            f"Exception performing a {prim} operation with vmapped value on an unbatched "
            "array reference. Move the array reference to be an argument to the vmapped "
            "function?")


def _swap_batch(axis, vals, dims, *, tree):
    ref, val, *leaves = vals
    _check_batched_ref(dims[0], dims[1], dims[2:], "set/swap")
    new, at, perm = _batch_transforms(tree_unflatten(tree, leaves),
                                      _unflatten_dims(tree, dims[2:]), dims[0], axis.size)
    if at is not_mapped:
        return _bind(swap_p, ref, new, val), not_mapped
    val = _unpermuted(move_batch_dim(val, dims[1], at, axis.size), perm)
    return _permuted(_bind(swap_p, ref, new, val), perm), at


def _addupdate_batch(axis, vals, dims, *, tree):
    ref, val, *leaves = vals
    _check_batched_ref(dims[0], dims[1], dims[2:], "addupdate")
    new, at, perm = _batch_transforms(tree_unflatten(tree, leaves),
                                      _unflatten_dims(tree, dims[2:]), dims[0], axis.size)
    if at is not not_mapped:
        val = _unpermuted(move_batch_dim(val, dims[1], at, axis.size), perm)
    _bind(addupdate_p, ref, new, val)
    return [], []


batch_rules[get_p] = _get_batch
batch_rules[swap_p] = _swap_batch
batch_rules[addupdate_p] = _addupdate_batch


def is_ref_type(aval) -> bool:
    """Whether ``aval`` is the type of a reference."""
    return isinstance(aval, AbstractRef)


__all__ += ["is_ref_type", "reshape_ref", "bitcast_ref", "packing_bitcast", "RefIndexer"]


# --- pinned buffers: a value held in a buffer of a memory space until unpinned --------------
class AbstractLinVal:
    """The type of a pinned value: a buffer holding a value of ``inner_aval`` (in memory
    space ``memory_space``: None, "hbm" or "vmem")."""

    __slots__ = ("inner_aval", "memory_space")

    def __init__(self, inner_aval, memory_space=None):
        self.inner_aval, self.memory_space = inner_aval, memory_space

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: len(self.inner_aval.shape))
    weak_type = False
    _sharding = None

    def __eq__(self, other):
        return (type(other) is AbstractLinVal and other.inner_aval == self.inner_aval
                and other.memory_space == self.memory_space)

    def __hash__(self):
        return hash((AbstractLinVal, self.inner_aval, self.memory_space))

    def update(self, **changes):
        return AbstractLinVal(self.inner_aval.update(**changes), self.memory_space)

    def str_short(self, short_dtypes=True, **_):
        return f"LinVal{{{self.inner_aval.str_short(short_dtypes)}}}"

    def mlir_type(self) -> str:
        """The type of its values in a lowered program: a memref (as JAX's)."""
        return _memref_type(self)

    __repr__ = str_short


pin_p = Primitive("pin")
unpin_p = Primitive("unpin")
_COLORS = {None: None, "hbm": 0, "vmem": 1}


def pin(x, *, to=None):
    """``x`` held in a pinned buffer (of memory space ``to``) until ``unpin``."""
    return pin_p.bind(x, to=to)


def unpin(x):
    """The value a pinned buffer holds."""
    return unpin_p.bind(x)


@pin_p.def_abstract_eval
def _pin_abstract(aval, *, to):
    if to not in _COLORS:
        raise ValueError(f"pin: `to` must be None, 'hbm' or 'vmem', got {to!r}.")
    if isinstance(aval, (AbstractRef, AbstractLinVal)) or not hasattr(aval, "shape"):
        raise NotImplementedError(f"pin takes an array, got a value of type {aval}.")
    return AbstractLinVal(aval.update(weak_type=False), to)


@unpin_p.def_abstract_eval
def _unpin_abstract(aval):
    if type(aval) is not AbstractLinVal:
        raise TypeError(f"unpin takes a pinned value (from pin), got a value of type {aval}.")
    return aval.inner_aval


def _memref_type(aval: AbstractLinVal) -> str:
    from plax.lowering.stablehlo import element_type
    dims = "".join(f"{d}x" for d in aval.shape)
    color = _COLORS[aval.memory_space]
    return f"memref<{dims}{element_type(aval.dtype)}{'' if color is None else f', {color}'}>"


def _custom_call(ctx, target: str, x, in_type: str, out_type: str, props: str = "") -> list:
    return ctx.fn.emit("stablehlo.custom_call", [x], [in_type], [out_type],
                       props=f'call_target_name = "{target}", api_version = 2 : i32, '
                             f'backend_config = "{props}"')


def _pin_lowering(ctx, x, *, to):
    from plax.lowering.stablehlo import tensor_type
    color = _COLORS[to]
    config = "" if color is None else (
        '{\\"custom_call_config\\": {\\"output_memory_space_colors\\": [{\\"shape_index\\": '
        f'[], \\"color\\": \\"{color}\\"}}]}}}}')
    return _custom_call(ctx, "Pin", x, tensor_type(ctx.avals_in[0]),
                        _memref_type(ctx.avals_out[0]), config)


def _unpin_lowering(ctx, x):
    from plax.lowering.stablehlo import tensor_type
    return _custom_call(ctx, "Unpin", x, _memref_type(ctx.avals_in[0]),
                        tensor_type(ctx.avals_out[0]))


register_lowering(pin_p, _pin_lowering)
register_lowering(unpin_p, _unpin_lowering)
# (on a CPU, which has no Pin custom call, a pinned buffer is its value: a plax extension
# so that a pinned pallas_call runs in interpret mode there)
register_lowering(pin_p, lambda ctx, x, *, to: x, platform="cpu")
register_lowering(unpin_p, lambda ctx, x: x, platform="cpu")
__all__ += ["pin", "unpin", "pin_p", "unpin_p", "AbstractLinVal"]
