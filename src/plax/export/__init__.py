"""plax.export (as ``jax.export``): functions lowered to StableHLO and kept for later calls.

``export(jit(f))(*args)`` gives an ``Exported`` (its types, pytree structures and module);
``Exported.serialize()`` writes it as bytes in plax's container format (docs/export-format.md)
around StableHLO portable bytecode, and ``deserialize`` reads it back; ``Exported.call`` runs
it under jit, vmap and grad. ``symbolic_shape``/``symbolic_args_specs`` make shape-polymorphic
exports: dimension variables in the argument shapes, one module for every size.
"""
from plax.core.symbolic_shapes import SymbolicScope, is_symbolic_dim
from plax.export.exported import (DisabledSafetyCheck, Exported,
                                  MAXIMUM_CALLING_CONVENTION as
                                  maximum_supported_calling_convention_version,
                                  MINIMUM_CALLING_CONVENTION as
                                  minimum_supported_calling_convention_version)
from plax.export.exporting import default_export_platform, export
from plax.export import polymorphic  # noqa: F401  (the lowering of symbolic shapes)
from plax.export.serialization import (deserialize, register_namedtuple_serialization,
                                       register_pytree_node_serialization)
from plax.export.shape_specs import symbolic_args_specs, symbolic_shape
from plax.numpy import error_checks as _error_checks

# (the errors error_checks.wrap_for_export returns travel in exported functions' results)
_error_checks.register_export_serialization(register_pytree_node_serialization)

__all__ = ["DisabledSafetyCheck", "Exported", "SymbolicScope", "default_export_platform",
           "deserialize", "export", "is_symbolic_dim",
           "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_shape"]
