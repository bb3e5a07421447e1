"""plax.scipy.sparse: as ``jax.scipy.sparse``, the iterative solvers of its ``linalg``."""
from plax.scipy.sparse import linalg  # noqa: F401
