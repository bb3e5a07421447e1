"""``jax._src.lax.utils``: helpers of lax's rules; plax's rules keep theirs private."""
from plax._src import _face

_REFUSED = dict.fromkeys(
    ("int_dtype_for_dim", "int_dtype_for_shape", "standard_primitive", "dtype_rule",
     "shape_rule"),
    "plax's rules pick index dtypes and build primitives in plax.first_order.common; it "
    "offers no helpers under these names")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
