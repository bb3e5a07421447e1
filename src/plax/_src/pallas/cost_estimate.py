"""``jax._src.pallas.cost_estimate``: ``estimate_cost`` and the jaxpr cost model
(``plax.experimental.pallas.cost_estimate``)."""
from plax.experimental.pallas.cost_estimate import (cost_estimate_jaxpr,  # noqa: F401
                                                    estimate_cost)
