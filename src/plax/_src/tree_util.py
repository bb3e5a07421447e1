"""``jax._src.tree_util``: pytrees (``plax.tree_util``), the node registry (type -> its
flatten/unflatten: ``_registry``) and ``flatten_one_level`` (``plax.core.tree_core``)."""
from plax import tree_util as _public
from plax.core.tree_core import flatten_one_level  # noqa: F401
from plax.core.tree_core import node_registry as _registry  # noqa: F401

from plax._src import _face

_REFUSED = dict.fromkeys(("prefix_errors", "equality_errors"),
                         "plax reports a tree mismatch in the error of the function that "
                         "met it (plax.tree_util.broadcast_prefix), not as a list of errors")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
