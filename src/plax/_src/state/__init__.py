"""``jax._src.state``: the types of mutable array references."""
