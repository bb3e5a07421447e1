"""SPMD execution: one program over the devices of a mesh, partitioned by XLA.

A computation runs SPMD when an input is laid out over several devices or jit is
given shardings. Every parameter gets a sharding (the requested one, the one its
argument has, or replicated over the mesh); results get those requested, or the
ones XLA's partitioner chose, read back from the executable as NamedShardings.
The module carries Shardy attributes (``sdy.mesh``, ``sdy.sharding``) and is
compiled with SPMD partitioning.

Arguments are laid out exactly as the executable expects before it runs: a
wrong shard shape makes XLA abort the process, so nothing reaches it unchecked.
"""
from __future__ import annotations

import copy

import numpy as np

from plax.core import dtypes
from plax.core.avals import physical_aval
from plax.core.caches import BoundedCache, WeakKeyCache
from plax.core.config import config
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var, open_jaxpr, subjaxprs
from plax.lowering.stablehlo import lower_jaxpr_to_module
from plax.core.effects import jaxpr_effects, ordered_effects_of
from plax.runtime import dispatch, pipeline_steps, tokens, xla
from plax.runtime.dispatch import is_spread
from plax.runtime.array import CONCRETE, Array, buffer_of
from plax.sharding.gspmd import GSPMDSharding, as_mesh_sharding
from plax.sharding.mesh import Mesh, computation_mesh, context_mesh, meshes_made
from plax.sharding.named import NamedSharding, concrete_sharding, named_sharding_of, typed_aval
from plax.sharding.partition_spec import PartitionSpec

_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


# --- where a computation runs ---------------------------------------------------------------
def placement(args, in_shardings, out_shardings, what: str, closed=None):
    """The devices and mesh of an SPMD computation (one given NamedShardings, arguments laid
    out over several devices, or sharding constraints inside ``closed``), or None when it
    runs on one device."""
    given = [s for s in (*in_shardings, *out_shardings) if s is not None]
    spread = [a.sharding for a in args if is_spread(a)]
    # (a GSPMDSharding as its view: a NamedSharding over a mesh of its own)
    views = {id(s.named_view) for s in (*given, *spread) if isinstance(s, GSPMDSharding)}
    given = [as_mesh_sharding(s) for s in given]
    spread = [as_mesh_sharding(s) for s in spread]
    inner = inner_shardings(closed) if closed is not None else []
    given += [s for s in inner if s is not CONTEXT_MESH]
    typed = [s for s in given if not isinstance(s.mesh, Mesh)]
    if typed:  # shardings in types: on the mesh of a concrete one, or the context mesh's
        given = [s for s in given if isinstance(s.mesh, Mesh)]
        meshes = [s.mesh for s in (*given, *spread) if isinstance(s, NamedSharding)]
        known = next((m for m in meshes if m.abstract_mesh == typed[0].mesh),
                     meshes[0] if meshes else None)
        given.append(concrete_sharding(typed[0], known))
    if not (spread or any(isinstance(s, NamedSharding) for s in given)):
        mesh = context_mesh()
        if CONTEXT_MESH in inner and isinstance(mesh, Mesh) and mesh.size >= 2:
            given.append(NamedSharding(mesh, PartitionSpec()))  # (on the context mesh's devices)
        else:
            mesh = computation_mesh()  # set_mesh's: computations run over it, as in JAX
            if mesh is None:
                return None
            _refuse_committed_elsewhere(args, mesh, what)
            given.append(NamedSharding(mesh, PartitionSpec()))
    shardings = given + spread
    devices = tuple(shardings[0]._device_assignment)
    for s in shardings[1:]:
        if tuple(s._device_assignment) != devices:
            raise ValueError(
                f"Received incompatible devices for {what}: one sharding places data on "
                f"devices {[d.id for d in devices]} and another on "
                f"{[d.id for d in s._device_assignment]}. Reshard the arguments onto one "
                "mesh first (plax.device_put).")
    meshes = [s.mesh for s in shardings if isinstance(s, NamedSharding)]
    mesh = next((s.mesh for s in shardings if isinstance(s, NamedSharding) and
                 id(s) not in views), meshes[0] if meshes else None)
    if mesh is None:
        raise ValueError(f"{what} needs a NamedSharding to run over {len(devices)} devices.")
    return devices, mesh


