"""``jax._src.op_shardings``: comparisons of XLA's ``HloSharding`` objects (jaxlib's, as
plax's shardings give them)."""


def is_hlo_sharding_replicated(hlo_sharding) -> bool:
    """Whether every device holds the whole array (one device counts as replicated)."""
    return hlo_sharding.num_devices() == 1 or hlo_sharding.is_replicated()


def are_hlo_shardings_equal(a, b) -> bool:
    """Whether two HloShardings lay an array out alike (any two replicated ones do)."""
    if a is b:
        return True
    if is_hlo_sharding_replicated(a) and is_hlo_sharding_replicated(b):
        return True
    return a == b
