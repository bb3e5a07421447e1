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
from plax.first_order import conversion
from plax.core.trace import Tracer, extend_axis_env, get_aval
from plax.experimental.pallas.core import (ANY, Blocked, BlockSpec, BoundedSlice, Element,
                                           GridSpec, Indirect, MemorySpace, Squeezed,
                                           no_block_spec)
from plax.ffi.call import checked_aliases
from plax.first_order.shapes import broadcast_in_dim
from plax.first_order.state import ref_get, ref_set
from plax.higher_order import pallas_call_rules  # noqa: F401  (pallas_call's JVP and vmap)
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


def _src_info(f) -> str:
    """``name at file:line`` for a Python function (as JAX names kernels and index maps)."""
    inner = f
    while hasattr(inner, "func"):  # functools.partial
        inner = inner.func
    code = getattr(inner, "__code__", None)
    if code is None:
        return _fun_name(f)
    return f"{_fun_name(inner)} at {code.co_filename}:{code.co_firstlineno}"


def _normalize_grid(grid) -> tuple:
    """The grid's sizes (None for a size known only at run time: a traced integer), its axis
    names (None without names: a named grid is a sequence of (name, size) pairs) and the
    traced sizes."""
    grid = (grid,) if isinstance(grid, (int, np.integer)) or isinstance(grid, Tracer) \
        else tuple(grid)
    names = None
    if grid and all(isinstance(g, tuple) and len(g) == 2 for g in grid):
        names = tuple(n for n, _ in grid)
        grid = tuple(g for _, g in grid)
    sizes, dynamic = [], []
    for g in grid:
        if isinstance(g, Tracer):
            if g.aval.shape != () or not dtypes.issubdtype(g.aval.dtype, np.integer):
                raise ValueError(f"pallas_call: a grid size must be an integer scalar, got "
                                 f"{g.aval.str_short()}.")
            sizes.append(None)
            dynamic.append(g)
        elif isinstance(g, (int, np.integer)) or (np.ndim(g) == 0 and hasattr(g, "dtype")
                                                  and dtypes.issubdtype(g.dtype, np.integer)):
            sizes.append(int(g))
        else:
            raise TypeError(f"pallas_call: grid sizes must be ints, got {grid}.")
    return tuple(sizes), names, dynamic


def _block_dim(b, what: str):
    """A block dimension as an int, or None for a squeezed one."""
    if b is None or isinstance(b, Squeezed):
        return None
    if isinstance(b, (Blocked, Element)):
        return int(b.block_size)
    if isinstance(b, (BoundedSlice, Indirect)):
        raise NotImplementedError(f"{what}: Unsupported block dimension type: {b!r} (plax's "
                                  "pallas_call takes ints, None, pl.squeezed, pl.Blocked and "
                                  "pl.Element).")
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool):
        return int(b)
    raise TypeError(f"{what}: a block dimension must be an int, None or pl.squeezed, got {b!r}.")


def _element_padding(block_shape) -> tuple:
    """Per dimension, an Element dimension's (low, high) padding, else None; () if none is
    an Element dimension."""
    pads = tuple((int(b.padding[0]), int(b.padding[1])) if isinstance(b, Element) else None
                 for b in block_shape)
    return pads if any(p is not None for p in pads) else ()


