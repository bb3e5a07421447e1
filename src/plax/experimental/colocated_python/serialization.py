"""How colocated Python sends functions and specs to the host that runs them: pickled
(with cloudpickle when installed, for lambdas and closures), with devices, device lists,
meshes and shardings written as CPU device ids and looked up again on arrival."""
from __future__ import annotations

import collections.abc
import copyreg
import io
import pickle

import numpy as np

from plax.api.devices import devices as _all_devices
from plax.runtime.xla import Device, DeviceList
from plax.sharding import Mesh, NamedSharding, SingleDeviceSharding

try:
    import cloudpickle as _pickler_module
except ImportError:  # plain pickle: functions must then be importable by name
    _pickler_module = pickle


def _get_cpu_device_map() -> dict:
    """CPU device id -> this process's view of that device."""
    return {d.id: d for d in _all_devices("cpu")}


def _lookup_cpu_device(device_map: dict, device_id: int):
    try:
        return device_map[device_id]
    except KeyError:
        raise ValueError(f"colocated Python: no CPU device with id {device_id} here (known: "
                         f"{sorted(device_map)}).") from None


def _reduce_mesh(mesh: Mesh):
    ids = np.vectorize(lambda d: d.id, otypes=[int])(mesh.devices)
    return _unreduce_mesh, (ids, mesh.axis_names, mesh.axis_types)


def _unreduce_mesh(ids, axis_names, axis_types) -> Mesh:
    device_map = _get_cpu_device_map()
    devs = np.vectorize(lambda i: _lookup_cpu_device(device_map, i), otypes=[object])(ids)
    return Mesh(devs, axis_names, axis_types=axis_types)


def _reduce_named_sharding(sharding: NamedSharding):
    return _unreduce_named_sharding, (_reduce_mesh(sharding.mesh)[1], sharding.spec,
                                      sharding.memory_kind)


def _unreduce_named_sharding(reduced_mesh, spec, memory_kind) -> NamedSharding:
    return NamedSharding(_unreduce_mesh(*reduced_mesh), spec, memory_kind=memory_kind)


def _reduce_single_device_sharding(sharding: SingleDeviceSharding):
    return _unreduce_single_device_sharding, (sharding._device_assignment[0].id,
                                              sharding.memory_kind)


def _unreduce_single_device_sharding(device_id: int, memory_kind) -> SingleDeviceSharding:
    return SingleDeviceSharding(_lookup_cpu_device(_get_cpu_device_map(), device_id),
                                memory_kind=memory_kind)


def _reduce_device_list(device_list):
    return _unreduce_device_list, (tuple(d.id for d in device_list),)


def _unreduce_device_list(device_ids) -> DeviceList:
    device_map = _get_cpu_device_map()
    return DeviceList(tuple(_lookup_cpu_device(device_map, i) for i in device_ids))


def _reduce_device(device):
    return _unreduce_device, (device.id,)


def _unreduce_device(device_id: int):
    return _lookup_cpu_device(_get_cpu_device_map(), device_id)


def _serialize(obj) -> bytes:
    """``obj`` as bytes, its devices and shardings by CPU device id."""
    reducers = {Mesh: _reduce_mesh, NamedSharding: _reduce_named_sharding,
                SingleDeviceSharding: _reduce_single_device_sharding,
                DeviceList: _reduce_device_list}
    for device_type in {type(d) for d in _all_devices()} | {Device}:
        reducers[device_type] = _reduce_device
    base = getattr(_pickler_module.Pickler, "dispatch_table", None)
    if not isinstance(base, collections.abc.Mapping):  # (pickle's C Pickler: a slot)
        base = copyreg.dispatch_table

    # A pickler reads its dispatch table when made (cloudpickle's is a class attribute
    # that an instance's assignment would not replace): a subclass carries ours.
    class _Pickler(_pickler_module.Pickler):
        dispatch_table = collections.ChainMap(reducers, base)
    out = io.BytesIO()
    _Pickler(out).dump(obj)
    return out.getvalue()


def _deserialize(data: bytes):
    """What ``_serialize`` wrote, with its devices looked up in this process."""
    return pickle.loads(data)
