"""emit_pipeline: a nested grid inside a TPU kernel, over blocks of (HBM) references.

``emit_pipeline(body, grid=..., in_specs=..., out_specs=...)`` returns ``pipeline(*refs,
scratches=None, allocations=None, body_prologue=None)``: for each point of ``grid`` (row
major) it cuts the block each BlockSpec's index map picks out of each reference, runs
``body`` on references to those blocks (then the scratch references) and writes the output
blocks back; ``program_id`` in ``body`` is the position in ``grid``. On a TPU the blocks
are double-buffered in VMEM by DMAs; in interpret mode each step reads its input blocks,
runs the body on them (``run_state``) and writes the output blocks. Output blocks are
never read: each lives in a buffer carried from step to step (as in VMEM), so a body that
accumulates into a block revisited on consecutive steps sees its running sum, as on the
chip, and the buffer starts uninitialised (NaN for floats). References that are buffers
of the kernel itself (``run_scoped``'s and ``empty_ref``'s, which plax holds as values)
become references of a ``run_state`` around the loop, so that their blocks are read and
written at run-time positions as those of any other reference. A block sticking out of its
reference (a dimension the block size does not divide) is read from a window moved inside
and rotated so that its inside part comes first (the rest unspecified, as in VMEM on a TPU);
only its inside part is written back.
"""
from __future__ import annotations

import enum
import functools
import math

import numpy as np

from plax.core.refs import Slice
from plax.core.trace import Tracer, get_aval
from plax.core.tree_core import register_static, tree_flatten, tree_unflatten
from plax.first_order import (arithmetic, bitwise, collectives, comparison, conversion,
                                shapes, slicing)
from plax.first_order.state import TransformedRef, ref_get, ref_set
from plax.higher_order.loops import fori_loop
from plax.higher_order import pallas_call as program_ids
from plax.higher_order.pallas_call import kernel_grid, uninitialized_value
from plax.higher_order.run_state import run_state
from plax.pallas import tpu_ops

__all__ = ["emit_pipeline", "emit_pipeline_with_allocations", "BufferedRef",
           "BufferedRefBase", "BufferType"]


def _is_spec(x) -> bool:
    return hasattr(x, "block_shape") and hasattr(x, "index_map")


def _per_argument(specs) -> tuple:
    """The specs, one entry (a pytree of BlockSpecs) per positional reference argument."""
    if specs is None:
        return ()
    return tuple(specs) if isinstance(specs, (tuple, list)) else (specs,)


def _is_ref_leaf(x) -> bool:
    return type(x) is TransformedRef


class BufferType(enum.Enum):
    """What a pipeline does with a reference's blocks: reads them, writes them, or both."""

    INPUT = "input"
    OUTPUT = "output"
    INPUT_OUTPUT = "input_output"

    @property
    def is_input(self) -> bool:
        return self is not BufferType.OUTPUT

    @property
    def is_output(self) -> bool:
        return self is not BufferType.INPUT


class BufferedRefBase:
    """What a pipeline's buffer for one reference is (``BufferedRef`` is the one kind)."""


@register_static
class BufferedRef(BufferedRefBase):
    """A pipeline's buffer for one reference, made before the pipeline runs (as a
    ``pallas_call`` scratch shape) and handed to it as ``allocations``: its BlockSpec and
    whether the blocks are read, written or both. plax's pipeline holds each block in
    a value of its own, so a BufferedRef allocates no memory (it is a pytree without
    leaves)."""

    def __init__(self, spec, dtype, buffer_type: BufferType, buffer_count: int = 2):
        self.spec, self.dtype = spec, getattr(dtype, "dtype", dtype)
        self.buffer_type, self.buffer_count = buffer_type, buffer_count

    @property
    def is_input(self) -> bool:
        return self.buffer_type.is_input

    @property
    def is_output(self) -> bool:
        return self.buffer_type.is_output

    @classmethod
    def input(cls, spec, dtype_or_type, buffer_count: int = 2, **kwargs):
        """A buffer whose blocks the pipeline reads."""
        return cls(spec, dtype_or_type, BufferType.INPUT, buffer_count)

    @classmethod
    def output(cls, spec, dtype_or_type, buffer_count: int = 2, **kwargs):
        """A buffer whose blocks the pipeline writes."""
        return cls(spec, dtype_or_type, BufferType.OUTPUT, buffer_count)

    @classmethod
    def input_output(cls, spec, dtype_or_type, buffer_count: int = 2, **kwargs):
        """A buffer whose blocks the pipeline reads and writes back."""
        return cls(spec, dtype_or_type, BufferType.INPUT_OUTPUT, buffer_count)