def _refuse_committed_elsewhere(args, mesh, what: str) -> None:
    """JAX's error for an argument committed to a device off the mesh set by set_mesh (over
    which the computation runs)."""
    ids = [d.id for d in mesh.devices.flat]
    for a in args:
        if type(a) in CONCRETE and a._committed and \
                [d.id for d in a.sharding._device_assignment] != ids:
            raise ValueError(
                f"Received incompatible devices for {what}. Got an argument of shape "
                f"{a.aval.str_short()} committed to device ids "
                f"{[d.id for d in a.sharding._device_assignment]} and jit's context mesh with "
                f"device ids {ids}: put the argument on the mesh (plax.device_put(x, "
                "NamedSharding(mesh, P()))) or leave the set_mesh block.")


def where_to_run(closed, args, in_shardings, out_shardings, name: str):
    """The devices and mesh a jitted jaxpr runs on over ``args`` when that is SPMD (it has
    shardings, sharded arguments or sharding constraints inside), else None.
    ``in_shardings``/``out_shardings`` are pjit's parameters (``()``: unconstrained)."""
    if not (in_shardings or out_shardings or inner_shardings(closed)
            or any(is_spread(a) for a in args) or computation_mesh() is not None):
        return None
    return placement(args, in_shardings or (None,) * len(args), out_shardings,
                     f"jitted computation {name}", closed)


_inner = WeakKeyCache("sharding constraints in jaxprs")


class _ContextMesh:
    """In ``inner_shardings``: a call that needs several devices without naming them (an
    exported SPMD module): the computation runs over the context mesh when nothing else
    places it."""

    def __repr__(self):
        return "CONTEXT_MESH"


CONTEXT_MESH = _ContextMesh()


def type_sharding(aval):
    """The sharding ``aval`` carries in its type, or None: only arrays' types carry one (a
    token's, a reference's or a library hi type's type has none)."""
    return getattr(aval, "_sharding", None)


def inner_shardings(closed) -> list:
    """The shardings of the sharding constraints in ``closed`` and the bodies it calls, and
    those in its values' types (over AbstractMeshes); CONTEXT_MESH for a call of an
    exported SPMD module."""
    if not meshes_made[0]:  # each of them names a mesh, and none was ever made
        return []
    hit = _inner.get(closed, None)
    if hit is None:
        found = []

        def walk(jaxpr):
            for v in jaxpr.invars:
                if type_sharding(v.aval) is not None:
                    found.append(v.aval._sharding)
            for eqn in jaxpr.eqns:
                if eqn.primitive.name == "sharding_constraint":
                    found.append(eqn.params["sharding"])
                if eqn.primitive.name == "shard_map":  # runs over its mesh
                    found.append(NamedSharding(eqn.params["mesh"], PartitionSpec()))
                if eqn.primitive.name == "call_exported" and \
                        eqn.params["exported"].nr_devices > 1:
                    found.append(CONTEXT_MESH)
                for key in ("in_shardings", "out_shardings"):  # a nested jit's
                    found.extend(as_mesh_sharding(s) for s in eqn.params.get(key) or ()
                                 if isinstance(s, (NamedSharding, GSPMDSharding)))
                for v in eqn.outvars:  # a type split over Explicit axes (an AbstractMesh)
                    if type_sharding(v.aval) is not None:
                        found.append(v.aval._sharding)
                        break
                for sub in subjaxprs(eqn.params):
                    walk(open_jaxpr(sub))
        walk(closed.jaxpr)
        hit = _inner.put(closed, None, found)
    return hit


def parameter_shardings(args, avals, in_shardings, devices, mesh, what: str) -> tuple:
    """The sharding each parameter is laid out with (requested, its own, or replicated)."""
    out = []
    for i, (a, aval, s) in enumerate(zip(args, avals, in_shardings)):
        own = as_mesh_sharding(a.sharding, mesh) if type(a) in CONCRETE else None
        s = as_mesh_sharding(s, mesh)
        if s is None:
            if own is not None and tuple(own._device_assignment) == devices:
                # (a one-device array of a one-device mesh's program: the mesh's layout)
                s = own if isinstance(own, NamedSharding) else NamedSharding(mesh, PartitionSpec())
            elif own is not None and a._committed:
                raise ValueError(
                    f"Received incompatible devices for {what}: argument {i} "
                    f"({aval.str_short()}) is committed to {list(own.device_set)}, but the "
                    f"computation runs on devices {[d.id for d in devices]}. Move it with "
                    "plax.device_put(x, sharding) first.")
            else:
                s = NamedSharding(mesh, PartitionSpec())
        elif own is not None and a._committed and not own.is_equivalent_to(s, aval.ndim):
            raise ValueError(
                f"Sharding passed to jit does not match the sharding on the respective arg. Got "
                f"jit sharding: {s} and arg sharding: {own} for arg shape {aval.str_short()} "
                f"(argument {i}). Reshard it with plax.device_put(x, sharding), or leave its "
                "in_shardings entry None.")
        if tuple(s._device_assignment) != devices:
            raise ValueError(f"Received incompatible devices for {what}: the sharding of "
                             f"argument {i}, {s}, is not on the computation's devices.")
        s.check_shape(aval.shape, f"One of jit args (argument {i}) is incompatible with its "
                                  f"sharding {s}: ")
        out.append(s)
    return tuple(out)


