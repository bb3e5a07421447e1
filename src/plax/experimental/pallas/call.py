"""pallas_call: a kernel traced on block references, its BlockSpecs resolved to index maps,
bound as one ``pallas_call`` equation (``plax.higher_order.pallas_call``)."""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from plax.core.refs import AbstractRef
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, get_aval
from plax.experimental.pallas.core import (ANY, Blocked, BlockSpec, Element, GridSpec, Squeezed,
                                           no_block_spec)
from plax.ffi.call import checked_aliases
from plax.first_order.state import ref_get, ref_set
from plax.higher_order.pallas_call import (BlockMapping, GridMapping, kernel_grid,
                                           pallas_call_p)
from plax.pallas.interpret_mode import forced_interpret_params
from plax.transforms.discharge import discharge_state

__all__ = ["pallas_call"]

_INDEX = ShapedArray((), np.dtype(np.int32))


def _fun_name(f) -> str:
    while isinstance(f, functools.partial):  # (JAX names a partial kernel by its function)
        f = f.func
    return getattr(f, "__name__", None) or type(f).__name__


def _normalize_grid(grid) -> tuple:
    grid = (grid,) if isinstance(grid, (int, np.integer)) else tuple(grid)
    for g in grid:
        if isinstance(g, Tracer) or not isinstance(g, (int, np.integer)):
            raise NotImplementedError(f"pallas_call: grid sizes must be static ints (got "
                                      f"{grid}); dynamic grids are not built in plax yet.")
    return tuple(int(g) for g in grid)


def _block_dim(b, what: str):
    """A block dimension as an int, or None for a squeezed one."""
    if b is None or isinstance(b, Squeezed):
        return None
    if isinstance(b, Blocked):
        return int(b.block_size)
    if isinstance(b, Element):
        raise NotImplementedError(f"{what}: Element block dimensions are not built in plax yet.")
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool):
        return int(b)
    raise TypeError(f"{what}: a block dimension must be an int, None or pl.squeezed, got {b!r}.")


def _trace_index_map(index_map, grid, ndim: int, block_shape, origin: str,
                     prefetch) -> ClosedJaxpr:
    """The index map as a ClosedJaxpr from the grid indices and the scalar-prefetch values
    (``prefetch``: their tree and reference types; the map reads them as references) to the
    block indices."""
    name = _fun_name(index_map)
    pre_tree, pre_avals = prefetch

    def flat(*xs):
        indices, refs = xs[:len(grid)], xs[len(grid):]
        out = index_map(*indices, *_spread(pre_tree, list(refs)) if pre_avals else ())
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != ndim:
            raise ValueError(f"Index map function {name} for {origin} must return {ndim} values "
                             f"to match block_shape={block_shape}. Currently returning "
                             f"{len(out)} values.")
        return list(out)
    jaxpr, consts = trace_to_jaxpr(flat, [_INDEX] * len(grid) + list(pre_avals),
                                   description=f"index map {name}")
    if any(isinstance(c, Tracer) for c in consts):
        raise ValueError(f"Index map function {name} for {origin} captures traced values; pass "
                         "them as inputs of the kernel instead.")
    for v in jaxpr.outvars:
        if not dtypes.issubdtype(v.aval.dtype, np.integer) or v.aval.shape != ():
            raise ValueError(f"Index map function {name} for {origin} must return integer "
                             f"scalars, got {v.aval.str_short()}.")
    if not pre_avals:
        return ClosedJaxpr(jaxpr, consts)
    # the references read as values: a plain function of the indices and prefetch values
    plain = discharge_state(ClosedJaxpr(jaxpr, consts),
                            should_discharge=[False] * len(grid) + [True] * len(pre_avals))
    jaxpr, consts = trace_to_jaxpr(
        lambda *xs: eval_jaxpr(plain.jaxpr, plain.consts, *xs)[:ndim],
        [_INDEX] * len(grid) + [a.inner_aval for a in pre_avals],
        description=f"index map {name}")
    return ClosedJaxpr(jaxpr, consts)


def _block_mapping(spec, aval, grid, origin: str, prefetch=(None, ())) -> BlockMapping:
    shape = tuple(aval.shape)
    if spec is no_block_spec or spec is None:
        spec = BlockSpec()
    if not isinstance(spec, BlockSpec):
        raise TypeError(f"The spec of {origin} must be a pl.BlockSpec, got {spec!r}.")
    block_shape = shape if spec.block_shape is None else tuple(spec.block_shape)
    if len(block_shape) != len(shape):
        raise ValueError(f"Block shape for {origin} (= {block_shape}) must have the same number "
                         f"of dimensions as the array shape {shape}.")
    dims = tuple(_block_dim(b, f"Block shape for {origin}") for b in block_shape)
    index_map = spec.index_map
    if index_map is None:
        def index_map(*_):
            return (0,) * len(shape)
    closed = _trace_index_map(index_map, grid, len(shape), block_shape, origin, prefetch)
    return BlockMapping(dims, ShapedArray(shape, aval.dtype), closed, origin,
                        spec.memory_space)