def _as_index(x):
    if isinstance(x, (int, np.integer)):
        return np.int32(x)
    return conversion.convert_element_type(x, np.int32) if get_aval(x).dtype != np.int32 \
        else x


class _Window:
    """Where a spec's block of a reference of ``shape`` lies at a grid point."""

    def __init__(self, spec, shape, origin: str):
        block = getattr(spec, "block_shape", None)
        block = tuple(shape) if block is None else tuple(block)
        if len(block) != len(shape):
            raise ValueError(f"Block shape for {origin} (= {block}) must have the same "
                             f"number of dimensions as the array shape {tuple(shape)}.")
        self.dims = [None if b is None or type(b).__name__ == "Squeezed" else
                     int(getattr(b, "block_size", b)) for b in block]
        # per dimension: what the index map gives ("block" index, "element" offset, or a
        # "bounded" pl.ds of at most the block size)
        self.kinds = [{"Element": "element", "BoundedSlice": "bounded"}.get(
            type(b).__name__, "block") for b in block]
        if any(tuple(getattr(b, "padding", (0, 0))) != (0, 0) for b in block):
            raise NotImplementedError(f"emit_pipeline: padded Element block dimensions "
                                      f"({origin}) are not supported in plax.")
        self.index_map = getattr(spec, "index_map", None)
        self.shape, self.origin = tuple(shape), origin
        self.block_shape = tuple(d for d in self.dims if d is not None)
        # blocked dimensions the block size does not divide: their last block sticks out
        # ("uneven"), or the one block is larger than the dimension ("short")
        self.edges = [None if d is None or kind != "block" or n % d == 0 else
                      "short" if d > n else "uneven"
                      for d, n, kind in zip(self.dims, self.shape, self.kinds)]

    def read(self, ref, idx):
        """The block at ``idx``: where it sticks out of the reference, its rows inside come
        first and the rest is unspecified (as in the pipeline's VMEM buffer on a TPU)."""
        if not any(self.edges):
            return ref_get(_view(ref, idx), ())
        idx, fixes = self._inside(idx)
        value = ref_get(_view(ref, idx), ())
        for axis, edge, d, at in fixes:
            if edge == "short":
                pad = list(get_aval(value).shape)
                pad[axis] = d - pad[axis]
                fill = shapes.full(tuple(pad), uninitialized_value(value.dtype), value.dtype)
                value = shapes.concatenate([value, fill], axis)
            else:  # rows from ``at`` on, moved to the front
                back = (d - at) % d if isinstance(at, (int, np.integer)) else \
                    arithmetic.rem(arithmetic.sub(np.int32(d), at), np.int32(d))
                value = tpu_ops.roll(value, back, axis)
        return value

    def write(self, ref, idx, value) -> None:
        """Stores the block at ``idx``, leaving out what sticks out of the reference."""
        if not any(self.edges):
            return ref_set(_view(ref, idx), (), value)
        idx, fixes = self._inside(idx)
        view, keep = _view(ref, idx), None
        for axis, edge, d, at in fixes:
            if edge == "short":
                value = slicing.slice_in_dim(value, 0, self.shape[self._dim(axis)], axis=axis)
        for axis, edge, d, at in fixes:
            if edge == "uneven":
                value = tpu_ops.roll(value, at, axis)
                rows = shapes.broadcasted_iota(np.int32, get_aval(value).shape, axis)
                mine = comparison.ge(rows, at)
                keep = mine if keep is None else bitwise.bitwise_and(keep, mine)
        if keep is not None:  # (the rows before ``at`` belong to the block before)
            value = comparison.select(keep, value, ref_get(view, ()))
        ref_set(view, (), value)

    def _dim(self, axis: int) -> int:
        return [j for j, d in enumerate(self.dims) if d is not None][axis]

    def _inside(self, idx):
        """``idx`` with each edge dimension's window moved inside the reference, and per such
        dimension (its axis in the block, edge, block size, where the block starts in the
        window)."""
        idx, fixes = list(idx), []
        axes = {j: a for a, j in enumerate(j for j, d in enumerate(self.dims) if d is not None)}
        for j, edge in enumerate(self.edges):
            if edge == "short":
                idx[j] = Slice(0, self.shape[j])
                fixes.append((axes[j], edge, self.dims[j], 0))
            elif edge == "uneven":
                start, last = idx[j].start, self.shape[j] - self.dims[j]
                inside = min(start, last) if isinstance(start, (int, np.integer)) else \
                    arithmetic.min(start, np.int32(last))
                idx[j] = Slice(inside, self.dims[j])
                at = start - inside if isinstance(start, (int, np.integer)) else \
                    arithmetic.sub(start, inside)
                fixes.append((axes[j], edge, self.dims[j], at))
        return tuple(idx), fixes

    def indexer(self, indices) -> tuple:
        if self.index_map is None:
            blocks = (0,) * len(self.shape)
        else:
            blocks = self.index_map(*indices)
            blocks = tuple(blocks) if isinstance(blocks, (tuple, list)) else (blocks,)
        if len(blocks) != len(self.shape):
            raise ValueError(f"Index map for {self.origin} must return {len(self.shape)} "
                             f"values to match the block shape, got {len(blocks)}.")
        return tuple(self._window(b, d, kind)
                     for b, d, kind in zip(blocks, self.dims, self.kinds))

    def _window(self, b, d, kind):
        if kind == "bounded":
            if not isinstance(b, Slice):
                raise ValueError("Must return a pl.ds from the index_map for a BoundedSlice "
                                 f"dimension (in {self.origin}), got {b!r}.")
            if not (isinstance(b.size, (int, np.integer)) and b.size == d):
                raise NotImplementedError(
                    f"emit_pipeline: a BoundedSlice({d}) dimension whose pl.ds is shorter "
                    f"than the block or of run-time size ({self.origin}) is not supported "
                    "in plax.")
            b = b.start
        if isinstance(b, (int, np.integer)):  # a static block: a static window
            return np.int32(b) if d is None else Slice(int(b) if kind != "block"
                                                       else int(b) * d, d)
        b = _as_index(b)
        if d is None:
            return b
        return Slice(b if kind != "block" else arithmetic.mul(b, np.int32(d)), d)


