"""``jax._src.abstract_arrays``: ``array_types``, the concrete array types
(``plax.extend.core``)."""
from plax.core.avals import ShapedArray  # noqa: F401
from plax.extend.core import array_types  # noqa: F401
