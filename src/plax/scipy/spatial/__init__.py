"""plax.scipy.spatial (JAX's ``jax.scipy.spatial``): ``transform`` (Rotation, Slerp), loaded
when imported (``import plax.scipy.spatial.transform``), as in JAX."""