def _view(ref, idx) -> TransformedRef:
    return (ref if type(ref) is TransformedRef else TransformedRef(ref, ())).at[idx]


def _grid_point(t, grid):
    out = []
    for size in reversed(grid):
        size = _as_index(size)
        out.append(arithmetic.rem(t, size))
        t = arithmetic.div(t, size)
    return tuple(out[::-1])


def emit_pipeline(body, *, grid, in_specs=(), out_specs=(), tiling=None, core_axis=None,
                  core_axis_name=None, dimension_semantics=None, trace_scopes: bool = True,
                  no_pipelining: bool = False, _explicit_indices: bool = False):
    """A function of references running ``body`` over ``grid`` on their blocks (see the
    module docstring). With ``core_axis`` (an axis of the kernel's grid) or
    ``core_axis_name`` (a named axis, such as a core mesh's), each core runs its share of
    one PARALLEL dimension of ``grid`` (see ``partition_grid``)."""
    del tiling, trace_scopes, no_pipelining
    grid = (grid,) if isinstance(grid, (int, np.integer, Tracer)) else tuple(grid)
    if any(isinstance(g, (int, np.integer)) and g <= 0 for g in grid):
        raise ValueError(f"All elements in the grid must be strictly positive, but got "
                         f"grid={grid}")
    if core_axis is not None and core_axis_name is not None:
        raise ValueError("core_axis and core_axis_name cannot both be provided.")
    full_grid = grid
    ins, outs = _per_argument(in_specs), _per_argument(out_specs)

    def pipeline(*refs, scratches=None, allocations=None, body_prologue=None):
        grid, offsets = partition_grid(
            full_grid, core_axis_name if core_axis is None else core_axis,
            dimension_semantics)
        slots, trees = _slots(refs, ins, outs, allocations)
        extra = tuple(scratches) if scratches is not None else ()
        run = functools.partial(_loop, body, trees, grid, offsets, extra, body_prologue,
                                _explicit_indices)
        _with_buffers_as_refs(slots, run)
    return pipeline


def emit_pipeline_with_allocations(body, *, grid, in_specs=(), out_specs=(), **kwargs):
    """``(pipeline, make_allocations)``: ``emit_pipeline``'s function, and a function of
    the same references giving the ``allocations`` it may be called with (a BufferedRef
    per reference, in the structure of each positional argument)."""
    pipeline = emit_pipeline(body, grid=grid, in_specs=in_specs, out_specs=out_specs,
                             **kwargs)
    ins, outs = _per_argument(in_specs), _per_argument(out_specs)

    def make_allocations(*refs):
        out = []
        for k, (arg, spec) in enumerate(zip(refs, ins + outs)):
            make = BufferedRef.input if k < len(ins) else BufferedRef.output
            specs, tree = tree_flatten(spec, is_leaf=_is_spec)
            leaves, _ = tree_flatten(arg, is_leaf=_is_ref_leaf)
            out.append(tree_unflatten(tree, [make(s, r.dtype) for s, r in zip(specs, leaves)]))
        return tuple(out)
    return pipeline, make_allocations


