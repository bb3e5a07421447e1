"""Jitted computations: from a ``pjit`` equation's parameters to an executable, and a run.

The one road from a jit to an executable: ``executable_for(call, args)`` decides where a
jitted jaxpr runs on these arguments (one device, or SPMD over a mesh when shardings,
sharded arguments or sharding constraints inside ask for it) and returns its executable,
compiled once and cached with the jaxpr. pjit's eager rule (``call_jitted``),
``JitWrapped``'s eager calls and the AOT stages all take it; a ``JitCall`` carries the
parameters.
"""
from __future__ import annotations

from plax.core.caches import WeakKeyCache
from plax.core.config import config
from plax.core.effects import has_ordered_effects
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, open_jaxpr, subjaxprs
from plax.lowering.stablehlo import lower_jaxpr_to_module
from plax.runtime import dispatch, pipeline_steps, spmd, xla
from plax.runtime.dispatch import CompiledProgram, to_buffer


class JitCall:
    """What running a jitted jaxpr takes: a ``pjit`` equation's parameters but ``inline``.
    Immutable (``replace`` makes a changed copy), compared by identity. (A plain class: as a
    frozen dataclass it cost half a millisecond of ``import plax``.)"""

    __slots__ = ("jaxpr", "name", "donated_invars", "keep_unused", "device",
                 "compiler_options", "in_shardings", "out_shardings", "embedded")
    jaxpr: ClosedJaxpr
    name: str
    donated_invars: tuple
    keep_unused: bool
    device: object                  # pinned by jit(device=...), else None
    compiler_options: tuple | None
    in_shardings: tuple             # () or one per operand (None: unconstrained)
    out_shardings: tuple
    # The values of the leading operands that are a jitted function's closed-over constants:
    # a one-device program has them as constants in its text (as JAX's does), not parameters.
    embedded: tuple

    def __init__(self, jaxpr, name, donated_invars, keep_unused, device=None,
                 compiler_options=None, in_shardings=(), out_shardings=(), embedded=()):
        init = object.__setattr__
        init(self, "jaxpr", jaxpr)
        init(self, "name", name)
        init(self, "donated_invars", donated_invars)
        init(self, "keep_unused", keep_unused)
        init(self, "device", device)
        init(self, "compiler_options", compiler_options)
        init(self, "in_shardings", in_shardings)
        init(self, "out_shardings", out_shardings)
        init(self, "embedded", embedded)

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}: a JitCall is immutable")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r}: a JitCall is immutable")

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"JitCall({fields})"

    def replace(self, **changes) -> "JitCall":
        """A copy with the fields in ``changes`` replaced."""
        return JitCall(**{k: changes.pop(k, getattr(self, k)) for k in self.__slots__},
                       **changes)  # (an unknown field: __init__'s TypeError names it)

    @classmethod
    def of(cls, params: dict) -> "JitCall":
        return cls(params["jaxpr"], params["name"], params["donated_invars"],
                   params["keep_unused"], params["device"], params["compiler_options"],
                   params.get("in_shardings", ()), params.get("out_shardings", ()))


def placement(call: JitCall, args):
    """The devices and mesh ``call`` runs over on ``args`` when that is SPMD, else None."""
    return spmd.where_to_run(call.jaxpr, args, call.in_shardings, call.out_shardings,
                             call.name)


def executable_for(call: JitCall, args):
    """The executable running ``call`` on ``args`` (compiled on first use; an SPMD program
    over a mesh, or one device's) and whether its outputs are committed."""
    where = placement(call, args)
    if where is not None:
        return spmd.program_for(call, args, where), True
    if call.device is not None:
        # As in JAX, a pinned computation copies arguments committed elsewhere to its device.
        device, committed = call.device, True
    else:
        device, committed = dispatch.pick_device(args, f"jitted function {call.name}")
    key = (device, call.donated_invars, call.keep_unused, call.compiler_options,
           bool(call.embedded))
    exe = _executables.get(call.jaxpr, key)
    if exe is None:
        why = ""
        if config.read("log_compiles"):
            seen = [k[0] for k in _executables.variants(call.jaxpr)]
            if seen:
                why = f" because it was compiled for {seen[-1]} before and now runs on {device}"
        exe = _executables.put(call.jaxpr, key, compile_jitted(call, device, why))
    return exe, committed


_executables = WeakKeyCache("jit executables")  # per jaxpr: (device, donation, ...) -> exe


def call_jitted(call: JitCall, args) -> list:
    """Run a jitted jaxpr on concrete arguments (pjit's eager rule)."""
    exe, committed = executable_for(call, args)
    outs = exe.run(args, committed)
    _check_debug_flags(call, args, outs)
    return outs


