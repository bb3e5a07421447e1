"""``jax._src.tpu.linalg.qdwh``: the polar decomposition by QDWH (``plax.lax.linalg.qdwh``)."""
from plax.lax.linalg.qdwh import qdwh  # noqa: F401
