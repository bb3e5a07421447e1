"""``jax._src.numpy.hijax``: JAX's NumPy functions written as hi primitives; plax has none
(its ``plax.numpy`` functions are written on lax)."""
from plax._src import _face

_REFUSED = dict.fromkeys(("nonzero", "searchsorted"),
                         "plax's jnp.nonzero and jnp.searchsorted are written on lax "
                         "(plax.numpy); plax has no hi-primitive versions")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