def _trace_index_map(index_map, grid, ndim: int, block_shape, origin: str,
                     prefetch) -> ClosedJaxpr:
    """The index map as a ClosedJaxpr from the grid indices, the grid's run-time sizes (when
    it has some) and the scalar-prefetch values (``prefetch``: their tree and reference types;
    the map reads them as references) to the block indices."""
    name = _src_info(index_map)
    pre_tree, pre_avals = prefetch
    n_dyn = sum(g is None for g in grid)
    n_lead = len(grid) + n_dyn

    def flat(*xs):
        indices, sizes, refs = xs[:len(grid)], iter(xs[len(grid):n_lead]), xs[n_lead:]
        # (an index map may ask num_programs too)
        with kernel_grid([next(sizes) if g is None else g for g in grid], indices):
            out = index_map(*indices, *_spread(pre_tree, list(refs)) if pre_avals else ())
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != ndim:
            raise ValueError(f"Index map function {name} for {origin} must return {ndim} values "
                             f"to match block_shape={block_shape}. Currently returning "
                             f"{len(out)} values.")
        return list(out)
    jaxpr, consts = trace_to_jaxpr(flat, [_INDEX] * n_lead + list(pre_avals),
                                   description=f"index map {name}")
    if consts:
        shown = ", ".join(get_aval(c).str_short() for c in consts)
        raise ValueError(f"Index map function {name} for {origin} must not capture constants: "
                         f"[{shown}] (compute them from the grid indices, or pass them as "
                         "scalar-prefetch operands).")
    for k, v in enumerate(jaxpr.outvars):
        if not dtypes.issubdtype(v.aval.dtype, np.integer) or v.aval.shape != ():
            raise ValueError(f"Index map function {name} for {origin} must return integer "
                             f"scalars. Output[{k}] has type {v.aval!r}.")
    if not pre_avals:
        return ClosedJaxpr(jaxpr, consts)
    # the references read as values: a plain function of the indices and prefetch values
    plain = discharge_state(ClosedJaxpr(jaxpr, consts),
                            should_discharge=[False] * n_lead + [True] * len(pre_avals))
    jaxpr, consts = trace_to_jaxpr(
        lambda *xs: eval_jaxpr(plain.jaxpr, plain.consts, *xs)[:ndim],
        [_INDEX] * n_lead + [a.inner_aval for a in pre_avals],
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
                        spec.memory_space, _element_padding(block_shape))


def _is_spec(x) -> bool:
    return isinstance(x, BlockSpec) or x is no_block_spec


def _mismatches(spec, value, path=()):
    """Where the tree of specs and the tree of values differ: (path, what the spec tree has,
    what the value tree has, why), the first difference along each branch."""
    spec_leaf, value_leaf = _is_spec(spec), tree_util.treedef_is_leaf(
        tree_util.tree_structure(value))
    if spec_leaf and value_leaf:
        return
    if spec_leaf or value_leaf or type(spec) is not type(value):
        yield (path, "pytree leaf" if spec_leaf else str(type(spec)),
               "pytree leaf" if value_leaf else str(type(value)), "their Python types differ")
        return
    if isinstance(spec, (tuple, list)) and len(spec) != len(value):
        yield (path, f"{type(spec).__name__} of length {len(spec)}",
               f"{type(value).__name__} of length {len(value)}", "the lengths do not match")
        return
    spec_kids, _ = tree_util.tree_flatten_with_path(spec, is_leaf=lambda x: x is not spec)
    value_kids, _ = tree_util.tree_flatten_with_path(value, is_leaf=lambda x: x is not value)
    if [k for k, _ in spec_kids] != [k for k, _ in value_kids]:
        yield path, str(type(spec)), str(type(value)), "their keys differ"
        return
    for (key, s), (_, v) in zip(spec_kids, value_kids):
        yield from _mismatches(s, v, path + tuple(key))


def _specs(specs, tree, what: str, which: str) -> list:
    """One spec per leaf of ``tree``: ``specs`` must have its structure exactly (as JAX's)."""
    if isinstance(specs, list):
        specs = tuple(specs)
    if specs is no_block_spec:
        return [no_block_spec] * tree.num_leaves
    value = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    flat, spec_tree = tree_util.tree_flatten(specs, is_leaf=_is_spec)
    if spec_tree == tree:
        return flat
    errors = list(_mismatches(specs, value))
    lines = [f"Pytree for `{what}` and `{which}` do not match. There are {len(errors)} "
             "mismatches, including:"]
    for path, a, b, why in errors:
        where = f"at {tree_util.keystr(path)}, " if path else ""
        lines.append(f"    * {where}`{what}` is a {a} but `{which}` is a {b}, so {why}")
    raise ValueError("\n".join(lines))


