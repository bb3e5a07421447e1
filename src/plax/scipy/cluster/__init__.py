"""plax.scipy.cluster (JAX's ``jax.scipy.cluster``): vector quantisation in ``vq``."""
from plax.scipy.cluster import vq  # noqa: F401
