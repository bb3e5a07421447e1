"""``jax._src.indexing``: ``Slice``, a slice with a start known only at run time
(``plax.numpy.indexing.Slice``, made by ``plax.ds``)."""
from plax.numpy.indexing import Slice  # noqa: F401
from plax.ref import ds  # noqa: F401
