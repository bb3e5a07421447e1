"""plax.experimental: as ``jax.experimental`` (mesh_utils, shard_map, multihost_utils)."""
