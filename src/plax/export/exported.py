"""``Exported``: a jitted function lowered for given argument types, kept as StableHLO
portable bytecode with what calling it needs (pytree structures, types, platforms)."""
from __future__ import annotations

from plax.core.effects import has_ordered_effects

# The calling-convention versions plax writes and reads, numbered as JAX's (the range JAX
# 0.10 reads). plax's @main takes the arguments' leaves (after the platform index, an i32,
# in a module for several platforms) and returns the results' leaves; no token arguments.
MINIMUM_CALLING_CONVENTION = 9
MAXIMUM_CALLING_CONVENTION = 10
CURRENT_CALLING_CONVENTION = 10


class DisabledSafetyCheck:
    """A safety check that ``export`` should skip: ``platform()`` (the module may be called
    on a platform it was not exported for), ``custom_call(target)`` (a custom call target
    not known to be stable), ``shape_assertions()`` (no checks of the symbolic dimensions'
    constraints at call time)."""

    __slots__ = ("_impl",)

    def __init__(self, _impl: str):
        self._impl = _impl

    @classmethod
    def platform(cls) -> "DisabledSafetyCheck":
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> "DisabledSafetyCheck":
        return cls("custom_call:" + target_name)

    @classmethod
    def shape_assertions(cls) -> "DisabledSafetyCheck":
        return cls("shape_assertions")

    def is_custom_call(self) -> str | None:
        """The target name of a ``custom_call`` check, else None."""
        return self._impl[len("custom_call:"):] if self._impl.startswith("custom_call:") \
            else None

    def __eq__(self, other):
        return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

    def __hash__(self):
        return hash(self._impl)

    def __str__(self):
        return self._impl

    __repr__ = __str__


class Exported:
    """A function lowered and kept for later calls (possibly in another process).

    ``in_tree``/``out_tree`` are the pytree structures of ``(args, kwargs)`` and of the
    result, ``in_avals``/``out_avals`` their leaves' types (shapes may hold symbolic
    dimensions), ``mlir_module_serialized`` the module as StableHLO portable bytecode.
    ``call(*args, **kwargs)`` runs it (under jit, vmap and, with a VJP, grad).

    An SPMD module (``nr_devices`` > 1, or shardings given) keeps the layouts of its inputs
    and results as NamedShardings over AbstractMeshes (None: unspecified), and as XLA's
    HloShardings in ``in_shardings_hlo``/``out_shardings_hlo``."""

    def __init__(self, fun_name, in_tree, in_avals, out_tree, out_avals, in_shardings,
                 out_shardings, nr_devices, platforms, ordered_effects, unordered_effects,
                 disabled_safety_checks, mlir_module_serialized, calling_convention_version,
                 module_kept_var_idx, uses_global_constants, _get_vjp=None):
        self.fun_name = fun_name
        self.in_tree = in_tree
        self.in_avals = tuple(in_avals)
        self.out_tree = out_tree
        self.out_avals = tuple(out_avals)
        self._in_named_shardings = tuple(in_shardings)
        self._out_named_shardings = tuple(out_shardings)
        self.in_shardings_hlo = _hlo_shardings(self._in_named_shardings, self.in_avals)
        self.out_shardings_hlo = _hlo_shardings(self._out_named_shardings, self.out_avals)
        self.nr_devices = nr_devices
        self.platforms = tuple(platforms)
        self.ordered_effects = tuple(ordered_effects)
        self.unordered_effects = tuple(unordered_effects)
        self.disabled_safety_checks = tuple(disabled_safety_checks)
        self.mlir_module_serialized = mlir_module_serialized
        self.calling_convention_version = calling_convention_version
        self.module_kept_var_idx = tuple(module_kept_var_idx)
        self.uses_global_constants = uses_global_constants
        self._get_vjp = _get_vjp
        self._text = None

    def __str__(self):
        return f"Exported(fun_name={self.fun_name}, ...)"

    def __repr__(self):
        return (f"Exported(fun_name={self.fun_name!r}, in_tree={self.in_tree}, "
                f"in_avals={self.in_avals}, out_tree={self.out_tree}, "
                f"out_avals={self.out_avals}, platforms={self.platforms}, "
                f"calling_convention_version={self.calling_convention_version})")

    def mlir_module(self) -> str:
        """The module's StableHLO text."""
        if self._text is None:
            from plax.lowering.mlir_bindings import deserialize_portable
            self._text = deserialize_portable(self.mlir_module_serialized)
        return self._text

    def uses_shape_polymorphism(self) -> bool:
        from plax.core.symbolic_shapes import is_symbolic_dim
        return any(is_symbolic_dim(d) for a in self.in_avals for d in a.shape)

    def has_vjp(self) -> bool:
        """Whether ``vjp()`` is available (so the function can be differentiated)."""
        return self._get_vjp is not None

    def vjp(self) -> "Exported":
        """The VJP as an Exported: ``(*primals, *out_cotangents) -> in_cotangents``."""
        if self._get_vjp is None:
            raise ValueError("No VJP is available")
        vjp = self.__dict__.get("_vjp")
        if vjp is None:
            vjp = self.__dict__["_vjp"] = self._get_vjp(self)
        return vjp

    def serialize(self, vjp_order: int = 0) -> bytearray:
        """This Exported as bytes (``plax.export.deserialize`` reads them), with its VJPs up
        to order ``vjp_order``, so the function read back is that many times differentiable."""
        from plax.export.serialization import serialize
        return serialize(self, vjp_order=vjp_order)

    def in_shardings_jax(self, mesh):
        """The inputs' layouts as NamedShardings over ``mesh``, which must have the axes of
        the export's mesh (None where unspecified; over the AbstractMesh for mesh=None)."""
        from plax.export.sharded import on_mesh
        return tuple(on_mesh(s, mesh) for s in self._in_named_shardings)

    def out_shardings_jax(self, mesh):
        """The results' layouts as NamedShardings over ``mesh`` (see ``in_shardings_jax``)."""
        from plax.export.sharded import on_mesh
        return tuple(on_mesh(s, mesh) for s in self._out_named_shardings)

    def call(self, *args, **kwargs):
        """Run the exported module on ``args``/``kwargs`` (the structure and types it was
        exported for; symbolic dimensions take the arguments' sizes)."""
        from plax.export.calling import call_exported
        return call_exported(self, args, kwargs)


def _hlo_shardings(shardings, avals) -> tuple:
    from plax.core.avals import physical_aval
    return tuple(None if s is None else s._to_xla_hlo_sharding(physical_aval(a).ndim)
                 for s, a in zip(shardings, avals))


def check_no_ordered_effects(jaxpr, fun_name: str) -> None:
    if has_ordered_effects(jaxpr):
        raise NotImplementedError(
            f"Cannot export {fun_name}: it has ordered effects (io_callback, debug.print with "
            "ordered=True), which plax's exported modules do not carry.")

