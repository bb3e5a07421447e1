"""plax.experimental: as ``jax.experimental`` (mesh_utils so far)."""
