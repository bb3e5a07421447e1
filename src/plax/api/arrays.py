"""Building arrays laid out over devices from pieces: ``make_array_from_callback``,
``make_array_from_single_device_arrays``, ``make_array_from_process_local_data``, and the
older ``device_put_sharded`` / ``device_put_replicated``."""
from __future__ import annotations

import warnings

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.core.errors import UnexpectedTracerError
from plax.core.trace import Tracer
from plax.runtime import dispatch, xla
from plax.runtime.array import (CONCRETE, Array, buffer_of, make_array,
                                 single_device_arrays_in_order)
from plax.sharding.named import resolve_spec, typed_aval
from plax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["make_array_from_callback", "make_array_from_single_device_arrays",
           "make_array_from_process_local_data", "device_put_sharded", "device_put_replicated"]


def assemble_shards(shape, sharding, pieces: dict, dtype, weak_type: bool = False) -> Array:
    """One Array of ``shape`` laid out by ``sharding`` from a device -> single-device Array
    map covering the devices of ``sharding`` this process holds (no copy; checked: XLA
    trusts shapes)."""
    shape = tuple(int(d) for d in shape)
    sharding.check_shape(shape)
    aval = typed_aval(ShapedArray(shape, dtype, weak_type), sharding)
    ordered = single_device_arrays_in_order(list(pieces.values()), sharding, aval)
    bufs = [buffer_of(p) for p in ordered]
    return make_array(xla.assemble(physical_aval(aval), sharding, bufs, True), aval, True)


def make_array_from_callback(shape, sharding, data_callback, dtype=None) -> Array:
    """An array of ``shape`` laid out by ``sharding`` whose shard on each device is
    ``data_callback(index)`` (``index`` a tuple of slices into the global array); called
    for this process's devices only."""
    shape = tuple(int(d) for d in shape)
    sharding.check_shape(shape, "make_array_from_callback: ")
    where = sharding.devices_indices_map(shape)
    pieces = {}
    for d in dispatch.addressable_assignment(sharding):
        data = data_callback(where[d])
        if isinstance(data, Tracer):
            raise UnexpectedTracerError(
                "jax.make_array_from_callback cannot be called within a traced context: its "
                f"callback returned a traced value ({data.aval.str_short()}). Call it outside "
                "jit, or use jax.device_put inside.")
        if type(data) in CONCRETE:
            data = dispatch.to_device(data, d)
        else:
            host, weak = dispatch.canonical_host_value(np.asarray(data) if dtype is None
                                                       else np.asarray(data, dtype))
            data = dispatch.array_from_host(host, device=d, committed=True)
        pieces[d] = data
    first = next(iter(pieces.values()))
    return assemble_shards(shape, sharding, pieces, first.dtype)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None) -> Array:
    """An array of ``shape`` laid out by ``sharding`` from one single-device Array per device
    (each on its device, holding that device's shard)."""
    what = "jax.make_array_from_single_device_arrays"
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{what} `arrays` argument must be a list or tuple, but got "
                        f"{type(arrays).__name__}.")
    arrays = list(arrays)
    if any(isinstance(a, Tracer) for a in arrays):
        raise ValueError(f"{what} requires a list of concrete arrays as input, but got types "
                         f"{sorted({type(a).__name__ for a in arrays})}: it cannot be called "
                         "within a traced context.")
    for a in arrays:
        if type(a) not in CONCRETE:
            raise TypeError(f"{what} takes single-device plax Arrays, got {type(a).__name__}.")
    if dtype is None:
        if not arrays:
            raise ValueError(f"If the Array has no addressable shards, `dtype` must be provided "
                             f"via the `dtype` argument to `{what}`.")
        dt = arrays[0].dtype
    else:
        dt = dtypes.canonicalize_user_dtype(dtype)
        if arrays and arrays[0].dtype != dt:
            raise ValueError(f"If `dtype` is provided to `{what}`, it must match the dtype of "
                             f"the addressable shards (got dtype={dt}, the shards are "
                             f"{arrays[0].dtype}).")
    return assemble_shards(shape, sharding, {i: a for i, a in enumerate(arrays)}, dt)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """An array laid out by ``sharding`` from this process's data (in one process: all of
    it). Along each dimension the local data is either the whole global extent or exactly
    the blocks this process's devices hold; ``global_shape`` (default: inferred, assuming
    each process holds its own distinct blocks) says which. ``local_data`` may be a pytree,
    ``sharding`` and ``global_shape`` prefixes of it."""
    leaves, tree = tree_util.tree_flatten(local_data)
    shardings = tree_util.broadcast_prefix(sharding, local_data, name="sharding",
                                           is_leaf=lambda s: isinstance(s, PartitionSpec))
    shapes = tree_util.broadcast_prefix(global_shape, local_data, name="global_shape",
                                        is_leaf=lambda x: x is None or isinstance(x, tuple))
    shardings = [resolve_spec(s, "make_array_from_process_local_data")
                 if isinstance(s, PartitionSpec) else
                 dispatch.sharding_for(s) if isinstance(s, xla.Device) else s
                 for s in shardings]
    out = [_from_process_local(x if type(x) in CONCRETE else np.asarray(x), s, g)
           for x, s, g in zip(leaves, shardings, shapes)]
    return tree_util.tree_unflatten(tree, out)


