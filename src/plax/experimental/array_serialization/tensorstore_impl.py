"""Arrays to and from tensorstore, shard by shard.

Each array is a zarr3 array (its shape, dtype name and a regular chunk grid whose chunks
divide the local shard and stay under about 2 GiB) in a key-value store: by default an
OCDBT database in the array's parent directory, keyed by the array's name (the layout JAX
writes). A process writes the shards it holds (one copy of each: the replica asked for);
reading gives each device the block its sharding assigns it, zero-filled beyond what was
stored when a larger shape is asked for, cast when another dtype is.
"""
from __future__ import annotations

import asyncio
import functools
import math
import os
import re

import numpy as np

from plax.api.devices import device_put
from plax.api.arrays import make_array_from_single_device_arrays
from plax.core import dtypes as _dtypes
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.runtime import xla
from plax.runtime.array import Array
from plax.sharding import SingleDeviceSharding
from plax.sharding.layouts import Format

_ARRAY_DRIVER = "zarr3"
_BASE_DRIVER = "file"
_PROCESS_DIR = "process_{}"
_FILE_SIZE_TARGET = 2 * 1024 ** 3  # chunks (files) of at most ~2 GiB (+10 %)


def _ts():
    try:
        import tensorstore
    except ImportError as e:
        raise ImportError("plax.experimental.array_serialization writes and reads arrays with "
                          "tensorstore, which is not installed: pip install "
                          "'plax[checkpoint]' (or pip install tensorstore).") from e
    return tensorstore


@functools.lru_cache(maxsize=1)
def _context():
    return _ts().Context({"file_io_concurrency": {"limit": 128},
                          "cache_pool": {"total_bytes_limit": 10_000_000_000},
                          "cache_pool#remote": {"total_bytes_limit": 10_000_000_000},
                          "data_copy_concurrency": {"limit": 128}})


def __getattr__(name):
    if name in ("TS_CONTEXT", "_TS_CONTEXT"):  # (made on first use: it needs tensorstore)
        return _context()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _LimitInFlightBytes:
    """Bounds the host memory reads hold at once: a read asks for its bytes first and gives
    them back when its block is on the device. One read larger than the whole budget
    raises the budget to its size rather than waiting forever."""

    def __init__(self, host_memory_bytes_limit: int):
        self._max_bytes = self._available_bytes = int(host_memory_bytes_limit)
        self._changed = asyncio.Condition()

    async def wait_for_bytes(self, requested_bytes: int) -> None:
        async with self._changed:
            if requested_bytes > self._max_bytes:
                self._available_bytes += requested_bytes - self._max_bytes
                self._max_bytes = requested_bytes
            await self._changed.wait_for(lambda: self._available_bytes >= requested_bytes)
            self._available_bytes -= requested_bytes

    async def release_bytes(self, requested_bytes: int) -> None:
        async with self._changed:
            self._available_bytes += requested_bytes
            self._changed.notify_all()


def make_single_device_sharding(device, memory_kind=None) -> SingleDeviceSharding:
    return SingleDeviceSharding(device, memory_kind=memory_kind)


def is_tensorstore_spec_leaf(leaf) -> bool:
    """Whether ``leaf`` is one array's spec (a dict naming a driver or a kvstore) or None."""
    return leaf is None or (isinstance(leaf, dict) and ("driver" in leaf or "kvstore" in leaf))


def _smallest_factor(n: int) -> int:
    for f in range(2, math.isqrt(n) + 1):
        if n % f == 0:
            return f
    return n


@functools.lru_cache(maxsize=1024)
def _chunk_shape(local_shape: tuple, itemsize: int, target: int = _FILE_SIZE_TARGET) -> list:
    """A chunk shape dividing ``local_shape`` whose bytes stay under 1.1 x ``target``: the
    axis with the smallest remaining prime factor is divided by it until small enough."""
    shape = list(local_shape)
    if not shape or math.prod(shape) == 0:
        return [max(d, 1) for d in shape]
    size = math.prod(shape) * itemsize
    while size > 1.1 * target:
        candidates = [(_smallest_factor(d), i) for i, d in enumerate(shape) if d > 1]
        if not candidates:
            break
        factor, axis = min(candidates)
        shape[axis] //= factor
        size //= factor
    return shape