def _buffer(x, aval, sharding):
    """The jaxlib array of ``x`` laid out exactly by ``sharding``."""
    if type(x) in CONCRETE:
        buf = buffer_of(x)
        own = buf._sharding
        if (own is sharding or own == sharding) and not buf.is_deleted():
            return buf  # the common cases, checked cheaply (XLA crashes on a deleted buffer)
        x._check_alive()
        if own.is_equivalent_to(sharding, aval.ndim):
            return buf
        return buffer_of(dispatch.reshard(x, sharding))
    host = np.asarray(x, dtype=aval.dtype) if not dtypes.is_extended(aval.dtype) else x
    dispatch.check_host_arg_sharding(sharding)
    return buffer_of(dispatch.put_sharded(host, sharding))


# --- compiled SPMD programs -----------------------------------------------------------------------
# The completion token of the last program with collectives that may still be running (its
# outputs would not do: they may have been donated or deleted since).
_in_flight = [None]


class SpmdProgram:
    """An SPMD executable with the layouts of its parameters and results."""

    __slots__ = ("exe", "kept", "in_avals", "out_avals", "in_shardings", "out_shardings",
                 "handlers", "collective", "text", "name", "_slots", "_effects", "_special",
                 "_labelled")

    def __init__(self, exe, kept, in_avals, out_avals, in_shardings, out_shardings, text, name,
                 probes=()):
        self.exe, self.kept, self.text, self.name = exe, kept, text, name
        self.in_avals, self.out_avals = tuple(in_avals), tuple(out_avals)
        self.in_shardings, self.out_shardings = tuple(in_shardings), tuple(out_shardings)
        # ``probes``: (aval, sharding) of the extra results inspect_array_sharding added;
        # they are computed but not returned.
        self._effects = (getattr(text, "takes_token", False),
                         bool(getattr(text, "host_callbacks", ())))
        self.handlers = dispatch.result_handlers(
            [*zip(out_avals, out_shardings), *probes],
            self._token_sharding() if self._effects[0] else None)
        hlo = xla.optimized_hlo_text(exe)
        self.collective = any(c in hlo for c in _COLLECTIVES)
        self._slots = tuple(zip(self.kept, self.in_avals, self.in_shardings))
        self._special = dispatch.special_results(self.out_avals)
        self._labelled = {}

    def labelled(self, labels: tuple) -> "SpmdProgram":
        """This program with result ``i`` reported as laid out by ``labels[i]`` where that is
        not None (a sharding laying it out as the program does, over its devices in order)."""
        hit = self._labelled.get(labels)
        if hit is None:
            hit = copy.copy(self)
            hit._labelled = {}
            hit.out_shardings = tuple(s if label is None else label
                                      for s, label in zip(self.out_shardings, labels))
            first = 1 if self._effects[0] else 0  # (after the token's handler)
            hit.handlers = {c: list(hs) for c, hs in self.handlers.items()}
            for i, label in enumerate(labels):
                if label is not None:
                    made = dispatch.result_handlers([(self.out_avals[i], label)])
                    for c, hs in hit.handlers.items():
                        hs[first + i] = made[c][0]
            hit = self._labelled.setdefault(labels, hit)
        return hit

    def run(self, args, committed: bool = True) -> list:
        bufs = [_buffer(args[i], aval, s) for i, aval, s in self._slots]
        if self.collective:
            # XLA's CPU collectives rendezvous on a bounded thread pool: many programs with
            # collectives in flight at once can starve it and deadlock (JAX hangs the same
            # way on 2 cores). One such program runs at a time.
            previous, _in_flight[0] = _in_flight[0], None
            if previous is not None:
                xla.wait_for(previous)
        handlers = self.handlers[committed]
        if any(self._effects):
            outs, done = self._run_effectful(bufs, handlers)
        elif self.collective:
            outs, done = xla.execute_with_completion(self.exe, bufs, handlers)
        else:
            outs = xla.execute(self.exe, bufs, handlers)
        if self.collective:
            _in_flight[0] = done
        if len(outs) != len(self.out_avals):  # (inspection probes are not returned)
            outs = outs[:len(self.out_avals)]
        return dispatch.arrays_from_results(outs, self.out_avals, committed, self._special)

    def _token_sharding(self):
        mesh = next(s.mesh for s in (*self.in_shardings, *self.out_shardings)
                    if isinstance(s, NamedSharding))
        return NamedSharding(mesh, PartitionSpec())

    def _run_effectful(self, bufs, handlers) -> list:
        takes_token = self._effects[0]
        if takes_token:
            sharding = self._token_sharding()
            key = tuple(sharding._device_assignment)
            bufs = [tokens.ordered_token(key, sharding), *bufs]
        outs, done = xla.execute_with_completion(self.exe, bufs, handlers)
        tokens.note_run(done)
        if takes_token:
            effects = getattr(self.text, "ordered_effects", ())
            tokens.set_ordered_token(key, outs[0], effects)
            outs = outs[1:]
        return outs, done


