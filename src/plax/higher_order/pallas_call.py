"""pallas_call_p: a Pallas kernel (a function of references to blocks) run over a grid.

One equation::

    pallas_call_p.bind(*inputs, jaxpr=kernel, grid_mapping=gm, input_output_aliases=((i, o),),
                       interpret=True, debug=False, name=..., compiler_params=...,
                       cost_estimate=...)

``kernel`` (a Jaxpr without constants) takes one int32 scalar per grid axis (the program's
position, what ``program_id`` reads; JAX's kernels read it through a primitive instead) and
then one reference per input, output and scratch buffer, each of its *block* shape. ``gm``
(a ``GridMapping``) holds the grid and, per input and output, a ``BlockMapping``: the block
shape (``None`` for a squeezed dimension), the memory space its reference is in, and the
index map, a ClosedJaxpr from the grid indices and then the values of the scalar-prefetch
arrays (``gm.num_scalar_prefetch`` leading inputs, passed to the kernel whole) to block
indices (a block's element offset is block index * block size).

Interpret mode is an ordinary program (``interpret_pallas_call``): every array is padded to
whole blocks with the "uninitialised" value (NaN for floats, the least integer for signed
integers, 0 for unsigned ones, False), outputs start from that value (or from their aliased
input), and a loop over the flattened grid (row-major: the last axis moves fastest) slices
each block out at the index map's offsets (``dynamic_slice``, which clamps them into the
padded array), runs the discharged kernel and writes every block back. Scratch buffers are
carried from one program to the next. JVP and vmap emit new pallas_calls (their rules are in
``pallas_call_rules``, which the face imports). Without interpret mode, a TPU compiles the
kernel with Mosaic (the "tpu" lowering rule in ``plax.pallas.mosaic_call``); other platforms
raise (no Triton or Mosaic GPU lowering).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from plax.core import dtypes, replication
from plax.core.effects import no_effects
from plax.core.jaxpr import ClosedJaxpr, eval_jaxpr
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, body_context_rules, dce_rules,
                             nested_effect_rules, param_printers, register_lowering,
                             replication_rules)
from plax.core.trace import extend_axis_env
from plax.first_order import arithmetic, collectives, conversion, prng, shapes, slicing
from plax.first_order.state import AbstractLinVal
from plax.higher_order.loops import fori_loop
from plax.higher_order.run_state import discharged_body
from plax.lowering.inline import lower_fun

__all__ = ["pallas_call_p", "BlockMapping", "GridMapping", "program_id", "num_programs",
           "kernel_grid", "in_kernel", "interpret_pallas_call", "uninitialized_value",
           "scratch_value", "lowering_kernel", "in_kernel_lowering"]

pallas_call_p = Primitive("pallas_call", multiple_results=True)


# --- the grid a kernel is traced in -------------------------------------------------------
_grids: list = []  # (grid, index tracers) of the kernels being traced, innermost last


_named_axes: list = []  # per kernel being traced over a named grid: {axis name: index}


class kernel_grid:
    """Context of a kernel's tracing: ``program_id(a)`` is ``indices[a]``, ``num_programs(a)``
    is ``grid[a]``; with ``names`` (a named grid's, such as a core_map's mesh axes),
    ``lax.axis_index(names[a])`` is ``indices[a]`` too."""

    def __init__(self, grid, indices, names=None):
        self.entry = (tuple(grid), tuple(indices))
        self.named = dict(zip(names, indices)) if names else None

    def __enter__(self):
        _grids.append(self.entry)
        if self.named:
            _named_axes.append(self.named)

    def __exit__(self, *exc):
        _grids.pop()
        if self.named:
            _named_axes.pop()


def _grid_axis_index(name):
    """The index of the kernel being traced along its grid axis ``name`` (None if no kernel
    being traced has one of that name)."""
    for named in reversed(_named_axes):
        if name in named:
            return named[name]
    return None


collectives.axis_index_resolvers.append(_grid_axis_index)


def in_kernel() -> bool:
    """Whether a pallas_call kernel (or a pipeline's body) is being traced."""
    return bool(_grids)


def _grid_entry(axis, what: str):
    if not _grids:
        raise ValueError(f"{what} can only be called inside a pallas_call kernel.")
    grid, indices = _grids[-1]
    if not isinstance(axis, (int, np.integer)) or not 0 <= int(axis) < len(grid):
        raise ValueError(f"{what}: axis {axis!r} is out of range for a grid of "
                         f"{len(grid)} dimension(s).")
    return grid, indices, int(axis)


def program_id(axis: int):
    """The index of the running program along grid axis ``axis`` (an int32 scalar)."""
    _, indices, axis = _grid_entry(axis, "program_id")
    return indices[axis]


def num_programs(axis: int) -> int:
    """The size of the grid along ``axis`` (an int32 scalar when known only at run time)."""
    grid, _, axis = _grid_entry(axis, "num_programs")
    return grid[axis]


# --- the parameters -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class BlockMapping:
    """How one input or output is cut into blocks: ``block_shape`` per array dimension (an int,
    or None where the dimension is squeezed), ``index_map`` (grid indices -> block indices,
    or element offsets along ``Element`` dimensions)."""

    block_shape: tuple
    array_aval: object
    index_map: ClosedJaxpr
    origin: str
    memory_space: object = None
    # per dimension, None (blocked: the index map gives a block index) or, for an
    # ``Element`` dimension, its (low, high) padding (the index map gives the element offset
    # into the array padded so); () when every dimension is blocked
    element: tuple = ()

    def is_element(self, dim: int) -> bool:
        return bool(self.element) and self.element[dim] is not None

    @property
    def sizes(self) -> tuple:
        return tuple(1 if b is None else b for b in self.block_shape)

    @property
    def ref_shape(self) -> tuple:
        return tuple(b for b in self.block_shape if b is not None)

    def __repr__(self):
        shape = ", ".join("None" if b is None else str(b) for b in self.block_shape)
        return f"BlockMapping({self.origin}, block_shape=({shape}))"


@dataclasses.dataclass(frozen=True, eq=False)
class GridMapping:
    """The grid, the inputs' then the outputs' ``BlockMapping``s, the scratch buffers' types;
    the first ``num_scalar_prefetch`` inputs are scalar-prefetch arrays (whole blocks), which
    every index map takes after the grid indices."""

    grid: tuple
    block_mappings: tuple
    num_inputs: int
    num_outputs: int
    scratch_avals: tuple
    num_scalar_prefetch: int = 0
    grid_names: tuple | None = None  # a named grid's axis names (lax.axis_size in the kernel)
    # grid sizes known only at run time (None in ``grid``; interpret mode only): the
    # equation's leading int32 operands, and the kernel's and index maps' inputs after the
    # grid indices (what num_programs reads)
    num_dynamic_grid_bounds: int = 0
    # per output, the memory space its ``out_shape`` asked for (``pltpu.VMEM(shape, dtype)``,
    # a semaphore type...), or None: the compiled call places the result there
    out_memory_spaces: tuple = ()
    # a mesh kernel (``pl.core_map``, ``pl.kernel``; JAX's ``mpmd_map``): whole references,
    # no pipelining, and the kernel works on an aliased output through its input's
    # reference (one buffer on a TPU; interpret mode returns the input's final value)
    unpipelined: bool = False

    def __repr__(self):
        return (f"GridMapping(grid={self.grid}, block_mappings={self.block_mappings}, "
                f"scratch={tuple(a.str_short() for a in self.scratch_avals)})")


# --- interpret mode -----------------------------------------------------------------------
def uninitialized_value(dtype):
    """What an element nothing wrote holds in interpret mode (JAX's choice per dtype)."""
    dtype = np.dtype(dtype)
    if dtypes.issubdtype(dtype, np.inexact):
        return np.array(np.nan, dtype)
    if dtype == np.bool_:
        return np.array(False)
    if dtypes.issubdtype(dtype, np.signedinteger):
        return np.array(dtypes.iinfo(dtype).min, dtype)
    return np.array(0, dtype)


def scratch_value(shape, dtype):
    """A fresh scratch buffer's value: uninitialised elements (semaphores: counters at 0;
    PRNG keys: of zero data)."""
    if isinstance(dtype, dtypes.KeyType):
        return prng.filled_keys(shape, dtype)
    if dtypes.is_extended(dtype):  # (semaphores: counters starting at 0)
        zeros = shapes.full(tuple(shape) + dtype.physical_shape, 0, dtype.physical_dtype)
        return conversion.convert_element_type(zeros, dtype)
    return shapes.full(tuple(shape), uninitialized_value(dtype), dtype)


def _element_padding(bm: BlockMapping):
    """The (low, high) padding of each dimension (Element dimensions' own), or None."""
    pads = [p if p is not None else (0, 0) for p in bm.element]
    return pads if any(p != (0, 0) for p in pads) else None


def _pad_to_blocks(x, bm: BlockMapping):
    """``x`` padded by its Element dimensions' padding, then at the end of each dimension to
    a whole number of blocks."""
    pads = _element_padding(bm)
    if pads is not None:
        x = shapes.pad(x, uninitialized_value(bm.array_aval.dtype),
                       [(lo, hi, 0) for lo, hi in pads])
    padding = [(0, -d % s, 0) for d, s in zip(x.shape, bm.sizes)]
    if not any(hi for _, hi, _ in padding):
        return x
    return shapes.pad(x, uninitialized_value(bm.array_aval.dtype), padding)


def _unpad(x, bm: BlockMapping):
    """An output's array without its Element padding and block padding."""
    pads = _element_padding(bm) or [(0, 0)] * x.ndim
    start = tuple(lo for lo, _ in pads)
    limit = tuple(lo + d for (lo, _), d in zip(pads, bm.array_aval.shape))
    if start == (0,) * x.ndim and limit == tuple(x.shape):
        return x
    return slicing.slice(x, start, limit)


def _grid_indices(t, grid):
    """The grid position of flattened step ``t`` (row-major; sizes are ints or int32
    scalars)."""
    out = []
    for size in reversed(grid):
        size = np.int32(size) if isinstance(size, int) else size
        out.append(arithmetic.rem(t, size))
        t = arithmetic.div(t, size)
    return out[::-1]


def _offsets(bm: BlockMapping, indices, prefetch):
    blocks = eval_jaxpr(bm.index_map.jaxpr, bm.index_map.consts, *indices, *prefetch)
    return [conversion.convert_element_type(b, np.int32) if bm.is_element(d) else
            arithmetic.mul(conversion.convert_element_type(b, np.int32), np.int32(s))
            for d, (b, s) in enumerate(zip(blocks, bm.sizes))]


def interpret_pallas_call(*args, jaxpr, grid_mapping, input_output_aliases, **_):
    """The results of a ``pallas_call`` equation, computed with lax ops (see the docstring)."""
    gm = grid_mapping
    mappings = gm.block_mappings
    dynamic, args = list(args[:gm.num_dynamic_grid_bounds]), args[gm.num_dynamic_grid_bounds:]
    sizes = [dynamic.pop(0) if g is None else g for g in gm.grid]
    aliases = dict(input_output_aliases)
    by_output = {o: i for i, o in aliases.items()}
    outs = [args[by_output[k]] if k in by_output else scratch_value(bm.array_aval.shape,
                                                            bm.array_aval.dtype)
            for k, bm in enumerate(mappings[gm.num_inputs:])]
    arrays = [_pad_to_blocks(x, bm) for x, bm in zip(list(args) + outs, mappings)]
    scratch = [scratch_value(a.shape, a.dtype) for a in gm.scratch_avals]
    bounds = [s for g, s in zip(gm.grid, sizes) if g is None]
    plain = discharged_body(jaxpr, len(gm.grid) + len(bounds))
    if bounds:
        steps = np.int32(math.prod(g for g in gm.grid if g is not None))
        for b in bounds:
            steps = arithmetic.mul(steps, b)
    else:
        steps = math.prod(gm.grid)

    def step(t, carry):
        arrays, scratch = carry
        indices = _grid_indices(t, sizes)
        prefetch = arrays[:gm.num_scalar_prefetch]
        offsets = [_offsets(bm, [*indices, *bounds], prefetch) for bm in mappings]
        blocks = [shapes.reshape(slicing.dynamic_slice(x, off, bm.sizes), bm.ref_shape)
                  for x, off, bm in zip(arrays, offsets, mappings)]
        finals = eval_jaxpr(plain.jaxpr, plain.consts, *indices, *bounds, *blocks, *scratch)
        n = len(mappings)
        arrays = [slicing.dynamic_update_slice(x, shapes.reshape(b, bm.sizes), off)
                  for x, b, off, bm in zip(arrays, finals[:n], offsets, mappings)]
        return arrays, list(finals[n:])

    if bounds:
        arrays, scratch = fori_loop(np.int32(0), steps, step, (arrays, scratch))
    elif steps == 1:
        arrays, scratch = step(np.int32(0), (arrays, scratch))
    elif steps > 1:
        arrays, scratch = fori_loop(np.int32(0), np.int32(steps), step, (arrays, scratch))
    results = arrays[gm.num_inputs:]
    if gm.unpipelined:
        results = [arrays[by_output[k]] if k in by_output else x for k, x in enumerate(results)]
    return [_unpad(x, bm) for x, bm in zip(results, mappings[gm.num_inputs:])]


# --- rules --------------------------------------------------------------------------------
def _abstract(*avals, grid_mapping, input_output_aliases=(), **_):
    gm = grid_mapping
    ins = avals[gm.num_dynamic_grid_bounds:]
    aliases = dict(input_output_aliases)
    # a pinned buffer (state.pin) passes through the kernel in place: it must be aliased,
    # and its output is pinned too
    missing = {i for i, a in enumerate(ins) if _is_pinned(a)} - set(aliases)
    if missing:
        raise ValueError(f"input pinned buffers without input_output_aliases:{missing}")
    pinned_outs = {o: ins[i] for i, o in aliases.items() if _is_pinned(ins[i])}
    return [pinned_outs.get(k, bm.array_aval)
            for k, bm in enumerate(gm.block_mappings[gm.num_inputs:])]


def _is_pinned(aval) -> bool:
    return type(aval) is AbstractLinVal


_kernels_lowering = [0]  # kernels being lowered in interpret mode (nested ones counted)


class lowering_kernel:
    """Context of a kernel's lowering in interpret mode (what ``in_kernel_lowering`` tells)."""

    def __enter__(self):
        _kernels_lowering[0] += 1

    def __exit__(self, *exc):
        _kernels_lowering[0] -= 1


def in_kernel_lowering() -> bool:
    """Whether a kernel is being lowered in interpret mode (kernel-only primitives, such as
    the kernel PRNG's, lower there and nowhere else)."""
    return _kernels_lowering[0] > 0


def _lowering(ctx, *args, interpret, **params):
    if not interpret:
        if ctx.platform == "cpu":
            raise ValueError("Only interpret mode is supported on CPU backend.")
        raise NotImplementedError(
            f"plax compiles Pallas kernels for TPUs (Mosaic) and, on every backend, in "
            f"interpret mode (pallas_call(..., interpret=True)); lowering to {ctx.platform} "
            "kernels (Triton, Mosaic GPU) is not built.")
    if any(map(_is_pinned, ctx.avals_in)):  # (interpreted, a pinned buffer is its value)
        ctx = type(ctx)(ctx.fn, [a.inner_aval if _is_pinned(a) else a for a in ctx.avals_in],
                        [a.inner_aval if _is_pinned(a) else a for a in ctx.avals_out])
    with lowering_kernel():
        return _lower_interpret(ctx, *args, interpret=interpret, **params)


_lower_interpret = lower_fun(interpret_pallas_call, multiple_results=True)


def _print(params):
    shown = {k: params[k] for k in ("grid_mapping", "jaxpr", "interpret") if k in params}
    if params.get("input_output_aliases"):
        shown["input_output_aliases"] = params["input_output_aliases"]
    if params.get("name"):
        shown["name"] = params["name"]
    return shown


def _replication(ins, *, grid_mapping, **_):
    """Inside shard_map(check_vma=True): every result varies over each manual axis any
    operand varies over. (The kernel is traced on plain blocks, so its body says nothing;
    typing the results invariant would have a custom_vjp's cotangents psum'd wrongly.
    JAX takes the axes from the out_shape's ``manual_axis_type``, which plax's
    ShapeDtypeStruct does not carry: the operands' union is the one safe answer.)"""
    gm = grid_mapping
    return [replication.union(ins)] * (len(gm.block_mappings) - gm.num_inputs)


abstract_eval_rules[pallas_call_p] = _abstract
# (a kernel over a named grid, such as a core_map's, may ask its axes: lax.axis_index)
body_context_rules[pallas_call_p] = lambda params: extend_axis_env(
    [(n, g) for n, g in zip(params["grid_mapping"].grid_names or (),
                            params["grid_mapping"].grid) if g is not None])
replication_rules[pallas_call_p] = _replication
register_lowering(pallas_call_p, _lowering)
param_printers[pallas_call_p] = _print
# As in JAX, a kernel is never removed from a jaxpr, even with its results unused: whether
# it may go is the compiler's call (its ``has_side_effects``).
dce_rules[pallas_call_p] = lambda used_outputs, eqn: ([True] * len(eqn.invars), eqn)
# (the kernel's effects are on its own block references, never on the equation's operands)
nested_effect_rules[pallas_call_p] = lambda inner, params: no_effects