def _local_shape(arr) -> tuple:
    if isinstance(arr, Array):
        return tuple(arr.sharding.shard_shape(arr.shape))
    return tuple(np.shape(arr))


def _metadata(arr, driver: str = _ARRAY_DRIVER, is_remote: bool = False) -> dict:
    shape, dtype = tuple(np.shape(arr)), np.dtype(arr.dtype)
    local = _local_shape(arr)
    if driver == "zarr3":
        return {"codecs": [{"name": "zstd"}] if is_remote else [], "shape": shape,
                "data_type": dtype.name,
                "chunk_grid": {"name": "regular", "configuration": {
                    "chunk_shape": _chunk_shape(local, dtype.itemsize)}}}
    if driver == "zarr":
        return {"compressor": {"id": "zstd"}, "shape": shape,
                "chunks": [max(1, d) for d in local]}
    raise ValueError(f"Unsupported driver: {driver} (zarr3 or zarr).")


def merge_nested_ts_specs(spec: dict, override: dict | None) -> dict:
    """``spec`` with ``override``'s entries (its kvstore's merged into ``spec``'s)."""
    if override is None:
        return spec
    kvstore = {**spec.get("kvstore", {}), **override.get("kvstore", {})}
    return {**spec, **override, "kvstore": kvstore}


def verify_tensorstore_spec(spec: dict, arr, path, ocdbt: bool,
                            check_metadata: bool = True) -> None:
    """Raise ValueError if ``spec`` does not describe ``arr`` at ``path``."""
    kvstore = spec.get("kvstore", {})
    if ocdbt and kvstore.get("driver", "") != "ocdbt":
        raise ValueError(f"Expected ocdbt driver, got spec={spec}")
    if check_metadata:
        if arr is None:
            raise ValueError("Array is required for metadata verification.")
        meta = spec["metadata"]
        if spec.get("driver") == "zarr3" and meta["data_type"] != np.dtype(arr.dtype).name:
            raise ValueError(f"Provided dtype ({meta['data_type']}) doesn't match the array's "
                             f"({arr.dtype}).")
        if "shape" in meta and tuple(meta["shape"]) != tuple(np.shape(arr)):
            raise ValueError(f"Provided shape ({meta['shape']}) doesn't match the array's "
                             f"({np.shape(arr)}).")
        if spec.get("driver") == "zarr3":
            chunk = meta["chunk_grid"]["configuration"]["chunk_shape"]
            if any(d % c for d, c in zip(_local_shape(arr), chunk)):
                raise ValueError(f"Provided chunk shape {chunk} does not divide the local "
                                 f"shape of the array {_local_shape(arr)}")
    found = kvstore["base"]["path"] if ocdbt else kvstore["path"]
    if str(found) != str(path):
        raise ValueError(f"Provided path={path} does not match the spec path: {kvstore}")


def _bucket_kvstore(path: str) -> dict:
    m = re.fullmatch(r"(gs|s3)://([^/]*)/(.*)", path, re.DOTALL)
    if m is None:
        raise ValueError("The ckpt_path should contain the bucket name and the file path "
                         f"inside the bucket. Got: {path}")
    return {"driver": "gcs" if m.group(1) == "gs" else "s3", "bucket": m.group(2),
            "path": m.group(3)}


def get_tensorstore_spec(ckpt_path, ocdbt: bool = True, process_idx: int | None = None,
                         arr=None, driver: str = _ARRAY_DRIVER) -> dict:
    """The tensorstore spec of the array stored at ``ckpt_path``: in an OCDBT store of its
    parent directory under its name (``ocdbt``), or on its own; under ``process_<i>/`` for
    one process's part of a many-process write; with ``arr``'s metadata when given."""
    path = re.sub(r"^(gs|s3):/", r"\1://", os.path.normpath(str(ckpt_path)))
    if process_idx is not None:
        parent, name = os.path.split(path)
        path = os.path.join(parent, _PROCESS_DIR.format(process_idx), name)
    remote = path.startswith(("gs://", "s3://"))
    key = None
    if ocdbt:
        path, key = os.path.split(path)
        if not remote and not os.path.isabs(path):
            raise ValueError(f"Checkpoint path should be absolute. Got {path}")
    base = _bucket_kvstore(path) if remote else {"driver": _BASE_DRIVER, "path": path}
    spec = {"driver": driver,
            "kvstore": {"driver": "ocdbt", "base": base, "path": key} if ocdbt else base}
    if arr is not None:
        spec["metadata"] = _metadata(arr, driver, is_remote=remote)
    return spec


