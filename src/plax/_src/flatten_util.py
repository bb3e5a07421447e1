"""``jax._src.flatten_util``: ``ravel_pytree``."""
from plax.flatten_util import ravel_pytree  # noqa: F401
