"""plax.custom_batching: functions with their own batching rule (as ``jax.custom_batching``)."""
from plax.higher_order.custom_batching import custom_vmap, sequential_vmap  # noqa: F401

__all__ = ["custom_vmap", "sequential_vmap"]
