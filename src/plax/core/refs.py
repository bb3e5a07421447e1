"""The types of mutable references, and the views a reference is read and written through.

``AbstractRef(inner_aval)`` is the type of a reference to a value of type ``inner_aval``. It
types two kinds of values: ``plax.ref.Ref`` boxes (a hi type whose one lo value is the array
held: the box registers how with ``install_ref_box``), and variables of a jaxpr, which the
state primitives (``plax.first_order.state``: get/swap/addupdate) read and write and
``plax.transforms.discharge`` turns into plain values.

A reference is read or written through a chain of *transforms*, each a view of the value
before it: ``NDIndexer`` (an index of ``Slice``s, integers and integer arrays, NumPy's
rules), ``RefReshaper`` (a reshape) and ``RefBitcaster`` (the bits as another dtype, TPU's
layout: the second-minor axis scales by the ratio of the widths). ``transformed_aval`` gives
the type seen at the end. ``RefSelector(idx)`` is the one transform of a view over several
references (``pl.select_ref``): the one ``idx`` picks at run time, for DMA operands only.
Transforms are pytrees whose leaves are the dynamic parts of an index (integers, index
arrays, slice starts); the state primitives take those leaves as operands.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.errors import InconclusiveDimensionOperation
from plax.core.hi_types import MutableHiType
from plax.core.symbolic_shapes import (DimExpr, checked_symbolic_shape, clamped_slice,
                                       dimension_as_value)
from plax.core.trace import Tracer
from plax.core.tree_core import register_pytree_node

__all__ = ["AbstractRef", "NDIndexer", "RefBitcaster", "RefReshaper", "RefSelector", "Slice",
           "shaped_array_ref",
           "transformed_aval", "uninitialized"]

# How plax.ref's boxes are made, read and written (plax.ref installs them; core sits below).
_box = {}


def install_ref_box(make, read, write) -> None:
    """Make ``make(value)``, ``read(box)`` and ``write(box, value)`` how a reference box is
    made from, read as and updated with the array it holds."""
    _box.update(make=make, read=read, write=write)


class AbstractRef(MutableHiType):
    """The type of a mutable reference to a value of type ``inner_aval``."""

    __slots__ = ("inner_aval", "memory_space", "kind")

    def __init__(self, inner_aval, memory_space=None, kind=None):
        self.inner_aval = inner_aval
        self.memory_space, self.kind = memory_space, kind

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: len(self.inner_aval.shape))
    size = property(lambda self: int(np.prod(self.inner_aval.shape, dtype=np.int64)))
    sharding = property(lambda self: getattr(self.inner_aval, "sharding", None))
    _sharding = property(lambda self: getattr(self.inner_aval, "_sharding", None))
    weak_type = False  # (a reference's type is never weak)

    def update(self, inner_aval=None, memory_space=None, kind=None, **inner_changes):
        """This type with the fields given replaced; ``shape=``, ``dtype=``, ``sharding=``
        and the like change the type of the value held."""
        inner = self.inner_aval if inner_aval is None else inner_aval
        if inner_changes:
            inner = inner.update(**inner_changes)
        return AbstractRef(inner, self.memory_space if memory_space is None else memory_space,
                           self.kind if kind is None else kind)

    def strip_weak_type(self):
        return self

    normalize = strip_weak_type

    def __eq__(self, other):
        return type(other) is AbstractRef and other.inner_aval == self.inner_aval

    def __hash__(self):
        return hash((AbstractRef, self.inner_aval))

    def __repr__(self):
        return self.str_short(short_dtypes=False)

    def str_short(self, short_dtypes=True, **_):
        space = "" if self.memory_space is None else f"<{self.memory_space}>"
        return f"Ref{space}{{{self.inner_aval.str_short(short_dtypes)}}}"

    # The hi-type protocol: a box is made of the one array it holds; its type never changes.
    def lo_ty_qdd(self, qdd):
        return [self.inner_aval]

    def new_from_loval(self, qdd, value):
        return _box["make"](value)

    def read_loval(self, qdd, ref):
        return [_box["read"](ref)]

    def update_from_loval(self, qdd, ref, value):
        _box["write"](ref, value)

    def to_tangent_aval(self):
        return AbstractRef(self.inner_aval.to_tangent_aval())


def shaped_array_ref(shape, dtype, weak_type: bool = False) -> AbstractRef:
    """The type of a reference to an array of ``shape`` and ``dtype``."""
    return AbstractRef(ShapedArray(tuple(shape), dtypes.dtype(dtype), weak_type=weak_type))


class _Uninitialized:
    """The initial value of a state whose contents are written before they are read."""

    def __repr__(self):
        return "uninitialized"


uninitialized = _Uninitialized()
# type -> fn(value) -> (AbstractRef, initial value or ``uninitialized``): how run_state
# makes the reference for a value of that type (JAX's ``_ref_type_aval_mappings``).
ref_type_aval_mappings: dict = {}


# --- transforms ---------------------------------------------------------------------------
def _sign_unknown(what, v, error) -> Exception:
    return InconclusiveDimensionOperation(
        f"In slice with non-constant elements the {what} ({v}) must be resolved statically if "
        f"it is >= 0.\nDetails: {error}")


class Slice:
    """``size`` elements from ``start`` (which may be traced), ``stride`` apart: a slice of a
    reference or an array whose start is only known at run time (made by ``plax.ds``)."""

    __slots__ = ("start", "size", "stride")

    def __init__(self, start, size, stride=1):
        if type(size) is DimExpr:  # (a symbolic size, under a polymorphic export)
            size = checked_symbolic_shape((size,))[0]
        elif not isinstance(size, (int, np.integer)) or isinstance(size, bool):
            raise TypeError(f"ds: size must be a static int, got {size!r}.")
        elif int(size) < 0:
            raise ValueError(f"ds: size must be non-negative, got {size}.")
        else:
            size = int(size)
        if not isinstance(stride, (int, np.integer)) or int(stride) < 1:
            raise ValueError(f"ds: stride must be a positive static int, got {stride!r}.")
        self.start, self.size, self.stride = start, size, int(stride)

    def __repr__(self):
        return f"Slice(start={self.start!r}, size={self.size}, stride={self.stride})"

    def __eq__(self, other):
        return (type(other) is Slice and (self.start, self.size, self.stride)
                == (other.start, other.size, other.stride))

    def __hash__(self):
        return hash((Slice, id(self.start) if isinstance(self.start, Tracer) else self.start,
                     self.size, self.stride))

    @classmethod
    def from_slice(cls, s: slice, dim: int) -> "Slice":
        """The ``Slice`` a Python slice with static bounds cuts from an axis of ``dim``."""
        if any(type(v) is DimExpr for v in (dim, s.start, s.stop)):
            if s.step is not None and s.step < 1:
                raise NotImplementedError("Reference slices with a negative or zero step are "
                                          f"not supported (got {s}).")
            start, stop, step, _ = clamped_slice(s, dim, _sign_unknown)
            size = (stop - start + step - 1) // step
            # (a symbolic start is an operand: its value)
            return cls(dimension_as_value(start), size, step)
        start, stop, step = s.indices(dim)
        if step < 1:
            raise NotImplementedError("Reference slices with a negative or zero step are not "
                                      f"supported (got {s}).")
        return cls(start, len(range(start, stop, step)), step)

    def is_full(self, dim) -> bool:
        """Whether this is ``:`` on an axis of ``dim``."""
        return (isinstance(self.start, (int, np.integer)) and int(self.start) == 0
                and self.stride == 1 and self.size == dim)


register_pytree_node(Slice, lambda s: ((s.start,), (s.size, s.stride)),
                     lambda aux, kids: Slice(kids[0], *aux))


def _shape_of(x) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def is_int_like(x) -> bool:
    """Whether an index holds integers (a Python or NumPy integer, or an integer array)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
    return dtypes.issubdtype(dtype, np.integer)


