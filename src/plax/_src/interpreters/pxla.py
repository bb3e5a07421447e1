"""``jax._src.interpreters.pxla``: as ``jax.interpreters.pxla``."""
from plax.interpreters.pxla import *  # noqa: F401,F403
