"""``plax.lib``: JAX's ``jax.lib`` (a package with no public names in JAX 0.10)."""