class LoweredSpmd:
    """An SPMD module, and what compiling and running it needs."""

    __slots__ = ("text", "jaxpr", "kept", "in_shardings", "out_shardings", "devices", "name",
                 "callbacks")

    def __init__(self, text, jaxpr, kept, in_shardings, out_shardings, devices, name,
                 callbacks=()):
        self.text, self.jaxpr, self.kept, self.name = text, jaxpr, kept, name
        self.in_shardings, self.out_shardings = tuple(in_shardings), tuple(out_shardings)
        self.devices = tuple(devices)
        self.callbacks = tuple(callbacks)  # of inspect_array_sharding: its extra results

    def compile(self, options=None) -> SpmdProgram:
        if config.read("log_compiles"):
            import logging
            logging.getLogger("plax").warning("Compiling %s for %d devices (SPMD)", self.name,
                                              len(self.devices))
        exe = xla.compile(self.text, list(self.devices), num_partitions=len(self.devices),
                          spmd=True, options=options, fun_name=f"jit({self.name})")
        chosen = xla.output_hlo_shardings(exe)
        mesh = self._layout_mesh()
        if chosen is None:  # one device: XLA partitioned nothing and reports no layouts
            outs = [s if s is not None else self._one_device_layout(mesh, v.aval)
                    for s, v in zip(self.out_shardings, self.jaxpr.outvars)]
        else:
            outs = [s if s is not None else named_sharding_of(h, mesh, physical_aval(v.aval).ndim)
                    for s, h, v in zip(self.out_shardings, chosen, self.jaxpr.outvars)]
        n = len(outs) - len(self.callbacks)
        avals = [typed_aval(v.aval, s) for v, s in zip(self.jaxpr.outvars, outs)]
        for callback, sharding in zip(self.callbacks, outs[n:]):
            callback(sharding)  # at compile time, as JAX calls it
        return SpmdProgram(exe, self.kept, [v.aval for v in self.jaxpr.invars], avals[:n],
                           self.in_shardings, outs[:n], self.text, self.name,
                           probes=list(zip(avals[n:], outs[n:])))


    def _layout_mesh(self) -> Mesh:
        """The mesh the results' layouts are named over: the arguments' or results', else
        that of a sharding constraint inside (a jit with no array arguments), else the mesh
        set by set_mesh, else one axis over the program's devices."""
        for s in (*self.in_shardings, *self.out_shardings):
            if isinstance(s, NamedSharding):
                return s.mesh
        inner = [s for s in inner_shardings(ClosedJaxpr(self.jaxpr, [None] * len(
            self.jaxpr.constvars))) if isinstance(s, NamedSharding)]
        for s in inner:
            if getattr(s.mesh, "devices", None) is not None:
                return s.mesh
        mesh = computation_mesh()  # (set_mesh's, when the program runs over it)
        if mesh is not None and tuple(mesh.devices.flat) == self.devices:
            return mesh
        for s in inner:  # over an AbstractMesh: the concrete mesh of that shape it ran on
            if s.mesh.size == len(self.devices):
                mesh = context_mesh()
                if isinstance(mesh, Mesh) and mesh.abstract_mesh == s.mesh and \
                        tuple(mesh.devices.flat) == self.devices:
                    return mesh
                return Mesh(np.array(self.devices).reshape(s.mesh.axis_sizes),
                            s.mesh.axis_names, axis_types=s.mesh.axis_types)
        return Mesh(np.array(self.devices), ("devices",))

    def _one_device_layout(self, mesh, aval) -> NamedSharding:
        """A result's layout on a one-device mesh, as JAX reports it: the first parameter's
        when the result has its rank (any layout is the same there), else replicated."""
        if self.in_shardings and self.jaxpr.invars:
            first = self.in_shardings[0]
            if isinstance(first, NamedSharding) and \
                    physical_aval(self.jaxpr.invars[0].aval).ndim == physical_aval(aval).ndim:
                return first
        return NamedSharding(mesh, PartitionSpec())


