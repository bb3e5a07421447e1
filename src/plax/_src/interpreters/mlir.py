"""``jax._src.interpreters.mlir``: as ``jax.interpreters.mlir`` (``plax.interpreters.mlir``:
lowering rules written with jaxlib's MLIR bindings, run inside plax's lowering).
``_lowerings`` is plax's table of lowering rules."""
from plax.core.rules import lowering_rules as _lowerings  # noqa: F401
from plax.interpreters import mlir as _public
from plax.interpreters.mlir import (TokenSet, hlo, ir, ir_attribute,  # noqa: F401
                                    lower_fun, make_ir_context, module_to_string,
                                    register_lowering)

from plax._src import _face

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
