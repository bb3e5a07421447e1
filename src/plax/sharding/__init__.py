"""plax.sharding: how arrays are laid out over devices (as ``jax.sharding``).

One file per concept: ``single.py`` (the Sharding protocol, SingleDeviceSharding),
``partition_spec.py`` (PartitionSpec), ``mesh.py`` (Mesh, AbstractMesh, AxisType, the
context mesh) and ``named.py`` (NamedSharding and the layout it describes).
"""
from plax.sharding.single import Sharding, SingleDeviceSharding, make_single_device_sharding
from plax.sharding.partition_spec import Infer, PartitionSpec
from plax.sharding.mesh import (AbstractDevice, AbstractMesh, AxisType, Mesh, get_abstract_mesh,
                                get_mesh, set_mesh, use_abstract_mesh, use_mesh)
from plax.sharding.named import NamedSharding
from plax.core.avals import ManualAxisType

__all__ = ["Sharding", "SingleDeviceSharding", "PartitionSpec", "Mesh", "AbstractMesh",
           "AxisType", "NamedSharding", "get_abstract_mesh", "get_mesh", "set_mesh",
           "use_mesh", "use_abstract_mesh", "reshard", "auto_axes", "explicit_axes", "Infer",
           "ManualAxisType", "AbstractDevice", "make_single_device_sharding"]

# The functions that change shardings in types are primitives' front ends, in plax.lax (which
# builds on this package): reached when first used.
_FROM_LAX = ("reshard", "auto_axes", "explicit_axes")


def __getattr__(name):
    if name in _FROM_LAX:
        from plax.first_order import sharding_constraint
        return getattr(sharding_constraint, name)
    raise AttributeError(f"module 'plax.sharding' has no attribute {name!r}")
