"""``jax._src.random.philox2x32``: JAX's philox2x32 PRNG, which plax does not implement
(its PRNGs are threefry2x32, rbg and unsafe_rbg; ``jax_default_prng_impl`` refuses the
others)."""
from plax._src import _face

_REFUSED = dict.fromkeys(("philox2x32_p", "philox2x32", "philox2x32_prng_impl"),
                         "plax implements the threefry2x32, rbg and unsafe_rbg PRNGs only")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
