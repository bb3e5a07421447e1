"""Short names for the common pytree utilities (``plax.tree.map`` etc.)."""

import dataclasses as _dataclasses

from plax.tree_util import tree_all as all  # noqa: A001
from plax.tree_util import tree_broadcast as broadcast
from plax.tree_util import tree_flatten as flatten
from plax.tree_util import tree_flatten_with_path as flatten_with_path
from plax.tree_util import tree_leaves as leaves
from plax.tree_util import tree_leaves_with_path as leaves_with_path
from plax.tree_util import tree_map as map  # noqa: A001
from plax.tree_util import tree_map_with_path as map_with_path
from plax.tree_util import tree_reduce as reduce
from plax.tree_util import tree_reduce_associative as reduce_associative
from plax.tree_util import tree_structure as structure
from plax.tree_util import tree_transpose as transpose
from plax.tree_util import tree_unflatten as unflatten


def static(**kwargs):
    """A dataclass field (``dataclasses.field(**kwargs)``) marked static: ``register_dataclass``
    keeps it in the treedef instead of making it a child."""
    metadata = {"static": True, **kwargs.pop("metadata", {})}
    return _dataclasses.field(metadata=metadata, **kwargs)

__all__ = [
    "all", "broadcast", "flatten", "flatten_with_path", "leaves",
    "leaves_with_path", "map", "map_with_path", "reduce",
    "reduce_associative", "static", "structure", "transpose", "unflatten",
]
