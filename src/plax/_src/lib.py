"""``jax._src.lib``: the jaxlib this process runs on (its extension's API version)."""
from plax.runtime.xla import JAXLIB_EXTENSION_VERSION as jaxlib_extension_version  # noqa: F401
