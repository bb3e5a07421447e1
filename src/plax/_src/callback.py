"""``jax._src.callback``: host callbacks (``plax.api.callbacks``), and
``emit_python_callback`` for lowering rules (``plax.interpreters.mlir``)."""
from plax.api import callbacks as _callbacks
from plax.interpreters.mlir import emit_python_callback  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _callbacks)
