"""``jax._src.blocked_sampler``: block-invariant sampling (``plax.random.blocked``)."""
from plax.random.blocked import blocked_fold_in, sample_block  # noqa: F401
