"""``jax._src.interpreters.partial_eval``: as ``jax.interpreters.partial_eval``
(``plax.interpreters.partial_eval``: tracing to jaxprs, known/unknown splits, DCE)."""
from plax.interpreters import partial_eval as _public
from plax.interpreters.partial_eval import (PartialVal, dce_jaxpr,  # noqa: F401
                                            trace_to_jaxpr_dynamic, trace_to_jaxpr_nounits)

from plax._src import _face

_REFUSED = {"partial_eval_jaxpr_custom": "plax splits a jaxpr into known and unknown parts "
                                         "with partial_eval_jaxpr (plax.transforms.linearize); "
                                         "it has no per-equation custom rules or policies"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)