def _specs(specs, tree, what: str, which: str) -> list:
    if isinstance(specs, list):
        specs = tuple(specs)
    if specs is no_block_spec:
        return [no_block_spec] * tree.num_leaves
    full = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    try:
        return tree_util.broadcast_prefix(
            specs, full, is_leaf=lambda x: isinstance(x, BlockSpec) or x is no_block_spec)
    except ValueError as e:
        raise ValueError(f"Pytree for `{what}` and `{which}` do not match: {e}") from None


def _scratch_aval(s):
    if hasattr(s, "get_ref_aval"):
        return s.get_ref_aval()
    raise TypeError(f"pallas_call: a scratch shape must describe a buffer in a memory space "
                    f"(such as pl.ANY(shape, dtype)), got {s!r}.")


def _spread(tree, leaves):
    """The kernel's positional references for a tree: a tuple or list spreads, else one."""
    value = tree_util.tree_unflatten(tree, leaves)
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _trace_kernel(kernel, name, grid, trees, mappings, scratch):
    """The kernel's Jaxpr: grid indices, then the references of the scalar-prefetch arrays,
    inputs, outputs (``trees``: the three trees) and scratch buffers."""
    ref_avals = [AbstractRef(ShapedArray(bm.ref_shape, bm.array_aval.dtype),
                             memory_space=bm.memory_space)
                 for bm in mappings] + [s for s in scratch]
    pre_tree, in_tree, out_tree = trees
    n_pre = pre_tree.num_leaves
    n_in = n_pre + in_tree.num_leaves
    n_out = out_tree.num_leaves

    def body(*xs):
        indices, refs = xs[:len(grid)], list(xs[len(grid):])
        with kernel_grid(grid, indices):
            pre = _spread(pre_tree, refs[:n_pre]) if n_pre else []
            args = tree_util.tree_unflatten(in_tree, refs[n_pre:n_in])
            kernel(*pre, *args, *_spread(out_tree, refs[n_in:n_in + n_out]),
                   *refs[n_in + n_out:])
        return []
    jaxpr, consts = trace_to_jaxpr(body, [_INDEX] * len(grid) + ref_avals,
                                   description=f"pallas_call kernel {name}")
    if any(not isinstance(get_aval(c), AbstractRef) for c in consts):
        shown = ", ".join(get_aval(c).str_short() for c in consts)
        raise ValueError(f"The kernel function in the pallas_call {name} captures constants "
                         f"[{shown}]. You should pass them as inputs.")
    return jaxpr, consts


def _hoist_captured_refs(jaxpr, refs, gm: GridMapping, aliases, pre):
    """A kernel that closes over references of the enclosing program (a ``run_state`` body's,
    say), made a kernel of them as JAX makes it: each becomes a whole input in memory space
    ANY, placed first after the scalar-prefetch operands, aliased to a new first output; the
    caller reads them before the call and writes the results back. The kernel works on the
    outputs (JAX's on the inputs: on a TPU both are one buffer), so that interpret mode,
    where they are two arrays, returns what the kernel wrote."""
    n_idx, n_pre, n_h = len(gm.grid), gm.num_scalar_prefetch, len(refs)
    avals = [get_aval(r).inner_aval for r in refs]
    maps = [_block_mapping(BlockSpec(memory_space=ANY), a, gm.grid, f"captured[{k}]", pre)
            for k, a in enumerate(avals)]
    n_in = n_idx + gm.num_inputs
    ins = [Var(AbstractRef(a, memory_space=ANY)) for a in avals]
    first = n_idx + n_pre
    invars = (jaxpr.invars[:first] + ins + jaxpr.invars[first:n_in] + list(jaxpr.constvars)
              + jaxpr.invars[n_in:])
    body = Jaxpr([], invars, jaxpr.outvars, jaxpr.eqns)
    bms = gm.block_mappings
    gm = dataclasses.replace(
        gm, block_mappings=bms[:n_pre] + tuple(maps) + bms[n_pre:gm.num_inputs] + tuple(maps)
        + bms[gm.num_inputs:], num_inputs=gm.num_inputs + n_h,
        num_outputs=gm.num_outputs + n_h,
        out_memory_spaces=(None,) * n_h + tuple(gm.out_memory_spaces))
    aliases = tuple((n_pre + k, k) for k in range(n_h)) + tuple(
        (i + n_h if i >= n_pre else i, o + n_h) for i, o in aliases)
    return body, gm, aliases


