"""Lowering of jaxprs to StableHLO text (``stablehlo``) and shared rule helpers."""
from plax.lowering.stablehlo import (ModuleContext, RuleContext, canonical_platform,  # noqa: F401
                                     lower_jaxpr_body, lower_jaxpr_to_module, platform_of)
from plax.lowering.inline import lower_fun, lower_jaxpr_inline  # noqa: F401
