"""``jax._src.state.types``: the abstract type of a mutable array reference (``plax.ref``)."""
from plax.ref import AbstractRef  # noqa: F401
