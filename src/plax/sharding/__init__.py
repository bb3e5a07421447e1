"""Shardings: how an array's data is laid out over devices."""
from plax.sharding.single import Sharding, SingleDeviceSharding

__all__ = ["Sharding", "SingleDeviceSharding"]
