"""``jax._src.lax``: plax's lax (``plax.lax``) by JAX's private modules: ``lax``,
``control_flow``, ``linalg``, ``utils``, ``windowed_reductions``."""

from plax._src import _face

_SUBMODULES = (
    "lax", "control_flow", "linalg", "utils", "windowed_reductions")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
