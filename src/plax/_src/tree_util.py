"""``jax._src.tree_util``: the pytree node registry (type -> its flatten/unflatten), and
flatten_one_level (orbax-checkpoint)."""
from plax.core.tree_core import flatten_one_level  # noqa: F401
from plax.core.tree_core import node_registry as _registry  # noqa: F401
