"""``pl.core_map`` and ``pl.kernel``: a stateful function run once per core of a mesh.

``core_map(mesh)(f)`` runs ``f`` (no arguments, no results) on every core of ``mesh`` (a
``TensorCoreMesh`` from ``pltpu.create_tensorcore_mesh``: the TensorCores of a device, one
on a v5e); ``f`` reads and writes the reference boxes (``plax.new_ref``) it closes over, and
``lax.axis_index(axis_name)`` is the core's index. It is a ``pallas_call`` over the grid
``((axis_name, num_cores),)`` whose operands are the values of those references, each a
whole block in the reference's memory space (the mesh's default, ANY, for a reference that
names none), aliased to a result of the same type that is written back into the box: while
``f`` is traced each box stands for the kernel's reference of that result
(``Ref._kernel_view``). On a TPU it compiles with Mosaic as any ``pallas_call``; in
interpret mode it runs as one. ``pl.kernel(body, out_type, mesh=...)`` is the functional
form: ``body`` receives references to the inputs, then to fresh outputs of ``out_type``.

The references a body closes over are found in its closure (and the closures of the
functions it closes over, and the lists, tuples and dicts it closes over).
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from plax import tree_util
from plax.core.avals import ShapedArray
from plax.experimental.pallas.core import ANY, BlockSpec, MemoryRef
from plax.higher_order import ref_effects
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


def _closed_refs(f) -> list:
    """The reference boxes ``f`` closes over (see the module's docstring), in order."""
    found, seen = [], set()

    def visit(x, depth):
        if id(x) in seen or depth > 8:
            return
        seen.add(id(x))
        if type(x) is Ref:
            found.append(x)
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
    return found


def core_map(mesh, *, compiler_params=None, interpret=False, debug: bool = False,
             cost_estimate=None, name: str | None = None, metadata=None, scratch_shapes=()):
    """Decorator: run the function (no arguments, no results; it updates the references it
    closes over) once on each core of ``mesh``, now."""
    if not isinstance(mesh, TensorCoreMesh):
        raise NotImplementedError(f"core_map: plax runs kernels over a TensorCoreMesh "
                                  f"(pltpu.create_tensorcore_mesh) only, got {mesh!r}.")
    from plax.experimental.pallas.call import pallas_call

    def wrapped(f):
        refs = _closed_refs(f)
        if not refs:  # (JAX's core_map has nothing to discharge it then)
            raise ValueError("Attempted to lower core_map without discharging. This can happen "
                             "if the core_map body does not modify any Refs or have other "
                             "observable side-effects.")
        values = [ref_effects.read(r) for r in refs]
        spaces = [r._memory_space or mesh.default_memory_space for r in refs]
        types = [MemoryRef(ShapedArray(r.shape, r.dtype), s) for r, s in zip(refs, spaces)]
        specs = tuple(BlockSpec(memory_space=s) for s in spaces)
        n, named = len(refs), isinstance(scratch_shapes, dict)

        def body(*kernel_refs):
            outs, scratch = kernel_refs[n:2 * n], kernel_refs[2 * n:]
            with ref_effects.bound(refs, list(outs)):
                returned = (f(**scratch_shapes_as(scratch)) if named else f(*scratch))
            if returned is not None:
                raise ValueError(f"The kernel function in core_map {f.__name__} should return "
                                 f"None. It returns a PyTree: "
                                 f"{tree_util.tree_structure(returned)}.")

        def scratch_shapes_as(scratch):
            return dict(zip(scratch_shapes.keys(), scratch))

        scratch = list(scratch_shapes.values()) if named else list(scratch_shapes)
        call = pallas_call(
            body, out_shape=tuple(types), grid=tuple(zip(mesh.axis_names, mesh.devices.shape)),
            in_specs=specs, out_specs=specs, scratch_shapes=scratch,
            input_output_aliases={k: k for k in range(n)},
            compiler_params=_parallel(compiler_params, len(mesh.axis_names)),
            interpret=interpret, debug=debug, cost_estimate=cost_estimate,
            name=name or getattr(f, "__name__", "core_map"), _mesh_kernel=True)
        results = call(*values)
        for r, v in zip(refs, results):
            ref_effects.write(r, v)
    return wrapped


def _parallel(compiler_params, n_axes: int):
    """``compiler_params`` with the mesh's axes parallel (JAX's semantics of a
    TensorCoreMesh) unless they name other dimension semantics."""
    from plax.experimental.pallas.tpu import PARALLEL, CompilerParams
    if compiler_params is None:
        return CompilerParams(dimension_semantics=(PARALLEL,) * n_axes)
    if (isinstance(compiler_params, CompilerParams)
            and compiler_params.dimension_semantics is None):
        return dataclasses.replace(compiler_params, dimension_semantics=(PARALLEL,) * n_axes)
    return compiler_params


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
                 scratch_shapes=scratch_types)(stateful)
        outs = [r[...] for r in out_refs]
        return tree_util.tree_unflatten(out_tree, outs)
    return run