async def combine_kvstores(combined_kvstore: dict, kvstores: list,
                           context=None) -> None:
    """Copy every key of ``kvstores`` (each process's OCDBT store) into one store."""
    ts = _ts()
    context = context or _context()
    combined = await ts.KvStore.open(combined_kvstore, context=context)
    parts = await asyncio.gather(*[ts.KvStore.open(k, context=context) for k in kvstores])
    async with ts.Transaction() as txn:  # (one commit for all the copies)
        await asyncio.gather(*[part.experimental_copy_range_to(combined.with_transaction(txn))
                               for part in parts])


def _spec_with_shape(spec: dict, arr) -> dict:
    """``spec`` with the array's metadata when it has none (zarr also names the dtype)."""
    spec = dict(spec)
    if spec.get("driver") == "zarr" and "dtype" not in spec:
        spec["dtype"] = np.dtype(arr.dtype).name
    if "metadata" not in spec:
        spec["metadata"] = _metadata(arr, spec.get("driver", _ARRAY_DRIVER))
    return spec


async def async_serialize(arr_inp, tensorstore_spec: dict, commit_future=None, context=None,
                          chunk_layout=None, primary_host: int | None = None,
                          replica_id: int = 0, transaction=None) -> None:
    """Write the shards of ``arr_inp`` this process holds (those of ``replica_id``) to the
    array ``tensorstore_spec`` names, creating it (on ``primary_host``; every process when
    None). ``commit_future``: a list the write futures are appended to, to be awaited
    later; None awaits them here."""
    ts = _ts()
    context = context or _context()
    if isinstance(arr_inp, Array) and not arr_inp.is_fully_addressable and \
            primary_host is None:
        raise ValueError("primary_host=None (every process creates the array) is only for "
                         "arrays each process holds whole.")
    spec = _spec_with_shape(tensorstore_spec, arr_inp)
    if not isinstance(arr_inp, Array):  # host data: written whole by the primary host
        arr_inp = np.asarray(arr_inp)
    if primary_host is None or xla.process_index() == primary_host:
        await ts.open(ts.Spec(spec), create=True, open=True, context=context,
                      chunk_layout=chunk_layout, transaction=transaction)
    store = await ts.open(ts.Spec(spec), open=True, assume_metadata=False, context=context,
                          transaction=transaction)
    if isinstance(arr_inp, np.ndarray):
        if primary_host is not None and xla.process_index() != primary_host:
            return
        writes = [store.write(arr_inp)]
    else:
        writes = [store[shard.index].write(np.asarray(shard.data))
                  for shard in arr_inp.addressable_shards if shard.replica_id == replica_id]
    if commit_future is not None:
        for w in writes:
            commit_future.append(w.commit if transaction is None else w.copy)
        await asyncio.gather(*[w.copy for w in writes])
    else:
        await asyncio.gather(*[w.commit if transaction is None else w.copy for w in writes])


def estimate_read_memory_footprint(t, domain) -> int:
    """The bytes reading ``domain`` of the tensorstore ``t`` takes: whole chunks are read."""
    shape = domain.shape
    if not shape:
        return t.dtype.numpy_dtype.itemsize
    chunks = t.chunk_layout.read_chunk.shape
    if chunks is None:
        return math.prod(shape) * t.dtype.numpy_dtype.itemsize
    size = 1
    for lo, n, c, origin in zip(domain.inclusive_min, shape, chunks,
                                t.domain.inclusive_min):
        if n == 0:
            return 0
        first = (lo - origin) // c
        last = (lo + n - 1 - origin) // c
        size *= (last - first + 1) * c
    return size * t.dtype.numpy_dtype.itemsize


