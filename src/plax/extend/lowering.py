"""``plax.extend.lowering``: what lowering rules written with jaxlib's MLIR bindings use, as
``jax.extend.lowering``: ``LoweringRuleContext`` (the ``ctx`` such a rule gets),
``JaxIrContext`` (an MLIR context with JAX's dialects) and ``upstream_dialects`` (their
registry)."""
from plax.lowering.mlir_bindings import (JaxIrContext, LoweringRuleContext,  # noqa: F401
                                         upstream_dialects)

__all__ = ["JaxIrContext", "LoweringRuleContext", "upstream_dialects"]
