"""Sharded export: the layout an SPMD module is exported for.

A jitted function is exported as an SPMD module when jit would run it as one (shardings
given, arguments or ShapeDtypeStructs laid out over a mesh, sharding constraints or
shard_map inside): ``layout_for`` asks the same placement jit asks (runtime/spmd.py). The
module is lowered with the program's devices in partition order, so its meshes
(``sdy.mesh``) number them as jit's module does; ``@main``'s parameters and results carry
the ``sdy.sharding`` attributes jit writes, and ``mhlo.num_partitions`` the device count.
The Exported keeps the device-free part: NamedShardings over AbstractMeshes.

Shardings over AbstractMeshes only (no concrete mesh anywhere) are lowered over a stand-in
mesh of the default backend's first devices, as the context mesh while exporting.
"""
from __future__ import annotations

import contextlib

import numpy as np

from plax.runtime import jitted, spmd
from plax.runtime.array import CONCRETE
from plax.runtime.dispatch import is_spread
from plax.sharding.gspmd import GSPMDSharding, as_mesh_sharding
from plax.sharding.mesh import AbstractMesh, Mesh, context_mesh, use_mesh
from plax.sharding.named import NamedSharding


class Layout:
    """An SPMD export's devices (partition order) and the layouts of the function's inputs
    and results: NamedShardings over concrete meshes, None where unspecified."""

    __slots__ = ("devices", "in_shardings", "out_shardings", "stand_in")

    def __init__(self, devices, in_shardings, out_shardings, stand_in=None):
        self.devices = tuple(devices)
        self.in_shardings, self.out_shardings = tuple(in_shardings), tuple(out_shardings)
        self.stand_in = stand_in

    def context(self):
        """Where to lower: under the stand-in mesh, when the shardings named none."""
        return stand_in_context(self.stand_in)

    def arg_attrs(self, module, avals) -> list:
        """``@main``'s parameter attributes (``sdy.sharding``; "" where unspecified)."""
        return [spmd.sharding_attr(module, s, a) if s is not None else ""
                for s, a in zip(self.in_shardings, avals)]

    def result_attrs(self, module, avals) -> list:
        return [spmd.sharding_attr(module, s, a) if s is not None else ""
                for s, a in zip(self.out_shardings, avals)]

    def abstract_in(self) -> tuple:
        return tuple(abstract(s) for s in self.in_shardings)

    def abstract_out(self) -> tuple:
        return tuple(abstract(s) for s in self.out_shardings)


def abstract(sharding):
    """``sharding`` over its mesh's AbstractMesh (None stays None)."""
    if sharding is None:
        return None
    return NamedSharding(sharding.mesh.abstract_mesh, sharding.spec,
                         memory_kind=sharding.memory_kind)


def stand_in_context(mesh):
    return use_mesh(mesh) if mesh is not None else contextlib.nullcontext()


def layout_for(entry, leaves, name: str) -> Layout | None:
    """The layout of a traced jit's export for ``leaves`` (arrays or ShapeDtypeStructs), or
    None when jit would run it on one device."""
    call = entry.call
    n_consts = len(entry.consts)
    args = list(entry.consts) + list(leaves)
    ins = list(call.in_shardings or (None,) * len(args))
    for i, a in enumerate(args):
        own = getattr(a, "sharding", None)
        if ins[i] is None and isinstance(own, (NamedSharding, GSPMDSharding)) and \
                (type(a) not in CONCRETE or is_spread(a)):
            ins[i] = own  # (a ShapeDtypeStruct's, or an array's laid out over a mesh)
    stand_in = _stand_in(ins, call, args, name)
    with stand_in_context(stand_in):
        given = tuple(ins) if any(s is not None for s in ins) else ()
        where = jitted.placement(call.replace(in_shardings=given), args)
        if where is None:
            return None
        devices, mesh = where
        in_shardings = spmd.on_mesh([as_mesh_sharding(s, mesh) for s in ins], mesh)
        outs = spmd.on_mesh([as_mesh_sharding(s, mesh) for s in call.out_shardings], mesh) \
            if call.out_shardings else (None,) * len(call.jaxpr.jaxpr.outvars)
        outs = spmd.typed_results(entry.user_jaxpr.jaxpr, outs, in_shardings)
    return Layout(devices, in_shardings[n_consts:], outs, stand_in)


def _stand_in(ins, call, args, name: str):
    """A concrete mesh for shardings over an AbstractMesh when nothing names a concrete one
    of its shape (neither the arguments nor the context mesh); else None."""
    shardings = [s for s in (*ins, *(call.out_shardings or ()))
                 if isinstance(s, NamedSharding)]
    shardings += [s for s in spmd.inner_shardings(call.jaxpr) if isinstance(s, NamedSharding)]
    abstract_meshes = [s.mesh for s in shardings if isinstance(s.mesh, AbstractMesh)]
    if not abstract_meshes or isinstance(context_mesh(), Mesh):
        return None
    concrete = [s.mesh for s in shardings if isinstance(s.mesh, Mesh)]
    concrete += [a.sharding.mesh for a in args
                 if is_spread(a) and isinstance(a.sharding, NamedSharding)]
    want = abstract_meshes[0]
    if any(m.abstract_mesh == want for m in concrete):
        return None
    from plax.api.devices import devices
    available = devices()
    if len(available) < want.size:
        raise ValueError(f"Cannot export {name} for {want}: it has {want.size} devices and "
                         f"this process sees {len(available)}.")
    grid = np.empty(want.size, dtype=object)
    grid[:] = available[:want.size]
    return Mesh(grid.reshape(want.axis_sizes), want.axis_names, want.axis_types)


def on_mesh(sharding, mesh):
    """An exported sharding (over an AbstractMesh) on ``mesh`` (None: as it is), which must
    have the same axes: what ``Exported.in_shardings_jax`` gives."""
    if sharding is None or mesh is None:
        return sharding
    want, got = sharding.mesh, mesh.abstract_mesh
    if (got.axis_sizes, got.axis_names, got.axis_types) != \
            (want.axis_sizes, want.axis_names, want.axis_types):
        raise ValueError(f"NamedSharding new mesh {mesh} does not match the mesh used for "
                         f"export {want}.")
    return sharding.update(mesh=mesh)
