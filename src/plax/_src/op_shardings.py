"""``jax._src.op_shardings``: comparisons of XLA's ``HloSharding`` objects (jaxlib's, as
plax's shardings give them)."""
from plax.sharding.gspmd import num_ways_dim_sharded as get_num_ways_dim_sharded  # noqa: F401
from plax.sharding.single import (are_hlo_shardings_equal,  # noqa: F401
                                  is_hlo_sharding_replicated)
