"""``jax._src.state``: mutable references in jaxprs. Their types and views are
``plax.core.refs``, the state primitives ``plax.first_order.state``, discharge
``plax.transforms.discharge`` and run_state ``plax.higher_order.run_state`` (see ``types``,
``primitives``, ``discharge``, ``indexing``)."""
from plax.core.effects import AccumEffect, ReadEffect, RefEffect, WriteEffect  # noqa: F401
from plax.core.refs import AbstractRef, shaped_array_ref  # noqa: F401
from plax.first_order.state import TransformedRef  # noqa: F401

from plax._src import _face

_SUBMODULES = ("types", "primitives", "discharge", "indexing", "utils")
__getattr__ = _face.package_getattr(__name__, _SUBMODULES, _face.face_getattr(__name__, {}))