def lower_spmd(jaxpr: Jaxpr, name: str, in_shardings, out_shardings, devices, donated,
               keep_unused: bool, platform: str | None = None) -> LoweredSpmd:
    """The SPMD module of ``jaxpr``: its invars laid out by ``in_shardings``, its results by
    ``out_shardings`` (None: XLA's choice), over ``devices`` (lowered for their platform, or
    ``platform``)."""
    jaxpr, kept = dispatch.live_part(jaxpr, keep_unused)
    ordered = ordered_effects_of(jaxpr_effects(jaxpr))
    if ordered and len(devices) > 1:
        raise ValueError(
            f"The following ordered effects are not supported for more than 1 device: "
            f"{ordered}. {name} runs on {len(devices)} devices; use ordered=False, or put the "
            "ordered callback inside shard_map, where each device runs its own in order.")
    in_shardings = [in_shardings[i] for i in kept]
    donated = dispatch.usable_donations(jaxpr, [bool(donated[i]) for i in kept], name)
    jaxpr, callbacks = _probes_as_results(jaxpr)
    out_shardings = typed_results(jaxpr, out_shardings, in_shardings)
    for sharding, v in zip(out_shardings, jaxpr.outvars):
        if sharding is not None:  # a result is stored as laid out: it must split evenly
            sharding.check_shape(v.aval.shape)
    out_shardings = tuple(out_shardings) + (None,) * len(callbacks)

    def arg_attr(donate, sharding, aval):
        return (lambda module: f"jax.buffer_donor = true, {sharding_attr(module, sharding, aval)}"
                ) if donate else (lambda module: sharding_attr(module, sharding, aval))

    arg_attrs = [arg_attr(d, s, v.aval) for d, s, v in zip(donated, in_shardings, jaxpr.invars)]
    result_attrs = [(lambda module, s=s, a=v.aval: sharding_attr(module, s, a))
                    if s is not None else "" for s, v in zip(out_shardings, jaxpr.outvars)]
    with pipeline_steps.step("lower", f"jit({name})", "/jax/core/compile/jaxpr_to_mlir_module_duration"):
        text = lower_jaxpr_to_module(
            jaxpr, module_name=f"jit_{name}", num_partitions=len(devices), arg_attrs=arg_attrs,
            result_attrs=result_attrs, platform=platform or devices[0].platform,
            devices=devices)
    return LoweredSpmd(text, jaxpr, kept, in_shardings, out_shardings, devices, name, callbacks)


def sharding_attr(module, sharding, aval) -> str:
    """``sdy.sharding = ...``: the attribute of a parameter or result of ``@main`` laid out by
    ``sharding`` (its mesh declared in ``module``, a ModuleBuilder)."""
    symbol = module.mesh_symbol(sharding.mesh)
    return f"sdy.sharding = {sharding.shardy_attribute(physical_aval(aval).ndim, symbol)}"


