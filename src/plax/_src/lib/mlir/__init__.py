"""``jax._src.lib.mlir``: jaxlib's MLIR bindings (``ir``), those plax's lowering runs rules
written with (``plax.lowering.mlir_bindings``)."""
from plax.lowering.mlir_bindings import ir  # noqa: F401

from plax._src import _face

_SUBMODULES = (
    "dialects")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
