"""``jax._src.hijax``: hi types and hi primitives (``plax.core.hi_types``,
``plax.experimental.hijax``), ``VJPHiPrimitive`` (``plax.api.hi_primitive``), boxes and logs
(``plax.higher_order.boxes``)."""
from plax.api.hi_primitive import (  # noqa: F401
    GradAccum, NullAccum, VJPHiPrimitive, VmapOf, call_hi_primitive_p)
from plax.core import hi_types as _hi_types
from plax.core.avals import AbstractValue as Ty, ShapedArray  # noqa: F401
from plax.core.hi_types import (  # noqa: F401
    HiPspec, HiType, MappingSpec, MutableHiType, QuasiDynamicData as QDD, aval_method,
    register_hitype)
from plax.custom_derivatives import custom_vjp as custom_vjp3  # noqa: F401 (one custom_vjp)
from plax.experimental import hijax as _public
from plax.experimental.hijax import HiPrimitive  # noqa: F401
from plax.higher_order.boxes import (  # noqa: F401
    Box, BoxTy, BoxTypeState, Log, LogTy, box_effect, box_get, box_set, log_append,
    log_effect, log_extend, log_read, new_box, new_log)

from plax._src import _face

LoType = Ty
hijax_method = aval_method

_REFUSED = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public, _hi_types)
