"""``plax.extend.sharding``: XLA's sharding protos, as ``jax.extend.sharding``.

``xla_client`` is jaxlib's module (``HloSharding``, ``OpSharding``); the functions turn
serialized ``OpSharding`` protos into jaxlib's objects and back. ``GSPMDSharding`` is a
sharding given by a device list and an ``HloSharding``.
"""
from __future__ import annotations

from plax.runtime import xla as _xla
from plax.runtime.xla import xla_client  # noqa: F401
from plax.sharding.gspmd import GSPMDSharding  # noqa: F401

__all__ = ["GSPMDSharding", "get_hlo_sharding_from_serialized_proto",
           "get_op_sharding_from_serialized_proto", "get_serialized_proto_from_hlo_sharding",
           "xla_client"]


def get_op_sharding_from_serialized_proto(sharding: bytes):
    """The ``xla_client.OpSharding`` a serialized OpSharding proto holds."""
    return _xla.op_sharding_from_proto(sharding)


def get_hlo_sharding_from_serialized_proto(sharding: bytes):
    """The ``xla_client.HloSharding`` of a serialized OpSharding proto."""
    return xla_client.HloSharding.from_proto(get_op_sharding_from_serialized_proto(sharding))


def get_serialized_proto_from_hlo_sharding(sharding) -> bytes:
    """``sharding`` (an ``xla_client.HloSharding``) as a serialized OpSharding proto."""
    return sharding.to_proto().SerializeToString()