def _is_ref(x) -> bool:
    """Whether an index is itself a reference (a box, or a traced one)."""
    return isinstance(getattr(x, "aval", None), AbstractRef)


def _checked_slice(s: Slice, dim) -> Slice:
    """``s``, refused when a static start (or its last element) lies past an axis of ``dim``
    (as JAX, a start of ``dim`` is refused even for an empty slice)."""
    start = s.start
    if (isinstance(start, (int, np.integer)) and isinstance(dim, int) and start
            and isinstance(s.size, int)):
        if start >= dim:
            raise ValueError(f"Out of bound slice: start={start}, dim={dim}.")
        if s.size and start + (s.size - 1) * s.stride >= dim:
            raise ValueError(f"Out of bound slice: start={start}, size={s.size}, "
                             f"stride={s.stride}, dim={dim}.")
    return s


class NDIndexer:
    """An index of a value of ``shape``: one entry per axis, each a ``Slice``, an integer or an
    integer array (which may be traced). The integers and arrays broadcast together to
    ``int_indexer_shape``; their dimensions go where NumPy puts advanced indices (in place
    of the indexed axes when those are adjacent, first otherwise)."""

    __slots__ = ("indices", "shape", "int_indexer_shape")

    def __init__(self, indices, shape, int_indexer_shape):
        self.indices = tuple(indices)
        self.shape = tuple(shape)
        self.int_indexer_shape = tuple(int_indexer_shape)

    @classmethod
    def from_indices_shape(cls, indices, shape) -> "NDIndexer":
        """The indexer NumPy-style ``indices`` (ints, slices, ``Slice``s, integer arrays and
        one Ellipsis) make on a value of ``shape``."""
        if not isinstance(indices, tuple):
            indices = (indices,)
        if sum(i is Ellipsis for i in indices) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if any(i is None for i in indices):
            raise TypeError("Indexing a reference with None (np.newaxis) is not supported.")
        n = sum(i is not Ellipsis for i in indices)
        if n > len(shape):
            raise ValueError(f"`indices` must not be longer than `shape`: too many indices "
                             f"for a reference of shape {tuple(shape)}: {n} were indexed.")
        if Ellipsis in [i for i in indices if not isinstance(i, (np.ndarray, Tracer))]:
            k = next(j for j, i in enumerate(indices) if i is Ellipsis)
            indices = indices[:k] + (slice(None),) * (len(shape) - n) + indices[k + 1:]
        indices = indices + (slice(None),) * (len(shape) - len(indices))
        out, int_shapes, refs = [], [], 0
        for i, dim in zip(indices, shape):
            if isinstance(i, slice):
                i = _checked_slice(Slice.from_slice(i, dim), dim)
            elif type(i) is Slice:
                i = _checked_slice(i, dim)
            elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
                if not -dim <= int(i) < dim:
                    raise ValueError(f"Out of bound indexer: idx={int(i)}, dim={dim}.")
                i = int(i) + dim if int(i) < 0 else int(i)
                int_shapes.append(())
            else:  # (an index array; reading a reference checks that it holds integers)
                if isinstance(i, (list, tuple)):
                    i = np.asarray(i)
                int_shapes.append(_shape_of(i))
                refs += _is_ref(i)
            out.append(i)
        if refs and (refs > 1 or len(int_shapes) > 1):
            raise NotImplementedError(
                "Multiple Ref indexers are not supported" if refs > 1 else
                "Ref cannot be mixed with other non-slice indexers: index with the one "
                "reference (and slices) only.")
        try:
            int_shape = np.broadcast_shapes(*int_shapes) if int_shapes else ()
        except ValueError:
            raise ValueError(f"Cannot broadcast shapes for indexing: {int_shapes}") from None
        return cls(out, shape, int_shape)

    def is_trivial(self) -> bool:
        """Whether this indexer is ``[...]``: the whole value."""
        return all(type(i) is Slice and i.is_full(d) for i, d in zip(self.indices, self.shape))

    def int_positions(self) -> list:
        return [k for k, i in enumerate(self.indices) if type(i) is not Slice]

    def int_dims_first(self) -> bool:
        """Whether the integer-indexed axes are not adjacent (their dimensions go first)."""
        pos = self.int_positions()
        return bool(pos) and pos != list(range(pos[0], pos[-1] + 1))

    def int_dims_start(self) -> int:
        """Where the integer indices' dimensions start in the result."""
        if self.int_dims_first():
            return 0
        pos = self.int_positions()
        return sum(1 for i in self.indices[:pos[0]] if type(i) is Slice) if pos else 0

    def get_indexer_shape(self) -> tuple:
        """The shape of the value this indexer selects."""
        slices = [i.size for i in self.indices if type(i) is Slice]
        if not self.int_positions():
            return tuple(slices)
        at = self.int_dims_start()
        return tuple(slices[:at]) + self.int_indexer_shape + tuple(slices[at:])

    def transform_shape(self, shape) -> tuple:
        if tuple(shape) != self.shape:
            raise ValueError(f"An indexer made for shape {self.shape} applied to shape "
                             f"{tuple(shape)}.")
        return self.get_indexer_shape()

    def __repr__(self):
        return f"NDIndexer(indices={self.indices}, shape={self.shape})"


