"""``jax._src.pallas.pallas_call``: ``pallas_call`` and its primitive."""
from plax.experimental.pallas.call import pallas_call  # noqa: F401
from plax.higher_order.pallas_call import pallas_call_p  # noqa: F401