def _scratch_aval(s):
    if hasattr(s, "get_ref_aval"):
        return s.get_ref_aval()
    raise TypeError(f"pallas_call: a scratch shape must describe a buffer in a memory space "
                    f"(such as pl.ANY(shape, dtype)), got {s!r}.")


def _spread(tree, leaves):
    """The kernel's positional references for a tree: a tuple or list spreads, else one."""
    value = tree_util.tree_unflatten(tree, leaves)
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _trace_kernel(kernel, name, grid, trees, mappings, scratch, mesh_kernel=False,
                  grid_names=None):
    """The kernel's Jaxpr: grid indices, then the references of the scalar-prefetch arrays,
    inputs, outputs and scratch buffers (``trees``: their four trees); and the values it
    captures (references; scalars too in a ``mesh_kernel``)."""
    ref_avals = [AbstractRef(ShapedArray(bm.ref_shape, bm.array_aval.dtype),
                             memory_space=bm.memory_space or MemorySpace.DEFAULT)
                 for bm in mappings] + [s for s in scratch]
    pre_tree, in_tree, out_tree, scratch_tree = trees
    n_pre = pre_tree.num_leaves
    n_in = n_pre + in_tree.num_leaves
    n_out = out_tree.num_leaves

    n_dyn = sum(g is None for g in grid)

    def body(*xs):
        indices, sizes = xs[:len(grid)], iter(xs[len(grid):len(grid) + n_dyn])
        refs = list(xs[len(grid) + n_dyn:])
        with kernel_grid([next(sizes) if g is None else g for g in grid], indices, grid_names):
            pre = _spread(pre_tree, refs[:n_pre]) if n_pre else []
            args = tree_util.tree_unflatten(in_tree, refs[n_pre:n_in])
            scratch = tree_util.tree_unflatten(scratch_tree, refs[n_in + n_out:])
            named = isinstance(scratch, dict)  # a dict: by keyword
            returned = kernel(*pre, *args, *_spread(out_tree, refs[n_in:n_in + n_out]),
                              *([] if named else _spread(scratch_tree, refs[n_in + n_out:])),
                              **(scratch if named else {}))
        if returned is not None:
            raise ValueError(f"The kernel function in the pallas_call {_src_info(kernel)} "
                             "should return None. It returns a PyTree: "
                             f"{tree_util.tree_structure(returned)}")
        return []
    jaxpr, consts = trace_to_jaxpr(body, [_INDEX] * (len(grid) + n_dyn) + ref_avals,
                                   description=f"pallas_call kernel {name}")
    avals = [get_aval(c) for c in consts]
    if mesh_kernel:  # (a mesh kernel may capture scalars: see _lift_scalars)
        bad = [a for a in avals if not isinstance(a, AbstractRef) and a.shape != ()]
        if bad:
            raise ValueError(f"The kernel function in the mpmd_map {_src_info(kernel)} "
                             f"captures non-Ref constants [{_shown(bad)}]. You should pass "
                             "them as inputs.")
    elif any(not isinstance(a, AbstractRef) for a in avals):
        raise ValueError(f"The kernel function in the pallas_call {_src_info(kernel)} "
                         f"captures constants "
                         f"[{_shown(avals)}]. You should pass them as inputs.")
    return jaxpr, consts


def _shown(avals) -> str:
    return ", ".join(a.str_short() for a in avals)