register_pytree_node(NDIndexer, lambda x: (x.indices, (x.shape, x.int_indexer_shape)),
                     lambda aux, kids: NDIndexer(kids, *aux))


class RefReshaper:
    """A view of a reference as another shape of the same number of elements."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, tuple(shape)

    @classmethod
    def from_ref_new_shape(cls, ref_shape, dtype, *shape) -> "RefReshaper":
        """The reshape of a value of ``ref_shape`` to ``shape`` (one entry may be -1)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        size = int(np.prod(ref_shape, dtype=np.int64))
        if sum(d == -1 for d in shape) > 1:
            raise ValueError("A reshape can infer at most one dimension (-1).")
        if -1 in shape:
            rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
            if rest == 0 or size % rest:
                raise ValueError(f"cannot reshape a reference of shape {tuple(ref_shape)} "
                                 f"into shape {shape}")
            shape = tuple(size // rest if d == -1 else d for d in shape)
        if int(np.prod(shape, dtype=np.int64)) != size:
            raise ValueError(f"cannot reshape a reference of shape {tuple(ref_shape)} into "
                             f"shape {shape}")
        return cls(dtype, shape)

    def transform_shape(self, shape) -> tuple:
        return self.shape

    def __repr__(self):
        return f"RefReshaper(shape={self.shape})"


register_pytree_node(RefReshaper, lambda r: ((), (r.dtype, r.shape)),
                     lambda aux, kids: RefReshaper(*aux))


class RefBitcaster:
    """A view of a reference's bits as elements of ``dtype`` (of shape ``shape``): as
    ``pltpu.bitcast`` on values, elements of another width pack into (or unpack from) the
    second-minor axis, whose size scales by the ratio of the widths."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtypes.dtype(dtype), tuple(shape)

    @classmethod
    def from_ref_new_dtype(cls, ref_shape, ref_dtype, dtype) -> "RefBitcaster":
        """The bitcast of a value of ``ref_shape`` and ``ref_dtype`` to ``dtype``."""
        dtype = dtypes.dtype(dtype)
        src, dst = dtypes.itemsize_bits(ref_dtype), dtypes.itemsize_bits(dtype)
        shape = list(ref_shape)
        if src != dst:
            if len(shape) < 2:
                raise NotImplementedError("Bitcast 1D ref with bitwidth change is not "
                                          "supported.")
            if shape[-2] * src % dst:
                raise ValueError("Expected input and output shapes are the same after "
                                 "multiplying the second-minor dimension by the bitwidths.")
            shape[-2] = shape[-2] * src // dst
        return cls(dtype, shape)

    def transform_shape(self, shape) -> tuple:
        return self.shape

    def __repr__(self):
        return f"RefBitcaster(dtype={self.dtype}, shape={self.shape})"


register_pytree_node(RefBitcaster, lambda r: ((), (r.dtype, r.shape)),
                     lambda aux, kids: RefBitcaster(*aux))


class RefSelector:
    """The view of one of several references, the one a run-time scalar ``idx`` picks (the
    first for 0, ..., the last for any index past the others): ``pl.select_ref``."""

    __slots__ = ("idx",)

    def __init__(self, idx):
        self.idx = idx

    def __repr__(self):
        return f"RefSelector(idx={self.idx!r})"


register_pytree_node(RefSelector, lambda r: ((r.idx,), None), lambda aux, kids: RefSelector(*kids))


def transformed_aval(inner_aval, transforms):
    """The type of the value seen through ``transforms`` from a value of ``inner_aval``."""
    aval = inner_aval
    for t in transforms:
        if not hasattr(aval, "update"):  # (a token: only the whole value)
            if type(t) is NDIndexer and not t.indices:
                continue
            raise TypeError(f"A value of type {aval} cannot be indexed or reshaped.")
        aval = aval.update(shape=t.transform_shape(aval.shape), weak_type=False)
        if type(t) is RefBitcaster:
            aval = aval.update(dtype=t.dtype)
        if getattr(aval, "_sharding", None) is not None:
            aval = aval.update(sharding=None)
    return aval
