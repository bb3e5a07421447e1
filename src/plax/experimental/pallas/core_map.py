"""``pl.core_map`` and ``pl.kernel``: a stateful function run once per core of a mesh.

``core_map(mesh)(f)`` runs ``f`` (no arguments, no results) on every core of ``mesh`` (a
``TensorCoreMesh`` from ``pltpu.create_tensorcore_mesh``: the TensorCores of a device, one
on a v5e); ``f`` reads and writes the reference boxes (``plax.new_ref``) it closes over, and
``lax.axis_index(axis_name)`` is the core's index. As JAX discharges it, it is one mesh
kernel (a ``pallas_call`` over the grid ``((axis_name, num_cores),)`` with
``GridMapping.unpipelined``): its operands are the values of the references the body uses
(in the order it first uses them), each whole in the reference's memory space (the mesh's
default, ANY, for one that names none; another space types the operand with
``with_memory_space_constraint``, so the compiled call places it there); its results are
those the body writes, each aliased to its operand and written back into the box. While
``f`` is traced each box stands for the kernel's reference of its operand
(``Ref._kernel_view``); the body is traced once more first to find which it uses and
writes. ``pl.kernel(body, out_type, mesh=...)`` is the functional form (JAX's ``mpmd_map``):
one mesh kernel whose operands are the inputs and whose results are fresh outputs of
``out_type``, not aliased; ``body`` receives references to both, then the scratch buffers.

The references a body closes over are found in its closure (and the closures of the
functions it closes over, and the lists, tuples and dicts it closes over). The references of
an enclosing ``run_state`` (traced, not boxes) are found as the consts of the body's jaxpr;
a body that uses them runs as that jaxpr, evaluated on the kernel's references.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from plax import tree_util
from plax.core.avals import ShapedArray
from plax.core.effects import AccumEffect, WriteEffect
from plax.core.jaxpr import Var, eval_jaxpr
from plax.core.refs import AbstractRef
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, extend_axis_env, get_aval
from plax.experimental.pallas.call import _INDEX, _scratch_aval, pallas_call
from plax.experimental.pallas.core import ANY, BlockSpec, MemoryRef
from plax.higher_order import ref_effects
from plax.higher_order.pallas_call import kernel_grid, program_id
from plax.pallas.memory_space import memory_space_of, with_memory_space_constraint_p
from plax.ref import Ref, empty_ref, new_ref

__all__ = ["TensorCore", "TensorCoreMesh", "create_tensorcore_mesh", "core_map", "kernel"]


@dataclasses.dataclass(frozen=True)
class TensorCore:
    """One TensorCore of a device (its index)."""

    id: int


@dataclasses.dataclass(frozen=True, init=False)
class TensorCoreMesh:
    """A mesh of the TensorCores of a device, along one named axis."""

    devices: np.ndarray
    axis_names: tuple

    def __init__(self, devices, axis_names):
        devices = np.array(devices, dtype=object)
        devices.setflags(write=False)
        object.__setattr__(self, "devices", devices)
        object.__setattr__(self, "axis_names", tuple(axis_names))

    def __hash__(self):
        return hash((self.devices.shape, tuple(np.ravel(self.devices)), self.axis_names))

    def __eq__(self, other):
        return (type(other) is TensorCoreMesh and self.axis_names == other.axis_names
                and self.devices.shape == other.devices.shape
                and tuple(np.ravel(self.devices)) == tuple(np.ravel(other.devices)))

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def default_memory_space(self):
        return ANY


def create_tensorcore_mesh(axis_name: str, devices=None, num_cores: int | None = None):
    """The mesh of the TensorCores of ``devices[0]`` (default: the first device), or of
    ``num_cores`` cores, along ``axis_name``."""
    if devices is not None and num_cores is not None:
        raise ValueError("cannot specify both devices and num_cores")
    if num_cores is None:
        if devices is None:
            from plax import devices as all_devices
            devices = [all_devices()[0]]
        num_cores = int(getattr(devices[0], "num_cores", 1) or 1)
    return TensorCoreMesh([TensorCore(i) for i in range(num_cores)], [axis_name])


def _closed_refs(f) -> tuple[list, bool]:
    """The reference boxes ``f`` closes over (see the module's docstring), in order, and
    whether it closes over traced references too (an enclosing run_state's)."""
    found, seen, traced = [], set(), []

    def visit(x, depth):
        if id(x) in seen or depth > 8:
            return
        seen.add(id(x))
        if type(x) is Ref:
            found.append(x)
        elif isinstance(x, Tracer) and isinstance(get_aval(x), AbstractRef):
            traced.append(x)
        elif isinstance(x, functools.partial):
            visit(x.func, depth + 1)
            for a in (*x.args, *x.keywords.values()):
                visit(a, depth + 1)
        elif isinstance(x, (list, tuple)):
            for a in x:
                visit(a, depth + 1)
        elif isinstance(x, dict):
            for a in x.values():
                visit(a, depth + 1)
        elif callable(x) and getattr(x, "__closure__", None):
            for cell in x.__closure__:
                try:
                    visit(cell.cell_contents, depth + 1)
                except ValueError:  # (an empty cell)
                    pass
    visit(f, 0)
    return found, bool(traced)


def _ref_uses(f, refs, avals, mesh, scratch, named: bool):
    """The positions in ``refs`` of those the body reads or writes, in the order it first
    uses them (JAX's order of a core_map's operands), and the set of those it writes; the
    body's jaxpr (of the grid indices, ``refs`` and the scratch buffers) and its consts. The
    traced references among the consts it uses are numbered after ``refs``."""
    grid = list(mesh.devices.shape)

    def body(*xs):
        indices, kernel_refs = xs[:len(grid)], xs[len(grid):]
        ins, extra = kernel_refs[:len(refs)], kernel_refs[len(refs):]
        with kernel_grid(grid, indices), ref_effects.bound(refs, list(ins)):
            if named:
                f(**dict(zip(scratch.keys(), extra)))
            else:
                f(*extra)
        return []
    extra = [_scratch_aval(s) for s in (scratch.values() if named else scratch)]
    with extend_axis_env(list(zip(mesh.axis_names, grid))):
        jaxpr, consts = trace_to_jaxpr(body, [_INDEX] * len(grid) + avals + extra,
                                       description="core_map kernel")
    ref_vars = jaxpr.invars[len(grid):len(grid) + len(refs)]
    where = {v: k for k, v in enumerate(ref_vars)}
    # (references of an enclosing trace the body uses are consts of its jaxpr: numbered on)
    for v, c in zip(jaxpr.constvars, consts):
        if isinstance(get_aval(c), AbstractRef):
            where[v] = len(where)
    order = []
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            k = where.get(v) if isinstance(v, Var) else None
            if k is not None and k not in order:
                order.append(k)
    written = {where[e.input] for e in jaxpr.effects
               if isinstance(e, (WriteEffect, AccumEffect)) and e.input in where}
    return order, written, jaxpr, consts


def core_map(mesh, *, compiler_params=None, interpret=False, debug: bool = False,
             cost_estimate=None, name: str | None = None, metadata=None, scratch_shapes=()):
    """Decorator: run the function (no arguments, no results; it updates the references it
    closes over) once on each core of ``mesh``, now."""
    if not isinstance(mesh, TensorCoreMesh):
        raise NotImplementedError(f"core_map: plax runs kernels over a TensorCoreMesh "
                                  f"(pltpu.create_tensorcore_mesh) only, got {mesh!r}.")
    params = _checked_params(compiler_params, mesh)

    def wrapped(f):
        named = isinstance(scratch_shapes, dict)
        found, closes_over_traced = _closed_refs(f)
        if not found and not closes_over_traced:  # (JAX's core_map has nothing to discharge)
            raise ValueError("Attempted to lower core_map without discharging. This can happen "
                             "if the core_map body does not modify any Refs or have other "
                             "observable side-effects.")
        spaces = [r._memory_space or mesh.default_memory_space for r in found]
        avals = [AbstractRef(ShapedArray(r.shape, r.dtype), memory_space=s)
                 for r, s in zip(found, spaces)]
        order, written, jaxpr, consts = _ref_uses(f, found, avals, mesh, scratch_shapes, named)
        traced = [c for c in consts if isinstance(get_aval(c), AbstractRef)]
        everything = found + traced
        spaces += [get_aval(t).memory_space or mesh.default_memory_space for t in traced]
        _check_vmem(mesh, [spaces[k] for k in order])
        refs = [everything[k] for k in order]
        spaces = [spaces[k] for k in order]
        outs = [i for i, k in enumerate(order) if k in written]
        n, default = len(refs), mesh.default_memory_space
        values = [ref_effects.read(r) if type(r) is Ref else r[...] for r in refs]
        # (JAX's discharge: an operand in a memory space other than the mesh's is typed so,
        # which the compiled call reads as where XLA should place it)
        values = [with_memory_space_constraint_p.bind(v, memory_space=s)
                  if s is not default and isinstance(v, Tracer) else v
                  for v, s in zip(values, spaces)]
        types = [MemoryRef(ShapedArray(r.shape, r.dtype), s) for r, s in zip(refs, spaces)]
        specs = [BlockSpec(memory_space=s) for s in spaces]

        def body(*kernel_refs):
            ins, scratch = kernel_refs[:n], kernel_refs[n + len(outs):]
            if traced:  # (the body as traced, its references the kernel's)
                _run_traced(jaxpr, consts, found, order, ins, scratch, mesh)
                return
            with ref_effects.bound(refs, list(ins)):
                returned = (f(**dict(zip(scratch_shapes.keys(), scratch))) if named
                            else f(*scratch))
            if returned is not None:
                raise ValueError(f"The kernel function in core_map {f.__name__} should return "
                                 f"None. It returns a PyTree: "
                                 f"{tree_util.tree_structure(returned)}.")

        call = pallas_call(
            body, out_shape=tuple(types[i] for i in outs),
            grid=tuple(zip(mesh.axis_names, mesh.devices.shape)), in_specs=tuple(specs),
            out_specs=tuple(specs[i] for i in outs), scratch_shapes=scratch_shapes,
            input_output_aliases={i: k for k, i in enumerate(outs)}, compiler_params=params,
            interpret=interpret, debug=debug, cost_estimate=cost_estimate, metadata=metadata,
            name=name or getattr(f, "__name__", "core_map"), _mesh_kernel=True)
        results = call(*values)
        for i, v in zip(outs, results):
            if type(refs[i]) is Ref:
                ref_effects.write(refs[i], v)
            else:
                refs[i][...] = v
    return wrapped


def _run_traced(jaxpr, consts, boxes, order, kernel_refs, scratch, mesh) -> None:
    """A core_map body that closes over traced references (an enclosing run_state's), run
    as traced (``_ref_uses``) on the kernel's references: the grid indices are the
    program ids, the boxes' and the traced references' the kernel's operands."""
    by_number = dict(zip(order, kernel_refs))
    kernel_consts, k = [], len(boxes)
    for c in consts:
        if isinstance(get_aval(c), AbstractRef):
            kernel_consts.append(by_number.get(k, c))
            k += 1
        else:
            kernel_consts.append(c)
    indices = [program_id(a) for a in range(len(mesh.devices.shape))]
    # (a box the body does not use is no operand: its unused argument is None)
    box_refs = [by_number.get(i) for i in range(len(boxes))]
    eval_jaxpr(jaxpr, kernel_consts, *indices, *box_refs, *scratch)


def _check_vmem(mesh, spaces) -> None:
    from plax.experimental.pallas.tpu import VMEM
    if mesh.devices.size > 1 and any(s is VMEM for s in spaces):
        raise NotImplementedError("TensorCoreMesh does not support VMEM inputs/outputs when "
                                  "there are >1 cores. Use HBM or ANY instead.")


def _checked_params(compiler_params, mesh):
    """``compiler_params`` (a pltpu.CompilerParams naming no dimension semantics) with the
    mesh's axes parallel (JAX's semantics of a TensorCoreMesh)."""
    from plax.experimental.pallas.tpu import PARALLEL, CompilerParams
    if compiler_params and not isinstance(compiler_params, CompilerParams):
        raise ValueError("compiler_params must be a pltpu.CompilerParams")
    compiler_params = compiler_params or CompilerParams()
    if len(mesh.axis_names) > 1:
        raise NotImplementedError("Mesh must be 1D")
    if compiler_params.dimension_semantics is not None:
        raise ValueError("dimension_semantics must be None for TensorCoreMesh")
    return dataclasses.replace(compiler_params,
                               dimension_semantics=(PARALLEL,) * len(mesh.axis_names))


def kernel(body=None, out_type=(), *, mesh, scratch_types=(), compiler_params=None,
           interpret=False, cost_estimate=None, debug: bool = False, name=None,
           metadata=None):
    """``body`` (a function of references: the inputs', then fresh outputs' of
    ``out_type``, then scratch buffers of ``scratch_types``) as a function of the inputs
    returning the outputs, run once per core of ``mesh`` (``core_map``); without ``body``,
    a decorator."""
    if body is None:
        return lambda fun: kernel(fun, out_type, mesh=mesh, scratch_types=scratch_types,
                                  compiler_params=compiler_params, interpret=interpret,
                                  cost_estimate=cost_estimate, debug=debug, name=name,
                                  metadata=metadata)
    if isinstance(mesh, (list, tuple)):
        raise NotImplementedError("pl.kernel: plax runs one body on one mesh (no MPMD).")

    def run(*args):
        leaves = tree_util.tree_leaves(args)
        if any(type(x) is Ref for x in leaves):  # (references: updated in place)
            return _kernel_on_refs(body, out_type, mesh, scratch_types, args, compiler_params,
                                   interpret, debug, cost_estimate, name, metadata)
        default = mesh.default_memory_space
        in_specs = tree_util.tree_map(
            lambda x: BlockSpec(memory_space=memory_space_of(get_aval(x)) or default), args)
        sequence = isinstance(out_type, (tuple, list))
        out_shape = tuple(out_type) if sequence else out_type
        out_specs = tree_util.tree_map(
            lambda t: BlockSpec(memory_space=getattr(t, "memory_space", None) or default),
            out_shape)
        return pallas_call(
            body, out_shape=out_shape, grid=tuple(zip(mesh.axis_names, mesh.devices.shape)),
            in_specs=tuple(in_specs), out_specs=out_specs, scratch_shapes=scratch_types,
            compiler_params=_checked_params(compiler_params, mesh), interpret=interpret,
            debug=debug, cost_estimate=cost_estimate, metadata=metadata,
            name=name or getattr(body, "__name__", None), _mesh_kernel=True)(*args)
    return run


def _kernel_on_refs(body, out_type, mesh, scratch_types, args, compiler_params, interpret,
                    debug, cost_estimate, name, metadata):
    """``pl.kernel`` on arguments among which are references: a ``core_map`` over them and
    fresh references for the outputs."""
    leaves, in_tree = tree_util.tree_flatten(args)
    in_refs = [x if type(x) is Ref else new_ref(x) for x in leaves]
    out_leaves, out_tree = tree_util.tree_flatten(out_type)
    out_refs = [empty_ref(t, getattr(t, "memory_space", None)) for t in out_leaves]
    outs_tree = tree_util.tree_unflatten(out_tree, out_refs)
    spread = list(outs_tree) if isinstance(out_type, (tuple, list)) else [outs_tree]

    def stateful(*scratch, **named):
        body(*tree_util.tree_unflatten(in_tree, in_refs), *spread, *scratch, **named)
    core_map(mesh, compiler_params=compiler_params, interpret=interpret, debug=debug,
             cost_estimate=cost_estimate, name=name or getattr(body, "__name__", None),
             metadata=metadata, scratch_shapes=scratch_types)(stateful)
    return tree_util.tree_unflatten(out_tree, [r[...] for r in out_refs])
