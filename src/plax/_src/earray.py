"""``jax._src.earray``: arrays of extended dtypes (``EArray(aval, data)``)."""
from plax.runtime.array import EArray  # noqa: F401
