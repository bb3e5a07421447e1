"""The Sharding interface and SingleDeviceSharding (an array wholly on one device)."""
from __future__ import annotations

import abc

from plax.runtime import xla


class Sharding(abc.ABC):
    """The layout of an array over devices.

    Subclasses provide ``device_set``, ``_device_assignment`` (ordered devices),
    ``devices_indices_map`` and ``shard_shape``.
    """

    @property
    def addressable_devices(self) -> set:
        pid = xla.process_index()
        return {d for d in self.device_set if d.process_index == pid}

    @property
    def is_fully_addressable(self) -> bool:
        return len(self.addressable_devices) == len(self.device_set)

    @property
    def _addressable_device_assignment(self) -> tuple:
        """This process's devices of the sharding, in its device order."""
        pid = xla.process_index()
        return tuple(d for d in self._device_assignment if d.process_index == pid)

    @property
    def num_devices(self) -> int:
        return len(self.device_set)

    def addressable_devices_indices_map(self, global_shape):
        addressable = self.addressable_devices
        return {d: i for d, i in self.devices_indices_map(global_shape).items() if d in addressable}

    def check_shape(self, global_shape, what: str = "") -> None:
        """Raise if this sharding cannot lay out an array of ``global_shape`` (a single
        device holds any shape)."""

    def is_equivalent_to(self, other, ndim: int) -> bool:
        """Whether ``other`` lays out ``ndim``-dimensional arrays exactly as this does."""
        return (isinstance(other, Sharding)
                and tuple(self._device_assignment) == tuple(other._device_assignment)
                and are_hlo_shardings_equal(self._to_xla_hlo_sharding(ndim),
                                            other._to_xla_hlo_sharding(ndim)))

    def replica_ids(self, global_shape) -> dict:
        """Which copy of its block each device holds (0 for the first)."""
        return {d: 0 for d in self.device_set}


def is_hlo_sharding_replicated(hlo) -> bool:
    """Whether every device holds the whole array (one device counts as replicated)."""
    return hlo.num_devices() == 1 or hlo.is_replicated()


def are_hlo_shardings_equal(a, b) -> bool:
    """Whether two HloShardings lay an array out alike (any two replicated ones do)."""
    if a is b:
        return True
    if is_hlo_sharding_replicated(a) and is_hlo_sharding_replicated(b):
        return True
    return a == b


_instances: dict = {}  # (class, device, memory kind) -> the SingleDeviceSharding


class SingleDeviceSharding(xla.SingleDeviceShardingBase):
    """All of the array on one device.

    jaxlib's C++ base class cannot take a second base, so the shared Sharding
    methods are borrowed and the class is registered as a Sharding.

    There is one instance per (device, memory kind): equality and hashing are then the
    C++ base class's identity ones, which jit's C++ dispatch checks without calling Python.
    """

    addressable_devices = Sharding.addressable_devices
    is_fully_addressable = Sharding.is_fully_addressable
    _addressable_device_assignment = Sharding._addressable_device_assignment
    num_devices = Sharding.num_devices
    addressable_devices_indices_map = Sharding.addressable_devices_indices_map
    is_equivalent_to = Sharding.is_equivalent_to
    check_shape = Sharding.check_shape
    replica_ids = Sharding.replica_ids

    def __new__(cls, device, *, memory_kind=None):
        key = (cls, device, None if memory_kind == "device" else memory_kind)
        self = _instances.get(key)
        if self is None:
            self = xla.SingleDeviceShardingBase.__new__(cls)
            xla.SingleDeviceShardingBase.__init__(self, device)
            self._the_device = device
            self._kind = key[2]
            self = _instances.setdefault(key, self)
        return self

    def __init__(self, device, *, memory_kind=None):
        pass  # (made in __new__)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (_rebuild_single, (self._the_device, self._kind))

    @property
    def memory_kind(self):
        return self._kind if self._kind is not None else "device"

    def _to_xla_hlo_sharding(self, num_dimensions: int):
        return xla.hlo_sharding_replicated()

    @property
    def device_set(self) -> set:
        return {self._the_device}

    @property
    def device_for_dispatch(self):
        """The one device (read on the jit fast path without building a set)."""
        return self._the_device

    @property
    def _device_assignment(self) -> tuple:
        return (self._the_device,)

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def devices_indices_map(self, global_shape):
        return {self._the_device: tuple(slice(None) for _ in global_shape)}

    def shard_shape(self, global_shape) -> tuple:
        return tuple(global_shape)

    def with_memory_kind(self, kind):
        return SingleDeviceSharding(self._the_device, memory_kind=kind)

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._the_device!r}, memory_kind={self.memory_kind})"


Sharding.register(SingleDeviceSharding)


def _rebuild_single(device, memory_kind):
    return SingleDeviceSharding(device, memory_kind=memory_kind)


def make_single_device_sharding(device, *, memory_kind=None) -> SingleDeviceSharding:
    """The sharding that puts a whole array on ``device`` (JAX's
    ``jax.sharding.make_single_device_sharding``)."""
    return SingleDeviceSharding(device, memory_kind=memory_kind)