async def _read_block(store, index: tuple, shape: tuple, dtype) -> np.ndarray:
    """The block ``index`` of an array of ``shape``; zeros where the store holds less."""
    ts = _ts()
    wanted = ts.IndexTransform(input_shape=shape)[index].domain
    have = store.domain.intersect(wanted)
    out = np.zeros(wanted.shape, dtype)
    if all(n > 0 for n in have.shape):  # (a scalar's empty shape: its one element)
        into = tuple(slice(lo - w, lo - w + n) for lo, w, n in
                     zip(have.inclusive_min, wanted.inclusive_min, have.shape))
        out[into] = await store[have].read()
    return out


async def async_deserialize(in_type, tensorstore_spec, global_shape=None, dtype=None,
                            byte_limiter=None, context=None, chunk_layout=None,
                            assume_metadata: bool = False):
    """The array ``tensorstore_spec`` names, laid out by ``in_type`` (a Sharding, a Format
    with the default layout, or a ShapeDtypeStruct with a sharding, whose shape and dtype
    then apply), of ``global_shape`` and ``dtype`` when given."""
    ts = _ts()
    context = context or _context()
    if isinstance(in_type, ShapeDtypeStruct):
        global_shape = in_type.shape if global_shape is None else global_shape
        dtype = in_type.dtype if dtype is None else dtype
        in_type = in_type.sharding
    sharding = in_type.sharding if isinstance(in_type, Format) else in_type
    if sharding is None:
        raise ValueError("async_deserialize needs a sharding (or a Format or a "
                         "ShapeDtypeStruct with one) to lay the array out by.")
    spec = tensorstore_spec if isinstance(tensorstore_spec, ts.Spec) else ts.Spec(
        tensorstore_spec)
    store = await ts.open(spec, open=True, assume_metadata=assume_metadata, context=context)
    shape = tuple(store.shape) if global_shape is None else tuple(global_shape)
    out_dtype = np.dtype(store.dtype.numpy_dtype if dtype is None else dtype)
    if out_dtype != store.dtype.numpy_dtype:
        store = ts.cast(store, out_dtype)
    index_map = sharding.addressable_devices_indices_map(shape)

    async def read(device, index):
        index = tuple(index) if index is not None else tuple(slice(None) for _ in shape)
        if byte_limiter is None:
            block = await _read_block(store, index, shape, out_dtype)
            return device_put(block, make_single_device_sharding(device))
        wanted = ts.IndexTransform(input_shape=shape)[index].domain
        footprint = estimate_read_memory_footprint(store, store.domain.intersect(wanted))
        await byte_limiter.wait_for_bytes(footprint)
        try:
            block = await _read_block(store, index, shape, out_dtype)
            return device_put(block, make_single_device_sharding(device))
        finally:
            await byte_limiter.release_bytes(footprint)
    pieces = await asyncio.gather(*[read(d, i) for d, i in index_map.items()])
    out_dtype = _dtypes.canonicalize_dtype(out_dtype)
    return make_array_from_single_device_arrays(shape, sharding, list(pieces),
                                                dtype=out_dtype)


def _run_serialization(arrays, tensorstore_specs) -> None:
    async def run():
        await asyncio.gather(*[async_serialize(a, s) for a, s in zip(arrays, tensorstore_specs)])
    asyncio.run(run())


def _run_deserialization(shardings, tensorstore_specs, global_shapes=None, dtypes=None,
                         concurrent_gb: int = 32) -> list:
    global_shapes = global_shapes or [None] * len(tensorstore_specs)
    dtypes = dtypes or [None] * len(tensorstore_specs)

    async def run():
        limiter = _LimitInFlightBytes(concurrent_gb * 10 ** 9)
        return await asyncio.gather(*[
            async_deserialize(sh, spec, shape, dt, byte_limiter=limiter)
            for sh, spec, shape, dt in zip(shardings, tensorstore_specs, global_shapes, dtypes)])
    return list(asyncio.run(run()))
