"""``plax.lib``: JAX's ``jax.lib``: only ``__version__``, the version string of the jaxlib
plax runs on (as JAX 0.10's)."""
from plax.version import jaxlib_version as __version__  # noqa: F401