def typed_results(jaxpr, out_shardings, in_shardings) -> tuple:
    """``out_shardings`` with the results XLA would choose for pinned to their types, where
    types carry shardings (Explicit axes): the results are laid out as typed."""
    if not any(type_sharding(v.aval) is not None for v in jaxpr.outvars) and not any(
            isinstance(s, NamedSharding) and s.mesh.explicit_axes
            for s in (*in_shardings, *out_shardings)):
        return tuple(out_shardings)
    mesh = next((s.mesh for s in (*in_shardings, *out_shardings)
                 if isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh)), None)
    out = []
    for s, v in zip(out_shardings, jaxpr.outvars):
        if s is None and type_sharding(v.aval) is not None:
            s = concrete_sharding(v.aval._sharding, mesh)
        elif s is None and mesh is not None and mesh.axis_names and \
                mesh.explicit_axes == mesh.axis_names:
            # replicated, as its type says (one entry per dimension, as JAX's)
            s = NamedSharding(mesh, PartitionSpec(*[None] * len(v.aval.shape)))
        out.append(s)
    return tuple(out)


def _probes_as_results(jaxpr: Jaxpr):
    """``jaxpr`` with each inspect_array_sharding turned into an extra result (whose layout
    XLA then reports), and their callbacks. Probes in nested jits are carried out as extra
    results of those calls; in loop and cond bodies they have no value to report."""
    if not any(e.primitive.name == "inspect_sharding" for e in _all_eqns(jaxpr)):
        return jaxpr, ()
    eqns, values, callbacks = [], [], []
    for e in jaxpr.eqns:
        if e.primitive.name == "inspect_sharding":
            values.append(e.invars[0])
            callbacks.append(e.params["callback"])
        elif e.primitive.name == "jit" and any(
                sub.primitive.name == "inspect_sharding"
                for sub in _all_eqns(e.params["jaxpr"].jaxpr)):
            closed = e.params["jaxpr"]
            inner, inner_callbacks = _probes_as_results(closed.jaxpr)
            extra = [Var(v.aval) for v in inner.outvars[len(closed.jaxpr.outvars):]]
            params = dict(e.params, jaxpr=ClosedJaxpr(inner, closed.consts))
            if params.get("out_shardings"):
                params["out_shardings"] = tuple(params["out_shardings"]) + (None,) * len(extra)
            eqns.append(e.replace(outvars=list(e.outvars) + extra, params=params))
            values += extra
            callbacks += list(inner_callbacks)
        elif any(sub_e.primitive.name == "inspect_sharding"
                 for sub in subjaxprs(e.params) for sub_e in _all_eqns(open_jaxpr(sub))):
            raise NotImplementedError(
                f"inspect_array_sharding inside a {e.primitive.name} body of a sharded jit is "
                "not supported: the value has no single layout to report. Inspect a value "
                "outside the loop or cond.")
        else:
            eqns.append(e)
    return Jaxpr(list(jaxpr.constvars), list(jaxpr.invars), list(jaxpr.outvars) + values,
                 eqns), callbacks


def _all_eqns(jaxpr):
    for e in jaxpr.eqns:
        yield e
        for sub in subjaxprs(e.params):
            yield from _all_eqns(open_jaxpr(sub))


def compile_spmd(jaxpr: Jaxpr, name: str, in_shardings, out_shardings, devices, donated,
                 keep_unused: bool, options=None) -> SpmdProgram:
    """Lower and compile ``jaxpr`` over ``devices`` (see ``lower_spmd``)."""
    return lower_spmd(jaxpr, name, in_shardings, out_shardings, devices, donated,
                      keep_unused).compile(options)


_programs = WeakKeyCache("SPMD executables")  # per jaxpr: (shardings, donation, ...) -> program


def spmd_program(closed, name, donated, keep_unused, in_shardings, out_shardings, devices,
                 options=None) -> SpmdProgram:
    """The SPMD program of a closed jaxpr for these layouts (compiled once)."""
    key = (tuple(devices), tuple(in_shardings), tuple(out_shardings), tuple(donated),
           keep_unused, options)
    program = _programs.get(closed, key)
    if program is None:
        program = _programs.put(closed, key, compile_spmd(
            closed.jaxpr, name, in_shardings, out_shardings, devices, donated, keep_unused,
            options))
    return program


def on_mesh(shardings, mesh) -> tuple:
    """``shardings`` with those over an AbstractMesh put on ``mesh``, the concrete mesh the
    computation runs on (a sharding may name the mesh by its axes only; its devices are
    those in effect when the computation is dispatched)."""
    return tuple(concrete_sharding(s, mesh) if isinstance(s, NamedSharding) and
                 not isinstance(s.mesh, Mesh) else s for s in shardings)