class JitExecutable:
    """A compiled jitted computation on one device: which arguments it keeps, how to run it."""

    __slots__ = ("program", "kept", "donated", "name")

    def __init__(self, program: CompiledProgram, kept: tuple, donated: tuple, name: str):
        self.program = program
        self.kept = kept          # indices of the arguments the executable takes
        self.donated = donated    # per kept argument: is its buffer donated?
        self.name = name

    @property
    def in_avals(self) -> tuple:
        """The types of the parameters the executable takes (the kept arguments)."""
        return tuple(self.program.in_avals)

    def run(self, args, committed: bool) -> list:
        device = self.program.device
        bufs = [to_buffer(args[i], aval, device) for i, aval in zip(self.kept, self.program.in_avals)]
        return self.program.run(bufs, committed)



LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"  # (plax.monitoring)


def lower_jitted(call: JitCall, platform: str | None = None):
    """StableHLO text of a jitted computation on one device, the jaxpr lowered, the indices
    of the arguments it keeps and their donations; for ``platform`` (None: the default
    device's)."""
    jaxpr, kept = dispatch.live_part(call.jaxpr.jaxpr, call.keep_unused)
    n = len(call.embedded)
    consts = [call.embedded[i] for i in kept if i < n]
    if n:  # the embedded operands it uses become constvars, with their values in the text
        jaxpr = Jaxpr(jaxpr.invars[:len(consts)], jaxpr.invars[len(consts):], jaxpr.outvars,
                      jaxpr.eqns)
        kept = tuple(i for i in kept if i >= n)
    donated = dispatch.usable_donations(jaxpr, [bool(call.donated_invars[i]) for i in kept],
                                        call.name)
    # Naming the output each donated input becomes lets XLA reuse its buffer for that very
    # output; a bare donor mark leaves the pairing to XLA, which may not reuse it. (An
    # ordered-effect token comes first among @main's results.)
    first = int(has_ordered_effects(jaxpr))
    attrs = ["" if a is None else f"tf.aliasing_output = {a + first} : i32"
             for a in dispatch.donation_aliases(jaxpr, donated)]
    with pipeline_steps.step("lower", f"jit({call.name})", LOWER_EVENT):
        text = lower_jaxpr_to_module(jaxpr, module_name=f"jit_{call.name}", arg_attrs=attrs,
                                     platform=platform or dispatch.default_device().platform,
                                     consts=consts)
    return text, jaxpr, kept, donated


def compiler_options_key(options) -> tuple | None:
    """XLA compiler options (a dict of flag name -> value) as a hashable, sorted tuple."""
    if not options:
        return None
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise TypeError(f"compiler_options must be a dict from XLA option names to values, got "
                        f"{options!r}.")
    return tuple(sorted(options.items()))


def compile_jitted(call: JitCall, device, why: str = "") -> JitExecutable:
    text, jaxpr, kept, donated = lower_jitted(call, device.platform)
    return compile_lowered(text, jaxpr, kept, donated, device, call.name, why,
                           call.compiler_options)


def compile_lowered(text, jaxpr, kept, donated, device, name, why: str = "",
                    options=None) -> JitExecutable:
    """Compile lowered text; ``options`` are XLA compiler options as (name, value) pairs."""
    if config.read("log_compiles"):
        import logging
        logging.getLogger("plax").warning("Compiling %s for %s with arguments (%s)%s", name, device,
                                          ", ".join(v.aval.str_short() for v in jaxpr.invars), why)
    exe = xla.compile(text, [device], options=options, fun_name=f"jit({name})")
    program = CompiledProgram(exe, [v.aval for v in jaxpr.invars],
                              [v.aval for v in jaxpr.outvars], device, text)
    _report_inspections(jaxpr, dispatch.sharding_for(device))
    return JitExecutable(program, kept, donated, name)


def _report_inspections(jaxpr: Jaxpr, sharding) -> None:
    """inspect_array_sharding's callbacks in a single-device program: everything is on
    ``sharding``'s device (called at compile time, as JAX does)."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "inspect_sharding":
            eqn.params["callback"](sharding)
        for sub in subjaxprs(eqn.params):
            _report_inspections(open_jaxpr(sub), sharding)


def _check_debug_flags(call: JitCall, args, outs) -> None:
    """With jax_debug_nans/infs, re-run op by op to name the primitive that made a NaN/inf."""
    nans, infs = config.read("debug_nans"), config.read("debug_infs")
    if not (nans or infs):
        return
    if not any(dispatch.has_bad_values(o, nans, infs) for o in outs):
        return
    from plax.core.jaxpr import eval_jaxpr
    eval_jaxpr(call.jaxpr.jaxpr, call.jaxpr.consts, *args)  # raises at the offending primitive
    raise FloatingPointError(f"invalid value encountered in the output of jitted function "
                             f"{call.name}, but not when it ran op by op (XLA's fused arithmetic "
                             "may differ).")