def _from_process_local(local, sharding, global_shape) -> Array:
    local_shape = tuple(local.shape)
    if sharding.is_fully_addressable:
        if global_shape is not None and tuple(global_shape) != local_shape:
            raise ValueError(
                "When calling `make_array_from_process_local_data` on a single process, "
                f"global_shape should be None or equal to local_data.shape: got global_shape="
                f"{tuple(global_shape)} and local_data.shape={local_shape}.")
        return dispatch.put_sharded(local, sharding)
    if type(local) in CONCRETE:
        local = np.asarray(local)
    blocks = _process_blocks(sharding, len(local_shape))
    if global_shape is None:
        global_shape = _global_shape(local_shape, blocks)
    global_shape = tuple(global_shape)
    if None in global_shape or len(global_shape) != len(local_shape):
        raise ValueError(f"make_array_from_process_local_data: global_shape={global_shape} must "
                         f"give every one of the local data's {len(local_shape)} dimensions.")
    sharding.check_shape(global_shape, "make_array_from_process_local_data: ")
    block = sharding.shard_shape(global_shape)
    mine = blocks[0]
    whole = []
    for i, (n, g) in enumerate(zip(local_shape, global_shape)):
        whole.append(n == g)
        held = len(mine[i]) * block[i]
        if n != g and n != held:
            raise ValueError(
                "Invalid host data, each dimension should match either global or process shape. "
                f"In dimension {i} the local data has {n} elements, but this process's devices "
                f"hold {held} of the {g} (global_shape={global_shape}).")
    # Along a dimension where the local data is this process's part, its blocks lie in the
    # order of their global positions.
    rank = [{pos: k for k, pos in enumerate(sorted(mine[i]))} for i in range(len(block))]

    def local_piece(index):
        def part(i, slc):
            if whole[i]:
                return slc
            k = rank[i][(slc.start or 0) // block[i]]
            return slice(k * block[i], (k + 1) * block[i])
        return local[tuple(part(i, slc) for i, slc in enumerate(index))]
    return make_array_from_callback(global_shape, sharding, local_piece)


def _process_blocks(sharding, ndim: int):
    """Per dimension: the block positions this process's devices hold, and how many distinct
    parts the processes hold (None where they are not uniform: every process must hold as
    many positions, any two processes' sets equal or disjoint); only for uniform dimensions
    is the global extent the local one scaled."""
    n = len(sharding.device_set)
    probe = (n,) * ndim  # any tiling of n devices divides n
    block = sharding.shard_shape(probe)
    per_process = {}
    for d, index in sharding.devices_indices_map(probe).items():
        sets = per_process.setdefault(d.process_index, [set() for _ in range(ndim)])
        for i, slc in enumerate(index):
            sets[i].add((slc.start or 0) // block[i])
    mine = per_process[dispatch.addressable_assignment(sharding)[0].process_index]
    distinct = []
    for i in range(ndim):
        parts = {frozenset(p[i]) for p in per_process.values()}
        union = set().union(*parts)
        same_size = all(len(p) == len(mine[i]) for p in parts)
        distinct.append(len(parts) if same_size and sum(map(len, parts)) == len(union)
                        else None)
    return mine, distinct


def _global_shape(local_shape, blocks) -> tuple:
    mine, distinct = blocks
    out = []
    for i, n in enumerate(local_shape):
        held = len(mine[i])
        if distinct[i] is None or n % held:
            raise ValueError(
                "Unable to compute global_shape due to non-uniform sharding: the processes hold "
                f"unlike parts of dimension {i} (or its {n} local elements do not split into "
                f"this process's {held} blocks). Specify global_shape directly.")
        out.append(n * distinct[i])
    return tuple(out)


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
