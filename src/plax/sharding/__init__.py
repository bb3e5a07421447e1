"""plax.sharding: how arrays are laid out over devices (as ``jax.sharding``).

One file per concept: ``single.py`` (the Sharding protocol, SingleDeviceSharding),
``partition_spec.py`` (PartitionSpec), ``mesh.py`` (Mesh, AbstractMesh, AxisType, the
context mesh) and ``named.py`` (NamedSharding and the layout it describes).
"""
from plax.sharding.single import Sharding, SingleDeviceSharding
from plax.sharding.partition_spec import PartitionSpec
from plax.sharding.mesh import (AbstractMesh, AxisType, Mesh, get_abstract_mesh, get_mesh,
                                set_mesh, use_abstract_mesh, use_mesh)
from plax.sharding.named import NamedSharding

__all__ = ["Sharding", "SingleDeviceSharding", "PartitionSpec", "Mesh", "AbstractMesh",
           "AxisType", "NamedSharding", "get_abstract_mesh", "get_mesh", "set_mesh",
           "use_mesh", "use_abstract_mesh"]