def _lift_scalars(jaxpr, consts, gm: GridMapping, pre):
    """A mesh kernel that captures scalars (traced values of the enclosing program), made a
    kernel of them as JAX makes one: each becomes an input after the others, a (1,) array
    in SMEM that the kernel reads first. Returns the kernel, its grid mapping, the scalars
    and the references it still captures."""
    from plax.experimental.pallas.tpu import SMEM
    scalars = [c for c in consts if not isinstance(get_aval(c), AbstractRef)]
    refs = [c for c in consts if isinstance(get_aval(c), AbstractRef)]
    if not scalars:
        return jaxpr, gm, [], consts
    n_lead = len(gm.grid) + gm.num_dynamic_grid_bounds
    n_in, n_s = n_lead + gm.num_inputs, len(scalars)
    avals = [ShapedArray((1,), get_aval(c).dtype) for c in scalars]
    maps = [_block_mapping(BlockSpec(memory_space=SMEM), a, gm.grid, f"captured scalar[{k}]",
                           pre) for k, a in enumerate(avals)]

    def body(*xs):
        held = iter(ref_get(r, (0,)) for r in xs[n_in:n_in + n_s])
        values = [c if isinstance(get_aval(c), AbstractRef) else next(held) for c in consts]
        return eval_jaxpr(jaxpr, values, *xs[:n_in], *xs[n_in + n_s:])
    in_avals = [v.aval for v in jaxpr.invars]
    lifted, kept = trace_to_jaxpr(
        body, in_avals[:n_in] + [AbstractRef(a, memory_space=SMEM) for a in avals]
        + in_avals[n_in:], description="pallas_call kernel")
    assert len(kept) == len(refs)
    bms = gm.block_mappings
    gm = dataclasses.replace(gm, block_mappings=bms[:gm.num_inputs] + tuple(maps)
                             + bms[gm.num_inputs:], num_inputs=gm.num_inputs + n_s)
    return lifted, gm, scalars, kept


