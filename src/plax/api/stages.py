"""Ahead-of-time stages of a jitted function: Traced -> Lowered -> Compiled; ``Wrapped``,
what ``jit`` returns, and ``ArgInfo``, what the stages' ``args_info`` hold per argument."""
from __future__ import annotations

import dataclasses
import weakref
from typing import Protocol, runtime_checkable

from plax import tree_util
from plax.core.trace import get_aval
from plax.core.tracebacks import api_boundary
from plax.runtime import cpp_jit, dispatch, jitted, spmd, xla
from plax.runtime.array import CONCRETE
from plax.sharding.gspmd import GSPMDSharding, as_mesh_sharding
from plax.sharding.layouts import Format, default_layout
from plax.sharding.named import NamedSharding


@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """One argument of a traced, lowered or compiled function: its type and whether it is
    donated."""

    _aval: object
    donated: bool

    @property
    def shape(self):
        if not hasattr(self._aval, "shape"):
            raise TypeError(f"No shape attribute with aval of type {type(self._aval)}")
        return self._aval.shape

    @property
    def dtype(self):
        if not hasattr(self._aval, "dtype"):
            raise TypeError(f"No dtype attribute with aval of type {type(self._aval)}")
        return self._aval.dtype


def _args_info(entry, in_tree=None):
    """``(args, kwargs)`` of the dynamic arguments as ArgInfo values."""
    donated = entry.call.donated_invars[len(entry.call.donated_invars) - len(entry.in_avals):]
    return tree_util.tree_unflatten(
        in_tree or entry.in_tree, [ArgInfo(a, bool(d)) for a, d in zip(entry.in_avals, donated)])


@runtime_checkable
class Wrapped(Protocol):
    """A function ready to be traced, lowered and compiled (what ``jit`` returns): calling it
    compiles as needed and runs."""

    def __call__(self, *args, **kwargs):
        """Run the function, tracing and compiling as needed."""
        raise NotImplementedError

    def trace(self, *args, **kwargs) -> "Traced":
        """Trace for these arguments -> ``Traced``."""
        raise NotImplementedError

    def lower(self, *args, **kwargs) -> "Lowered":
        """Trace and lower for these arguments -> ``Lowered``."""
        raise NotImplementedError


class Traced:
    """A jitted function traced for particular argument types."""

    def __init__(self, wrapped, entry, args, leaves=()):
        self._wrapped = wrapped
        self._entry = entry
        self._leaves = list(leaves)

    args_info = property(lambda self: _args_info(self._entry),
                         doc="The arguments' types and donation, as ``(args, kwargs)``.")

    @property
    def jaxpr(self):
        """The ClosedJaxpr of the function (closed-over constants included)."""
        return self._entry.user_jaxpr

    @property
    def out_info(self):
        return self._entry.out_info()

    def lower(self, *, lowering_platforms: tuple[str, ...] | None = None,
              _private_parameters=None) -> "Lowered":
        """Lower to StableHLO; ``lowering_platforms`` (e.g. ``("tpu",)``) lowers for another
        platform than the devices', from any machine (such a module is read or exported,
        not compiled here)."""
        del _private_parameters
        platform = None
        if lowering_platforms is not None:
            names = tuple(lowering_platforms)
            if len(names) != 1:
                raise NotImplementedError(
                    f"lowering_platforms={names}: plax lowers a jitted function for one "
                    "platform at a time; lower once per platform, or use plax.export.export("
                    "..., platforms=[...]).")
            from plax.export.exporting import _canonical
            platform = _canonical(names[0])
        return Lowered(self._wrapped, self._entry, self._leaves, platform=platform)


