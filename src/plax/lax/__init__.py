"""plax.lax: the primitive operations, one module per family."""
from plax.lax.elementwise import *  # noqa: F401,F403
from plax.lax.elementwise import RoundingMethod  # noqa: F401
