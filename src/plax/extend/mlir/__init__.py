"""``plax.extend.mlir``: jaxlib's functions on MLIR modules, as ``jax.extend.mlir``
re-exports them, and (``plax.extend.mlir.ir``) jaxlib's MLIR IR bindings.

``serialize_portable_artifact(module, target)`` writes a StableHLO module as a portable
artifact (versioned bytecode) for StableHLO version ``target``;
``deserialize_portable_artifact(data, context=None)`` reads one back;
``refine_polymorphic_shapes(bytecode, ...)`` makes a shape-polymorphic module's shapes
static; ``hlo_to_stablehlo(hlo_proto)`` converts a serialized HloModuleProto. These are
jaxlib's own functions (plax reaches jaxlib through ``plax.lowering.mlir_bindings``).
``lower_with_sharding_in_types(ctx, op, aval)`` is for lowering rules written with those
bindings.
"""
from __future__ import annotations

import sys as _sys

from plax.lowering import mlir_bindings as _bindings

_functions = _bindings.jaxlib_module_functions()
deserialize_portable_artifact = _functions.deserialize_portable_artifact
hlo_to_stablehlo = _functions.hlo_to_stablehlo
refine_polymorphic_shapes = _functions.refine_polymorphic_shapes
serialize_portable_artifact = _functions.serialize_portable_artifact
lower_with_sharding_in_types = _bindings.lower_with_sharding_in_types

# ``plax.extend.mlir.ir`` is jaxlib's ``ir`` module itself (as JAX's is).
ir = _bindings.ir
_sys.modules[__name__ + ".ir"] = ir

__all__ = ["deserialize_portable_artifact", "hlo_to_stablehlo", "lower_with_sharding_in_types",
           "refine_polymorphic_shapes", "serialize_portable_artifact"]
