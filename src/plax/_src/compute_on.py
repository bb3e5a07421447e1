"""``jax._src.compute_on``: ``compute_on`` and ``compute_on2`` (``plax.experimental.
compute_on``: XLA's compute-type and stream attributes on the ops staged inside)."""
from plax.experimental.compute_on import compute_on, compute_on2  # noqa: F401
