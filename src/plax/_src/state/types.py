"""``jax._src.state.types``: the type of a mutable reference (``plax.core.refs``), its effects
and the views it is read through."""
from plax.core.effects import AccumEffect, ReadEffect, RefEffect, WriteEffect  # noqa: F401
from plax.core.refs import (AbstractRef, RefReshaper, shaped_array_ref,  # noqa: F401
                            uninitialized)
from plax.core.refs import ref_type_aval_mappings as _ref_type_aval_mappings  # noqa: F401
from plax.first_order.state import TransformedRef  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {})