def _loop(body, trees, grid, offsets, extra, body_prologue, explicit_indices, slots):
    """The pipeline's steps: per point of ``grid`` (offset by ``offsets``), the blocks of the
    references of ``slots`` read, ``body`` run on them, the written ones stored back."""
    steps = grid[0] if len(grid) == 1 else math.prod(grid) if all(
        isinstance(g, (int, np.integer)) for g in grid) else _product(grid)
    written = [k for k, (_, _, kind) in enumerate(slots) if kind.is_output]

    def step(t, out_buffers):
        indices = tuple(i if isinstance(o, int) and o == 0 else arithmetic.add(i, o)
                        for i, o in zip(_grid_point(t, grid), offsets))
        windows = [w.indexer(indices) for _, w, _ in slots]
        carried = iter(out_buffers)
        blocks = [w.read(r, idx) if kind.is_input else next(carried)
                  for idx, (r, w, kind) in zip(windows, slots)]

        def run(block_refs):
            args, at = [], 0
            for tree in trees:
                args.append(tree_unflatten(tree, block_refs[at:at + tree.num_leaves]))
                at += tree.num_leaves
            with kernel_grid(grid, indices):  # (program_id reads the pipeline's grid)
                if body_prologue is not None:
                    body_prologue()
                if explicit_indices:
                    body(indices, *args, *extra)
                else:
                    body(*args, *extra)
        finals = run_state(run)(blocks)
        for k in written:
            slots[k][1].write(slots[k][0], windows[k], finals[k])
        return [finals[k] for k in written if not slots[k][2].is_input]
    buffers = [shapes.full(w.block_shape, uninitialized_value(r.dtype), r.dtype)
               for r, w, kind in slots if not kind.is_input]
    fori_loop(np.int32(0), _as_index(steps), step, buffers)


def _as_kernel_ref(ref):
    """``ref``, or, for a box standing for a kernel reference while a kernel closing over it
    is traced (``pl.core_map``'s operands), that reference (with the same view)."""
    box = ref.ref if type(ref) is TransformedRef else ref
    view = box._kernel_view() if hasattr(type(box), "_kernel_view") else None
    if view is None:
        return ref
    return TransformedRef(view, ref.transforms) if box is not ref else view


def _with_buffers_as_refs(slots, loop):
    """``loop(slots)``, where the references that are buffers of the kernel (``plax.ref.Ref``
    boxes, as ``run_scoped`` and ``empty_ref`` make them: values of the kernel) are made
    references of a ``run_state`` around the loop, so that the steps index them at run-time
    positions as references (on TPU, a buffer's window is a load, not a slice of a value)."""
    slots = [(_as_kernel_ref(r), w, kind) for r, w, kind in slots]
    boxes = []
    for ref, _, _ in slots:
        box = ref.ref if type(ref) is TransformedRef else ref
        # (a plax.ref.Ref box reads and writes through _transformed_get)
        if hasattr(type(box), "_transformed_get") and all(box is not b for b in boxes):
            boxes.append(box)
    if not boxes:
        return loop(slots)

    def run(box_refs):
        def swap(ref):
            base = ref.ref if type(ref) is TransformedRef else ref
            k = next((k for k, b in enumerate(boxes) if b is base), None)
            if k is None:
                return ref
            return TransformedRef(box_refs[k], ref.transforms) if base is not ref \
                else box_refs[k]
        loop([(swap(r), w, kind) for r, w, kind in slots])
    finals = run_state(run)([ref_get(b, ()) for b in boxes])
    for b, value in zip(boxes, finals):
        ref_set(b, (), value)