def _hoist_captured_refs(jaxpr, refs, gm: GridMapping, aliases, pre):
    """A kernel that closes over references of the enclosing program (a ``run_state`` body's,
    say), made a kernel of them as JAX makes it: each becomes a whole input in memory space
    ANY, placed first after the scalar-prefetch operands, aliased to a new first output; the
    caller reads them before the call and writes the results back. The kernel works on the
    outputs (JAX's on the inputs: on a TPU both are one buffer), so that interpret mode,
    where they are two arrays, returns what the kernel wrote."""
    n_idx = len(gm.grid) + gm.num_dynamic_grid_bounds  # (the grid indices, dynamic sizes)
    n_pre, n_h = gm.num_scalar_prefetch, len(refs)
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
                cost_estimate=None, metadata=None, _mesh_kernel=False):
    """``kernel`` (a function of references: inputs, outputs, scratch buffers, each one
    block) run once per point of ``grid``, as a function of the inputs returning arrays
    shaped as ``out_shape``: compiled by Mosaic on a TPU, or run as a loop of lax ops with
    ``interpret=True`` on any backend. (``_mesh_kernel``: ``pl.core_map`` / ``pl.kernel``'s
    call: unpipelined, see ``GridMapping.unpipelined``, and it may capture scalars, see
    ``_lift_scalars``.)"""
    if metadata is not None:  # (str -> str: the custom call's kernel_metadata on a TPU)
        metadata = tuple(sorted((str(k), str(v)) for k, v in dict(metadata).items()))
    num_prefetch, prefetch_space = 0, None
    if grid_spec is not None:
        num_prefetch = getattr(grid_spec, "num_scalar_prefetch", 0)
        prefetch_space = getattr(grid_spec, "prefetch_memory_space", None)
        grid, in_specs = grid_spec.grid, grid_spec.in_specs
        out_specs, scratch_shapes = grid_spec.out_specs, grid_spec.scratch_shapes
    elif not isinstance(grid_spec, (GridSpec, type(None))):
        raise TypeError(f"grid_spec must be a pl.GridSpec, got {grid_spec!r}.")
    if isinstance(in_specs, list):
        in_specs = tuple(in_specs)
    elif in_specs is not no_block_spec and not isinstance(in_specs, tuple):
        raise ValueError(f"`in_specs` must be a tuple or a list. Found: {in_specs}")
    grid, grid_names, dynamic_sizes = _normalize_grid(grid)
    name = name or _fun_name(kernel)
    if isinstance(out_shape, list):  # (a list of results is a tuple, as for the specs)
        out_shape = tuple(out_shape)
    out_paths, out_tree = tree_util.tree_flatten_with_path(out_shape)
    out_origins = [f"outputs{tree_util.keystr(p)}" for p, _ in out_paths]
    out_leaves = [x for _, x in out_paths]
    out_avals = [ShapedArray(tuple(s.shape), dtypes.dtype(s.dtype)) for s in out_leaves]
    out_spaces = tuple(getattr(s, "memory_space", None) for s in out_leaves)
    scratch_leaves, scratch_tree = tree_util.tree_flatten(  # (a dict reaches the kernel
        scratch_shapes if isinstance(scratch_shapes, dict) else tuple(scratch_shapes),
        is_leaf=lambda s: hasattr(s, "get_ref_aval"))  # as keyword arguments, as in JAX)
    scratch = [_scratch_aval(s) for s in scratch_leaves]
    traced = {}

    def prepare(pre_tree, in_tree, in_avals, in_origins):
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
                [_block_mapping(s, a, grid, o, pre)
                 for s, a, o in zip(ins, in_avals, in_origins)]
                + [_block_mapping(s, a, grid, o, pre)
                   for s, a, o in zip(outs, out_avals, out_origins)])
            aliases = checked_aliases(input_output_aliases, in_avals, out_avals, indexed=True)
            gm = GridMapping(grid, mappings, len(in_avals), len(out_avals), tuple(
                a.inner_aval for a in scratch), n_pre, grid_names, len(dynamic_sizes),
                out_memory_spaces=out_spaces, unpipelined=_mesh_kernel)
            # a named grid's axes are bound while the kernel is traced (lax.axis_size)
            named = [(n, g) for n, g in zip(grid_names or (), grid) if g is not None]
            with extend_axis_env(named):
                body, consts = _trace_kernel(kernel, name, grid,
                                             (pre_tree, in_tree, out_tree, scratch_tree),
                                             mappings, scratch, _mesh_kernel, grid_names)
                body, gm, scalars, refs = _lift_scalars(body, consts, gm, pre)
            if refs:  # (the references belong to this call's context: traced each time)
                return (*_hoist_captured_refs(body, refs, gm, aliases, pre), refs, scalars)
            if scalars:
                return body, gm, aliases, [], scalars
            hit = traced[key] = (body, gm, aliases, [], [])
        return hit

    def wrapped(*args):
        if len(args) < num_prefetch:
            raise ValueError(f"pallas_call {name}: {num_prefetch} scalar-prefetch operands "
                             f"expected before the inputs, got {len(args)} arguments.")
        pre_leaves, pre_tree = tree_util.tree_flatten(args[:num_prefetch])
        in_leaves, in_tree = tree_util.tree_flatten(args[num_prefetch:])
        leaves = pre_leaves + in_leaves
        in_avals = [get_aval(x).update(weak_type=False) for x in leaves]
        origins = [f"args{tree_util.keystr(p)}"
                   for p, _ in tree_util.tree_flatten_with_path(tuple(args))[0]]
        body, gm, aliases, refs, scalars = prepare(pre_tree, in_tree, in_avals, origins)
        leaves = [x if isinstance(x, Tracer) or hasattr(x, "dtype") and x.dtype == a.dtype
                  else np.asarray(x, a.dtype) for x, a in zip(leaves, in_avals)]
        leaves += [broadcast_in_dim(c, (1,), ()) for c in scalars]
        n_pre = len(pre_leaves)
        leaves[n_pre:n_pre] = [ref_get(r, ()) for r in refs]
        dyn = [conversion.convert_element_type(g, np.int32) for g in dynamic_sizes]
        outs = pallas_call_p.bind(
            *dyn, *leaves, jaxpr=body, grid_mapping=gm, input_output_aliases=aliases,
            interpret=forced_interpret_params() or interpret, debug=debug, name=name,
            compiler_params=compiler_params, cost_estimate=cost_estimate, metadata=metadata)
        for r, value in zip(refs, outs[:len(refs)]):
            ref_set(r, (), value)
        return tree_util.tree_unflatten(out_tree, outs[len(refs):])
    wrapped.__name__ = name
    return wrapped
