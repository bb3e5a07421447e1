"""``jax._src.random``: plax's random (``plax.random``) with its typed-key primitives
(``random_clone_p``, ...), and JAX's private modules: ``prng``, ``core``, ``rbg`` and the
counter-based PRNGs ``threefry2x32``, ``threefry4x32``, ``philox2x32`` and ``philox4x32``."""
from plax import random as _public
from plax.first_order.prng import (random_bits_p, random_clone_p, random_fold_in_p,  # noqa: F401
                                   random_seed_p, random_split_p, random_unwrap_p,
                                   random_wrap_p)

from plax._src import _face

_SUBMODULES = (
    "prng", "core", "threefry2x32", "threefry4x32", "philox2x32", "philox4x32", "rbg")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES,
                                    _face.face_getattr(__name__, {}, _public))
