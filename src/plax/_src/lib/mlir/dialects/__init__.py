"""``jax._src.lib.mlir.dialects``: jaxlib's dialect bindings: ``hlo`` (StableHLO), ``chlo``,
``func``."""
from plax.lowering.mlir_bindings import chlo, func_dialect as func, hlo  # noqa: F401