def pallas_call(kernel, out_shape, *, grid_spec=None, grid=(), in_specs=no_block_spec,
                out_specs=no_block_spec, scratch_shapes=(), input_output_aliases={},  # noqa: B006
                debug=False, interpret=False, name=None, compiler_params=None,
                cost_estimate=None, metadata=None):
    """``kernel`` (a function of references: inputs, outputs, scratch buffers, each one
    block) run once per point of ``grid``, as a function of the inputs returning arrays
    shaped as ``out_shape``: compiled by Mosaic on a TPU, or run as a loop of lax ops with
    ``interpret=True`` on any backend."""
    del metadata
    num_prefetch, prefetch_space = 0, None
    if grid_spec is not None:
        num_prefetch = getattr(grid_spec, "num_scalar_prefetch", 0)
        prefetch_space = getattr(grid_spec, "prefetch_memory_space", None)
        grid, in_specs = grid_spec.grid, grid_spec.in_specs
        out_specs, scratch_shapes = grid_spec.out_specs, grid_spec.scratch_shapes
    elif not isinstance(grid_spec, (GridSpec, type(None))):
        raise TypeError(f"grid_spec must be a pl.GridSpec, got {grid_spec!r}.")
    grid = _normalize_grid(grid)
    name = name or _fun_name(kernel)
    if isinstance(out_shape, list):  # (a list of results is a tuple, as for the specs)
        out_shape = tuple(out_shape)
    out_leaves, out_tree = tree_util.tree_flatten(out_shape)
    out_avals = [ShapedArray(tuple(s.shape), dtypes.dtype(s.dtype)) for s in out_leaves]
    out_spaces = tuple(getattr(s, "memory_space", None) for s in out_leaves)
    scratch = [_scratch_aval(s) for s in tree_util.tree_leaves(tuple(scratch_shapes))]
    traced = {}

    def prepare(pre_tree, in_tree, in_avals):
        key = (pre_tree, in_tree, tuple(in_avals))
        hit = traced.get(key)
        if hit is None:
            n_pre = pre_tree.num_leaves
            pre = (pre_tree, [AbstractRef(a, memory_space=prefetch_space)
                              for a in in_avals[:n_pre]])
            whole = BlockSpec(memory_space=prefetch_space)
            ins = [whole] * n_pre + _specs(in_specs, in_tree, "in_specs", "inputs")
            outs = _specs(out_specs, out_tree, "out_specs", "out_shape")
            mappings = tuple(
                [_block_mapping(s, a, grid, f"args[{k}]", pre)
                 for k, (s, a) in enumerate(zip(ins, in_avals))]
                + [_block_mapping(s, a, grid, f"outputs[{k}]", pre)
                   for k, (s, a) in enumerate(zip(outs, out_avals))])
            aliases = checked_aliases(input_output_aliases, in_avals, out_avals, indexed=True)
            gm = GridMapping(grid, mappings, len(in_avals), len(out_avals), tuple(
                a.inner_aval for a in scratch), n_pre, out_spaces)
            body, refs = _trace_kernel(kernel, name, grid, (pre_tree, in_tree, out_tree),
                                       mappings, scratch)
            if refs:  # (the references belong to this call's context: traced each time)
                return (*_hoist_captured_refs(body, refs, gm, aliases, pre), refs)
            hit = traced[key] = (body, gm, aliases, [])
        return hit

    def wrapped(*args):
        if len(args) < num_prefetch:
            raise ValueError(f"pallas_call {name}: {num_prefetch} scalar-prefetch operands "
                             f"expected before the inputs, got {len(args)} arguments.")
        pre_leaves, pre_tree = tree_util.tree_flatten(args[:num_prefetch])
        in_leaves, in_tree = tree_util.tree_flatten(args[num_prefetch:])
        leaves = pre_leaves + in_leaves
        in_avals = [get_aval(x).update(weak_type=False) for x in leaves]
        body, gm, aliases, refs = prepare(pre_tree, in_tree, in_avals)
        leaves = [x if isinstance(x, Tracer) or hasattr(x, "dtype") and x.dtype == a.dtype
                  else np.asarray(x, a.dtype) for x, a in zip(leaves, in_avals)]
        n_pre = len(pre_leaves)
        leaves[n_pre:n_pre] = [ref_get(r, ()) for r in refs]
        outs = pallas_call_p.bind(
            *leaves, jaxpr=body, grid_mapping=gm, input_output_aliases=aliases,
            interpret=forced_interpret_params() or interpret, debug=debug, name=name,
            compiler_params=compiler_params, cost_estimate=cost_estimate)
        for r, value in zip(refs, outs[:len(refs)]):
            ref_set(r, (), value)
        return tree_util.tree_unflatten(out_tree, outs[len(refs):])
    wrapped.__name__ = name
    return wrapped
