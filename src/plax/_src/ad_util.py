"""``jax._src.ad_util``: the zero type of tangents and ``stop_gradient_p``."""
from plax.core.rules import Zero  # noqa: F401
from plax.first_order.conversion import stop_gradient_p  # noqa: F401
