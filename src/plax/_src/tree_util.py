"""``jax._src.tree_util``: the pytree node registry (type -> its flatten/unflatten)."""
from plax.core.tree_core import node_registry as _registry  # noqa: F401
