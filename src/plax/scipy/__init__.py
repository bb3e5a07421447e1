"""plax.scipy: SciPy functions on plax arrays."""
from plax.scipy import special  # noqa: F401
