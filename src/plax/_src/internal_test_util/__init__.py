"""``jax._src.internal_test_util``: helpers JAX's lax tests share (``lax_test_util``)."""