class Lowered:
    """A jitted function lowered to StableHLO for particular argument types (one SPMD
    module over a mesh when shardings or sharded arguments ask for it)."""

    def __init__(self, wrapped, entry, leaves=(), in_tree=None, platform=None):
        self._wrapped = wrapped
        self._entry = entry
        # A function taking the leaves of its caller's arguments (pmap's jit) is lowered and
        # compiled for that caller's argument structure, ``in_tree``.
        self._in_tree = in_tree or entry.in_tree
        call = entry.call
        own = (call.device or dispatch.default_device()).platform
        self._platform = platform or own
        args = list(entry.consts) + list(leaves)
        self._spmd, ins = _lower_spmd(call, args, self._platform)
        # (what says whether results are reported as GSPMDShardings)
        self._asked = (ins, call.out_shardings, args)
        if self._spmd is not None:
            self._text = self._spmd.text
            return
        self._text, self._jaxpr, self._kept, self._donated = jitted.lower_jitted(
            call, self._platform)

    in_tree = property(lambda self: self._in_tree)
    args_info = property(lambda self: _args_info(self._entry, self._in_tree),
                         doc="The arguments' types and donation, as ``(args, kwargs)``.")

    @property
    def out_info(self):
        """A pytree of ShapeDtypeStruct describing the outputs."""
        return self._entry.out_info()

    def cost_analysis(self) -> dict:
        """XLA's estimate of the program as lowered (before optimisation): flops,
        transcendentals, bytes accessed, ..."""
        return xla.hlo_cost_analysis(self._text)

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The module ``compile`` hands to XLA, as StableHLO (the default) or ``"hlo"``.

        Source locations (MLIR ``loc(...)``, HLO metadata) are shown with ``debug_info=True``.
        """
        if dialect is None or dialect == "stablehlo":
            return self._text if debug_info else _strip_locations(self._text)
        if dialect == "hlo":
            return xla.stablehlo_to_hlo_text(self._text, debug_info)
        raise ValueError(f"unknown dialect: {dialect!r}; Lowered.as_text supports 'stablehlo' "
                         "and 'hlo'.")

    def compiler_ir(self, dialect: str | None = None):
        """The module as jaxlib's objects, as JAX returns it: an MLIR module for
        ``"stablehlo"`` (the default; ``str()`` prints it) or an XlaComputation for ``"hlo"``
        (``as_hlo_text()`` prints it). The same object is returned on every call."""
        dialect = "stablehlo" if dialect is None else dialect
        if dialect not in ("stablehlo", "hlo"):
            raise ValueError(f"unknown dialect: {dialect!r}; Lowered.compiler_ir supports "
                             "'stablehlo' and 'hlo'.")
        cache = self.__dict__.setdefault("_compiler_ir", {})
        if dialect not in cache:
            convert = xla.mlir_module if dialect == "stablehlo" else xla.hlo_computation
            cache[dialect] = convert(self._text)
        return cache[dialect]

    def compile(self, compiler_options=None) -> "Compiled":
        """Compile with XLA; ``compiler_options`` add to (and override) those given to jit."""
        call = self._entry.call
        options = dict(call.compiler_options or ())
        options.update(compiler_options or {})
        options = jitted.compiler_options_key(options)
        if self._spmd is not None:
            own = self._spmd.devices[0].platform
            if self._platform != own:
                raise ValueError(
                    f"This module was lowered for platform '{self._platform}' "
                    f"(lowering_platforms), but it would be compiled for {own} devices. "
                    f"Compile it where {self._platform} devices are.")
            program = self._spmd.compile(options)
            labels = spmd.gspmd_labels(program, *self._asked)
            if labels is not None:
                program = program.labelled(labels)
            return Compiled(self._wrapped, self._entry, program,
                            self._in_tree)
        device = call.device or dispatch.default_device()
        if self._platform != device.platform:
            raise ValueError(
                f"This module was lowered for platform '{self._platform}' (lowering_platforms), "
                f"but it would be compiled for {device}, a '{device.platform}' device. Compile "
                f"it where a {self._platform} device is, or export it (plax.export) to run "
                "there.")
        exe = jitted.compile_lowered(self._text, self._jaxpr, self._kept, self._donated, device,
                                     call.name, options=options)
        return Compiled(self._wrapped, self._entry, exe, self._in_tree)


def _lower_spmd(call, args, platform=None):
    """The SPMD lowering of a jitted call for ``args`` (Arrays, or ShapeDtypeStructs whose
    ``sharding`` counts as a requested one), or None when it runs on one device; and the
    shardings asked for the arguments (``platform``: lower for it, not the devices')."""
    ins = list(call.in_shardings or (None,) * len(args))
    for i, a in enumerate(args):
        if ins[i] is None and type(a) not in CONCRETE and \
                isinstance(getattr(a, "sharding", None), (NamedSharding, GSPMDSharding)):
            ins[i] = a.sharding
    given = tuple(ins) if any(s is not None for s in ins) else ()
    where = jitted.placement(call.replace(in_shardings=given), args)
    if where is None:
        return None, ins
    devices, mesh = where
    avals = [v.aval for v in call.jaxpr.jaxpr.invars]
    params = spmd.parameter_shardings(args, avals, ins, devices, mesh,
                                      f"jitted computation {call.name}")
    outs = tuple(as_mesh_sharding(s, mesh) for s in
                 call.out_shardings or (None,) * len(call.jaxpr.jaxpr.outvars))
    return spmd.lower_spmd(call.jaxpr.jaxpr, call.name, params, outs, devices,
                           call.donated_invars, call.keep_unused, platform=platform), ins


def _strip_locations(text: str) -> str:
    """``text`` without the `` loc(...)`` that end op lines (as MLIR prints without debug info)."""
    out, i = [], 0
    while True:
        j = text.find(" loc(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        line_start = text.rfind("\n", 0, j) + 1
        if text.count('"', line_start, j) % 2:  # inside a string attribute: keep it
            out.append(text[i:j + 5])
            i = j + 5
            continue
        out.append(text[i:j])
        k, depth, in_str = j + 5, 1, False
        while depth and k < len(text):
            c = text[k]
            if in_str:
                if c == "\\":
                    k += 1
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            k += 1
        i = k


def _compiled_key(*args, **kwargs):
    """(The function C++ files a Compiled's signatures under; never called.)"""
    raise AssertionError("a Compiled is called through its miss handler")


def _compiled_miss(compiled):
    # Through a weak reference: the C++ callable is held by ``compiled``.
    ref = weakref.ref(compiled)

    @api_boundary
    def cache_miss(*args, **kwargs):
        return ref()._cpp_miss(*args, **kwargs)
    return cache_miss


@dataclasses.dataclass(frozen=True)
class _CallParams:
    const_args: list


class Compiled:
    """A jitted function compiled by XLA; calling it checks the arguments match."""

    def __init__(self, wrapped, entry, exe, in_tree=None):
        self._wrapped = wrapped
        self._entry = entry
        self._exe = exe
        self._in_tree = in_tree or entry.in_tree

    in_tree = property(lambda self: self._in_tree)
    args_info = property(lambda self: _args_info(self._entry, self._in_tree),
                         doc="The arguments' types and donation, as ``(args, kwargs)``.")

    @property
    def out_info(self):
        return self._entry.out_info()

    @property
    def _xla_exe(self):
        return self._exe.exe if isinstance(self._exe, spmd.SpmdProgram) else self._exe.program.exe

    def as_text(self) -> str:
        """XLA's optimised HLO."""
        return xla.optimized_hlo_text(self._xla_exe)

    def cost_analysis(self) -> dict:
        """XLA's estimate: flops, transcendentals, bytes accessed, ..."""
        return dict(self._xla_exe.cost_analysis())

    def memory_analysis(self):
        """Argument, output, temporary and aliased sizes of the executable, in bytes."""
        return self._xla_exe.get_compiled_memory_stats()

    def collectives(self) -> list:
        """The collectives in the compiled program (those XLA's partitioner inserted, for an
        SPMD program): kind, shape, dtype, bytes per device, replica groups and the plax
        source line they come from, and the mesh axes they communicate over."""
        from plax.runtime.collectives import collectives_of  # its parsing only when asked
        mesh = None
        if isinstance(self._exe, spmd.SpmdProgram):
            mesh = next((s.mesh for s in (*self._exe.in_shardings, *self._exe.out_shardings)
                         if isinstance(s, NamedSharding)), None)
        return collectives_of(self.as_text(), mesh)

    @property
    def in_avals(self):
        """The arguments' types, as ``(args, kwargs)``."""
        return tree_util.tree_map(lambda info: info._aval, self.args_info)

    @property
    def input_formats(self):
        """Per argument, as ``(args, kwargs)``: its Format (XLA's default row-major layout,
        and the sharding the executable takes it in)."""
        return tree_util.tree_map(lambda a, s: Format(default_layout(len(a.shape)), s),
                                  self.in_avals, self.input_shardings)

    @property
    def output_formats(self):
        """Per result: its Format (row-major layout, the sharding it is made in)."""
        return tree_util.tree_map(lambda a, s: Format(default_layout(len(a.shape)), s),
                                  self.out_info, self.output_shardings)

    @property
    def _executable(self):
        """The executable: its ``in_avals`` are the types of the parameters it takes."""
        return self._exe

    @property
    def _params(self) -> "_CallParams":
        """What a call passes besides the arguments: ``const_args``, the closed-over
        constants the executable takes as parameters (not written into its program)."""
        consts = self._entry.consts
        return _CallParams([consts[i] for i in self._exe.kept if i < len(consts)])

    @property
    def input_shardings(self):
        if isinstance(self._exe, spmd.SpmdProgram):
            n_consts = len(self._entry.consts)
            by_param = dict(zip(self._exe.kept, self._exe.in_shardings))
            mesh = self._exe.in_shardings[0].mesh if self._exe.in_shardings else None
            flat = [by_param.get(n_consts + i) or NamedSharding(mesh, ()) for i in
                    range(self._in_tree.num_leaves)]
            return tree_util.tree_unflatten(self._in_tree, flat)
        s = dispatch.sharding_for(self._exe.program.device)
        return tree_util.tree_unflatten(self._in_tree, [s] * self._in_tree.num_leaves)

    @property
    def output_shardings(self):
        if isinstance(self._exe, spmd.SpmdProgram):
            return tree_util.tree_unflatten(self._entry.out_tree, list(self._exe.out_shardings))
        s = dispatch.sharding_for(self._exe.program.device)
        return tree_util.tree_unflatten(self._entry.out_tree, [s] * self._entry.out_tree.num_leaves)

    def __call__(self, *args, **kwargs):
        # As in JAX, a Compiled takes only the dynamic arguments: static ones are baked in.
        # Calls go through jaxlib's C++ jit cache; the first of a signature (and any call it
        # cannot run alone) reaches ``_call_python``.
        cpp = self.__dict__.get("_cpp")
        if cpp is None:
            cpp = self.__dict__["_cpp"] = cpp_jit.make(
                f"compiled_{self._entry.params['name']}", _compiled_key,
                _compiled_miss(self), (), ())
        return cpp(*args, **kwargs)

    def _cpp_miss(self, *args, **kwargs):
        """The C++ cache's miss handler: the call in Python, and for a plain eager call the
        data that lets C++ run calls like it alone (None: it cannot)."""
        from plax.api.jit import _placed_consts, _plain_eager
        result = self._call_python(*args, **kwargs)
        data = None
        if _plain_eager() and self._entry.cacheable:
            leaves = tree_util.tree_leaves((args, kwargs))
            data = cpp_jit.fastpath_data(self._exe, _placed_consts(self._entry, self._exe),
                                         leaves, result)
        return result, data, False

    def _call_python(self, *args, **kwargs):
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self._in_tree:
            w = self._wrapped
            hint = (" Static arguments are compiled in: pass only the others."
                    if w._static_argnums or w._static_argnames else "")
            raise TypeError(f"Function compiled with input pytree does not match the input pytree "
                            f"it was called with: compiled for {self._in_tree}, called "
                            f"with {in_tree}.{hint}")
        avals = [get_aval(x) for x in leaves]
        for i, (got, want) in enumerate(zip(avals, self._entry.in_avals)):
            if got.shape != want.shape or got.dtype != want.dtype:
                raise TypeError(
                    f"Argument types differ from the types for which this computation was "
                    f"compiled. Leaf {i} ({self._entry.arg_name(i)}) is {got.str_short()} but "
                    f"the computation was compiled for {want.str_short()}.")
        from plax.api.jit import _placed_consts
        full = list(_placed_consts(self._entry, self._exe)) + list(leaves)
        if isinstance(self._exe, spmd.SpmdProgram):
            return tree_util.tree_unflatten(self._entry.out_tree, self._exe.run(full))
        _, committed = dispatch.pick_device(full, f"compiled function {self._entry.params['name']}")
        outs = self._exe.run(full, committed or self._entry.params["device"] is not None)
        return tree_util.tree_unflatten(self._entry.out_tree, outs)
