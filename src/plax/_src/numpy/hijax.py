"""``jax._src.numpy.hijax``: NumPy functions as hi primitives (``plax.numpy.hijax``)."""
from plax.numpy.hijax import (  # noqa: F401
    Nonzero, SearchSorted, nonzero, searchsorted, searchsorted_via_expand)
