"""``jax._src.lax.lax``: plax's lax operations (``plax.lax``) with JAX's private helpers
``_convert_element_type`` (keeping a weak type) and ``remaining``."""
from plax import lax as _public
from plax.core import dtypes as _dtypes
from plax.experimental.sparse.bcoo import remaining  # noqa: F401
from plax.first_order.conversion import convert_with_weak_type as _convert

from plax._src import _face

_REFUSED = {"_delta": "plax makes identity-like masks in plax.numpy (eye) from iota and "
                      "comparisons; it has no lax-level delta helper"}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)


def _convert_element_type(operand, new_dtype=None, weak_type=False, sharding=None,
                          warn_on_complex_to_real_cast=True):
    """``operand`` converted to ``new_dtype`` (its own by default; canonicalized, so float
    is float32 without x64), weakly typed or not."""
    del sharding, warn_on_complex_to_real_cast
    return _convert(operand, _dtypes.dtype(operand) if new_dtype is None
                    else _dtypes.canonicalize_dtype(new_dtype), weak_type)
