"""plax.experimental: as ``jax.experimental`` (mesh_utils, shard_map, multihost_utils,
checkify, io_callback)."""
from plax.api.callbacks import io_callback  # noqa: F401
