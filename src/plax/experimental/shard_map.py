"""plax.experimental.shard_map: the older spelling, ``shard_map(f, mesh, in_specs, out_specs,
check_rep=True, auto=frozenset())`` (``check_rep`` is ``check_vma``; ``auto`` names the axes
left to the partitioner)."""
from plax.api.shard_map import shard_mapped

__all__ = ["shard_map"]


def shard_map(f, mesh, in_specs, out_specs, check_rep: bool = True, auto=frozenset()):
    """``f`` on every device's block of its arguments (see ``plax.shard_map``)."""
    manual = frozenset(n for n in mesh.axis_names if n not in frozenset(auto))
    return shard_mapped(f, mesh, in_specs, out_specs, check_rep, manual if auto else frozenset())
