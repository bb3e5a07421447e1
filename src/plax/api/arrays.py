"""Building arrays laid out over devices from pieces: ``make_array_from_callback``,
``make_array_from_single_device_arrays``, ``make_array_from_process_local_data``, and the
older ``device_put_sharded`` / ``device_put_replicated``."""
from __future__ import annotations

import warnings

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.runtime import dispatch, xla
from plax.runtime.array import CONCRETE, Array, buffer_of, make_array
from plax.sharding.named import typed_aval
from plax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["make_array_from_callback", "make_array_from_single_device_arrays",
           "make_array_from_process_local_data", "device_put_sharded", "device_put_replicated"]


def _assemble(shape, sharding, pieces: dict, dtype, weak_type: bool = False) -> Array:
    """One Array from a device -> single-device Array map (checked: XLA trusts shapes)."""
    shape = tuple(int(d) for d in shape)
    sharding.check_shape(shape)
    want = sharding.shard_shape(shape)
    devices = sharding._device_assignment
    bufs = []
    for d in devices:
        piece = pieces[d]
        if tuple(piece.shape) != want:
            raise ValueError(f"Expected shard shape {want} doesn't match the single device array "
                             f"shape {tuple(piece.shape)}. Shape of Array is "
                             f"{ShapedArray(shape, dtype).str_short(short_dtypes=False)} with sharding {sharding}.")
        if piece.dtype != dtype:
            raise ValueError(f"The single-device arrays must all have dtype {dtype}, got "
                             f"{piece.dtype} on {d}.")
        bufs.append(buffer_of(piece))
    aval = typed_aval(ShapedArray(shape, dtype, weak_type), sharding)
    return make_array(xla.assemble(physical_aval(aval), sharding, bufs, True), aval, True)


def make_array_from_callback(shape, sharding, data_callback, dtype=None) -> Array:
    """An array of ``shape`` laid out by ``sharding`` whose shard on each device is
    ``data_callback(index)`` (``index`` a tuple of slices into the global array)."""
    shape = tuple(int(d) for d in shape)
    sharding.check_shape(shape, "make_array_from_callback: ")
    pieces = {}
    for d, index in sharding.devices_indices_map(shape).items():
        data = data_callback(index)
        if type(data) in CONCRETE:
            data = dispatch.to_device(data, d)
        else:
            host, weak = dispatch.canonical_host_value(np.asarray(data) if dtype is None
                                                       else np.asarray(data, dtype))
            data = dispatch.array_from_host(host, device=d, committed=True)
        pieces[d] = data
    first = next(iter(pieces.values()))
    return _assemble(shape, sharding, pieces, first.dtype)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None) -> Array:
    """An array of ``shape`` laid out by ``sharding`` from one single-device Array per device
    (each on its device, holding that device's shard)."""
    arrays = list(arrays)
    devices = sharding._device_assignment
    if len(arrays) != len(devices):
        raise ValueError(f"Expected {len(devices)} per-device arrays (this is how many devices "
                         f"are addressable by the sharding), but got {len(arrays)}")
    pieces = {}
    for a in arrays:
        if type(a) not in CONCRETE or len(a.sharding.device_set) != 1:
            raise TypeError("make_array_from_single_device_arrays takes single-device plax "
                            f"Arrays, got {type(a).__name__}.")
        pieces[next(iter(a.sharding.device_set))] = a
    missing = [d for d in devices if d not in pieces]
    if missing:
        raise ValueError(f"make_array_from_single_device_arrays: no array is on {missing[0]}, "
                         "one of the sharding's devices (each array must be on its device).")
    dt = arrays[0].dtype if dtype is None else dtypes.canonicalize_user_dtype(dtype)
    return _assemble(shape, sharding, pieces, dt)


def make_array_from_process_local_data(sharding, local_data, global_shape=None) -> Array:
    """An array laid out by ``sharding`` from this process's data (in one process: all of it)."""
    local = np.asarray(local_data)
    if global_shape is not None and tuple(global_shape) != local.shape:
        raise ValueError(f"In a single process the local data is the whole array: its shape "
                         f"{local.shape} must equal global_shape {tuple(global_shape)}.")
    return dispatch.put_sharded(local, sharding)


def _stacked_sharding(devices) -> NamedSharding:
    return NamedSharding(Mesh(np.array(list(devices), dtype=object), ("devices",)),
                         PartitionSpec("devices"))


def device_put_sharded(shards, devices) -> Array:
    """Stack ``shards`` (one per device, same shape) along a new leading axis, shard ``i``
    on ``devices[i]``. Deprecated (as in JAX): use ``device_put`` with a NamedSharding."""
    warnings.warn("device_put_sharded is deprecated; use plax.device_put with a "
                  "NamedSharding instead.", DeprecationWarning, stacklevel=2)
    shards, devices = list(shards), list(devices)
    if len(shards) != len(devices):
        raise ValueError(f"device_put_sharded takes one shard per device: got {len(shards)} "
                         f"shards for {len(devices)} devices.")
    stacked = np.stack([np.asarray(s) for s in shards])
    return dispatch.put_sharded(stacked, _stacked_sharding(devices))


def device_put_replicated(x, devices) -> Array:
    """``len(devices)`` copies of ``x`` stacked along a new leading axis, copy ``i`` on
    ``devices[i]``. Deprecated (as in JAX): use ``device_put`` with a NamedSharding."""
    warnings.warn("device_put_replicated is deprecated; use plax.device_put with a "
                  "NamedSharding instead.", DeprecationWarning, stacklevel=2)
    devices = list(devices)
    host = np.asarray(x)
    stacked = np.broadcast_to(host[None], (len(devices),) + host.shape)
    return dispatch.put_sharded(np.ascontiguousarray(stacked), _stacked_sharding(devices))