def program_for(call, args, where) -> SpmdProgram:
    """The SPMD program running a jitted call (a ``jitted.JitCall``) on ``args``: ``where`` is
    ``placement(...)``."""
    devices, mesh = where
    closed = call.jaxpr
    avals = [v.aval for v in closed.jaxpr.invars]
    params = parameter_shardings(args, avals, on_mesh(call.in_shardings or (None,) * len(args),
                                                      mesh),
                                 devices, mesh, f"jitted computation {call.name}")
    outs = on_mesh([as_mesh_sharding(s, mesh) for s in call.out_shardings], mesh) \
        if call.out_shardings else (None,) * len(closed.jaxpr.outvars)
    program = spmd_program(closed, call.name, call.donated_invars, call.keep_unused, params,
                           outs, devices, call.compiler_options)
    labels = gspmd_labels(program, call.in_shardings, call.out_shardings, args)
    return program if labels is None else program.labelled(labels)


def gspmd_labels(program, in_shardings, out_shardings, args):
    """How a program's results are reported when GSPMDShardings were asked for: a requested
    one as itself, the others (when no NamedSharding was given or held by an argument) as
    the GSPMDSharding of XLA's layout; None when nothing is relabelled."""
    own = [a.sharding for a in args if type(a) in CONCRETE and a._committed]
    asked = [s for s in (*(in_shardings or ()), *(out_shardings or ()), *own) if s is not None]
    if not any(isinstance(s, GSPMDSharding) for s in asked):
        return None
    all_gspmd = not any(isinstance(s, NamedSharding) for s in asked)
    wanted = tuple(out_shardings) if out_shardings else (None,) * len(program.out_shardings)
    labels = []
    for w, s, aval in zip(wanted, program.out_shardings, program.out_avals):
        if isinstance(w, GSPMDSharding):
            label = w if w._device_assignment == s._device_assignment else None
        elif w is None and all_gspmd and isinstance(s, NamedSharding):
            label = GSPMDSharding(s._device_assignment,
                                  s._to_xla_hlo_sharding(physical_aval(aval).ndim),
                                  memory_kind=s.memory_kind)
        else:
            label = None
        labels.append(label)
    return tuple(labels) if any(label is not None for label in labels) else None


_prim_programs = BoundedCache("SPMD primitive executables", 2048)


def primitive_program(prim, args, avals, params) -> SpmdProgram:
    """The program running ``prim`` eagerly on arguments laid out over a mesh (compiled
    once; its results keep a layout)."""
    what = f"jitted computation (the eager {prim.name})"
    devices, mesh = placement(args, [None] * len(args), [], what)
    shardings = parameter_shardings(args, avals, [None] * len(args), devices, mesh, what)
    try:
        key = (prim, tuple(params.items()), tuple(avals), shardings)
        program = _prim_programs.get(key)
    except TypeError:
        key, program = None, None
    if program is None:
        jaxpr = dispatch.one_equation_jaxpr(prim, avals, params)
        program = compile_spmd(jaxpr, f"{prim.name}", shardings, (None,) * len(jaxpr.outvars),
                               devices, (False,) * len(args), True)
        if key is not None:
            _prim_programs.put(key, program)
    labels = gspmd_labels(program, (), (), args)
    return program if labels is None else program.labelled(labels)


__all__ = ["is_spread", "placement", "parameter_shardings", "named_sharding_of",
           "SpmdProgram", "compile_spmd", "spmd_program", "primitive_program"]


_reshard_programs = BoundedCache("on-device reshards", 512)


def reshard_on_device(x: Array, sharding):
    """``x`` laid out by ``sharding`` through an identity SPMD program (XLA moves the data
    between devices), when both layouts are over the same devices; else None."""
    src = x._sharding
    if not (isinstance(src, NamedSharding) and isinstance(sharding, NamedSharding)) or \
            tuple(src._device_assignment) != tuple(sharding._device_assignment):
        return None
    aval = x.aval
    key = (aval, src, sharding)
    program = _reshard_programs.get(key)
    if program is None:
        from plax.core.jaxpr import Var
        v = Var(aval)
        program = _reshard_programs.put(key, compile_spmd(
            Jaxpr([], [v], [v], []), "reshard", (src,), (sharding,),
            tuple(sharding._device_assignment), (False,), True))
    return program.run([x], committed=True)[0]
