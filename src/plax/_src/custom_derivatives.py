"""``jax._src.custom_derivatives``: custom_jvp/custom_vjp (``plax.custom_derivatives``) and
their call primitives (``plax.higher_order.custom_derivatives``)."""
from plax import custom_derivatives as _public
from plax.higher_order.custom_derivatives import (custom_jvp_call_p,  # noqa: F401
                                                  custom_vjp_call_p)

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)
