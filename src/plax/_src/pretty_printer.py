"""``jax._src.pretty_printer``: JAX's document pretty-printer. plax prints jaxprs with its own
printer (``plax.core.jaxpr``), which builds no documents."""
from plax._src import _face

_REFUSED = dict.fromkeys(
    ("Doc", "Color", "Intensity", "OutputFormat", "brk", "color", "concat", "group", "join",
     "keyword", "nest", "nil", "source_map", "text", "type_annotation"),
    "plax prints jaxprs with its own printer (plax.core.jaxpr), without documents")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