def _slots(refs, ins, outs, allocations):
    """Per reference (flattened): (reference, _Window, BufferType); and per positional
    argument the tree of its references."""
    if allocations is not None:
        specs = tuple(allocations)
        if len(specs) != len(refs):
            raise ValueError(f"emit_pipeline: {len(specs)} allocations were given for "
                             f"{len(refs)} references.")
    elif len(ins) + len(outs) != len(refs):
        raise ValueError(f"emit_pipeline: {len(ins)} in_specs and {len(outs)} out_specs "
                         f"were given, but the pipeline was called with {len(refs)} "
                         "references.")
    else:
        specs = ins + outs
    slots, trees = [], []
    for k, (arg, spec) in enumerate(zip(refs, specs)):
        leaves, tree = tree_flatten(arg, is_leaf=_is_ref_leaf)
        spec_leaves, _ = tree_flatten(
            spec, is_leaf=lambda x: _is_spec(x) or isinstance(x, BufferedRef))
        origin = f"inputs[{k}]" if k < len(ins) else f"outputs[{k - len(ins)}]"
        if len(spec_leaves) != len(leaves):
            raise ValueError(f"emit_pipeline: the specs of {origin} describe "
                             f"{len(spec_leaves)} references, but {len(leaves)} were given.")
        for j, (ref, s) in enumerate(zip(leaves, spec_leaves)):
            where = origin if len(leaves) == 1 else f"{origin}[{j}]"
            if isinstance(s, BufferedRef):
                kind, s = s.buffer_type, s.spec
            else:
                kind = BufferType.INPUT if k < len(ins) else BufferType.OUTPUT
            slots.append((ref, _Window(s, ref.shape, where), kind))
        trees.append(tree)
    return slots, trees


def _product(grid):
    out = _as_index(grid[0])
    for g in grid[1:]:
        out = arithmetic.mul(out, _as_index(g))
    return out



def _semantics(d) -> str:
    return str(getattr(d, "value", d))


def _cores(core_axis):
    """(number of cores, a function giving this core's index) along ``core_axis``: a kernel
    grid axis (int) or axis name(s)."""
    if isinstance(core_axis, (int, np.integer)):
        return (program_ids.num_programs(int(core_axis)),
                lambda: program_ids.program_id(int(core_axis)))
    return collectives.axis_size(core_axis), lambda: collectives.axis_index(core_axis)


def partition_grid(grid: tuple, core_axis, dimension_semantics) -> tuple:
    """(this core's grid, the offsets of its indices in ``grid``) when ``grid`` is shared
    among the cores along ``core_axis``: the first PARALLEL dimension the number of cores
    divides is split evenly; otherwise the only dynamic PARALLEL one, or the largest
    static one, with one more iteration on each of the first ``size % cores`` cores."""
    if core_axis is None:
        return grid, (0,) * len(grid)
    num_cores, core_index = _cores(core_axis)
    if not isinstance(num_cores, (int, np.integer)):
        raise NotImplementedError(f"Cannot partition grid over dynamic number of cores: "
                                  f"core_axis={core_axis!r}")
    if num_cores == 1:
        return grid, (0,) * len(grid)
    semantics = ("arbitrary",) * len(grid) if dimension_semantics is None else \
        tuple(map(_semantics, dimension_semantics))
    if len(semantics) != len(grid):
        raise ValueError("dimension_semantics must be the same length as grid.")
    parallel = [i for i, d in enumerate(semantics) if d == "parallel"]
    if not parallel:
        raise NotImplementedError(f"Cannot partition over cores without parallel grid "
                                  f"dimensions: dimension_semantics={dimension_semantics}")
    core = core_index()  # (not asked for on one core)
    static = [i for i in parallel if isinstance(grid[i], (int, np.integer))]
    dynamic = [i for i in parallel if i not in static]
    divisible = [i for i in static if grid[i] % num_cores == 0]
    offsets = [0] * len(grid)
    grid = list(grid)
    if divisible:
        dim = divisible[0]
        grid[dim] = grid[dim] // num_cores
        offsets[dim] = arithmetic.mul(_as_index(core), np.int32(grid[dim]))
        return tuple(grid), tuple(offsets)
    if len(dynamic) > 1:
        raise NotImplementedError(f"Cannot partition over multiple dynamic parallel "
                                  f"dimensions: grid={tuple(grid)}")
    if dynamic and not static:
        dim = dynamic[0]
    else:
        largest = max(grid[i] for i in static)
        dim = next(i for i in static if grid[i] == largest)
    core, size = _as_index(core), _as_index(grid[dim])
    base = arithmetic.div(size, np.int32(num_cores))
    extra = arithmetic.rem(size, np.int32(num_cores))
    more = comparison.lt(core, extra)
    grid[dim] = comparison.select(more, arithmetic.add(base, np.int32(1)), base)
    offsets[dim] = arithmetic.add(arithmetic.mul(core, base),
                                  comparison.select(more, core, extra))
    return tuple(grid), tuple(offsets)
