"""``jax._src.interpreters``: ``ad``, ``batching``, ``mlir``, ``partial_eval``, ``pxla``: each
plax's ``plax.interpreters`` module of the same name under its private path."""

from plax._src import _face

_SUBMODULES = (
    "ad", "batching", "mlir", "partial_eval", "pxla")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES)
