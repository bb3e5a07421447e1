"""A pytree of arrays saved to a directory and loaded back, in JAX's layout:

    DIRECTORY/pytreedef.json   the structure (JAX's flatbuffer PyTreeDef, base64) and one
                               description per leaf: "Array(float32[2, 3])", null, ...
    DIRECTORY/array_store/     an OCDBT store holding leaf i's array as the zarr3 array "i"

Leaves are arrays (plax or NumPy) or None. Saving and loading go through tensorstore on a
thread pool; ``nonblocking_save`` and ``nonblocking_load`` return at once with a future.
With many processes, each writes its shards under ``array_store/process_<i>/`` and process
0 then links them into the one store. For anything richer, orbax-checkpoint.
"""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import re
import shutil
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from plax import tree_util
from plax.api.devices import process_count, process_index
from plax.core import dtypes
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.experimental import multihost_utils
from plax.experimental.array_serialization import pytree_serialization_utils as utils
from plax.experimental.array_serialization import tensorstore_impl as ts_impl
from plax.runtime import distributed
from plax.runtime.array import Array
from plax.sharding.layouts import Format

__all__ = ["save", "load", "load_pytreedef", "nonblocking_load", "nonblocking_save"]

_PYTREEDEF_FILE = "pytreedef.json"
_ARCHIVE_NAME = "archive.zip"
_ARRAY_STORE_DIRNAME = "array_store"
_OWN_ENTRIES = (_PYTREEDEF_FILE, _ARCHIVE_NAME, _ARRAY_STORE_DIRNAME)
_ARRAY_DESCRIPTION = re.compile(r"Array\(([a-zA-Z0-9_]+)\[([0-9, ]*)\]\)")
_REMOTE_PREFIXES = ("gs:/", "s3:/")  # (a Path collapses "gs://" to "gs:/")
_MAX_PATH_LENGTH = 4096
_BARRIER_TIMEOUT_S = 30
_READ_BUDGET_BYTES = 10 * 1024 ** 3

_save_lock = threading.Lock()
_executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="plax-pytree-io")


# --- paths and processes -------------------------------------------------------------------
def _is_remote(path) -> bool:
    return str(path).startswith(_REMOTE_PREFIXES)


def _norm_path(path):
    if _is_remote(path):
        try:
            from etils import epath
        except ImportError as e:
            raise RuntimeError("For saving to remote URLs (e.g., gs, s3) you need the `etils` "
                               "module installed: pip install etils.") from e
        return epath.Path(path)
    return pathlib.Path(path).expanduser().resolve()


def _sync_key() -> str | None:
    """A name all processes share for this save or load's barriers (None: one process)."""
    if process_count() == 1:
        return None
    ours = np.frombuffer(uuid.uuid4().bytes, dtype=np.int32)
    shared = multihost_utils.broadcast_one_to_all(ours)
    return f"plax_pytree_sync_{uuid.UUID(bytes=np.asarray(shared).tobytes())}"


def _sync(key: str | None, tag: str) -> None:
    if key is not None:
        distributed.barrier(f"{key}-{tag}", timeout=_BARRIER_TIMEOUT_S)


def _same_path_everywhere(path) -> bool:
    """Whether every process names the same directory (False with one process)."""
    if process_count() <= 1:
        return False
    raw = str(path).encode("utf-8")
    if len(raw) > _MAX_PATH_LENGTH:
        raise ValueError(f"Path exceeds maximum length of {_MAX_PATH_LENGTH} bytes in the "
                         f"multiprocess case: {len(raw)} bytes.")
    padded = np.zeros(_MAX_PATH_LENGTH, np.uint8)
    padded[:len(raw)] = np.frombuffer(raw, np.uint8)
    everyone = np.asarray(multihost_utils.process_allgather(padded))
    return bool(np.all(everyone[0] == everyone[1:]))


# --- leaves --------------------------------------------------------------------------------
def _is_array_like(x) -> bool:
    return isinstance(x, (Array, np.ndarray))


def _describe(leaf) -> str | None:
    if leaf is None:
        return None
    if _is_array_like(leaf):
        return f"Array({np.dtype(leaf.dtype).name}[{', '.join(map(str, leaf.shape))}])"
    return type(leaf).__name__


def _undescribe(description):
    """A leaf description back as a ShapeDtypeStruct (arrays), None, or the text."""
    if description is None:
        return None
    match = _ARRAY_DESCRIPTION.match(description)
    if match is None:
        return description
    dtype, dims = match.groups()
    shape = tuple(int(d) for d in dims.split(",") if d.strip())
    return ShapeDtypeStruct(shape, dtypes.dtype(dtype))


def _is_none(x) -> bool:
    return x is None


def _broadcast(prefix, full, is_leaf=_is_none) -> list:
    """One entry of the prefix tree ``prefix`` per leaf of ``full`` (None leaves included)."""
    treedef = tree_util.tree_structure(full, is_leaf=_is_none)
    return tree_util.broadcast_prefix_to_treedef(prefix, treedef, is_leaf, name="tree_broadcast")


# --- saving --------------------------------------------------------------------------------
def _prepare_directory(root, overwrite: bool, distinct: bool, key: str | None) -> None:
    if root.exists() and any(True for _ in root.iterdir()):
        if not overwrite:
            raise ValueError(f"Files already exist at path: `{root}`, but you specified "
                             f"`overwrite={overwrite}`")
        foreign = [p for p in root.iterdir() if p.name not in _OWN_ENTRIES]
        if foreign:
            raise RuntimeError(
                "Refusing to work on a directory that is not a previous checkpoint. "
                f"Unrecognized paths: {foreign}. Remove them yourself if {root} is meant to "
                "be the checkpoint directory.")
        if process_index() == 0 or distinct:
            root.rmtree() if _is_remote(root) else shutil.rmtree(root)
    _sync(key, "overwrite")
    if not _is_remote(root) and (distinct or process_index() == 0):
        root.mkdir(exist_ok=True)  # (not its parents)
        if not root.is_dir():
            raise RuntimeError(f"Could not create destination directory at {root}")
    _sync(key, "mkdir")


def _write_arrays(store_path, arrays: list, leaf_ids: list, ts_specs: list,
                  distinct: bool) -> None:
    own_part = process_index() if not distinct and process_count() > 1 else None
    specs = [ts_impl.merge_nested_ts_specs(
        ts_impl.get_tensorstore_spec(store_path / str(i), ocdbt=True, process_idx=own_part,
                                     arr=a), spec)
        for i, a, spec in zip(leaf_ids, arrays, ts_specs)]
    if specs:
        shared = specs[0]["kvstore"]["base"]["path"]
        for spec, a in zip(specs, arrays):
            ts_impl.verify_tensorstore_spec(spec, a, shared, ocdbt=True, check_metadata=True)

    async def write_all():
        await asyncio.gather(*[ts_impl.async_serialize(a, spec, primary_host=None)
                               for a, spec in zip(arrays, specs)])
    asyncio.run(write_all())


def _combine_process_stores(store_path, distinct: bool) -> None:
    """Process 0 links every process's part of the store into one (many processes only)."""
    if distinct or process_count() == 1 or process_index() != 0:
        return
    placeholder = os.path.join(str(store_path), "placeholder")
    combined = ts_impl.get_tensorstore_spec(placeholder, ocdbt=True)["kvstore"]
    parts = [ts_impl.get_tensorstore_spec(placeholder, ocdbt=True, process_idx=i)["kvstore"]
             for i in range(process_count())]
    for kvstore in (combined, *parts):
        kvstore.pop("path")
    asyncio.run(ts_impl.combine_kvstores(combined, parts))


def save(data, directory, *, overwrite: bool = True, ts_specs=None) -> None:
    """Save the pytree ``data`` (leaves: arrays or None) to ``directory``, replacing a
    previous checkpoint there when ``overwrite``. ``ts_specs``: a prefix tree of tensorstore
    spec overrides (dicts) for the arrays. Blocks until everything is written."""
    with _save_lock:
        _save(data, directory, overwrite=overwrite, ts_specs=ts_specs)


def _save(data, directory, *, overwrite: bool, ts_specs) -> None:
    key = _sync_key()
    ts_specs_flat = _broadcast(ts_specs, data, is_leaf=ts_impl.is_tensorstore_spec_leaf)
    leaves, treedef = tree_util.tree_flatten(data, is_leaf=_is_none)
    bad = [type(x).__name__ for x in leaves if not (x is None or _is_array_like(x))]
    if bad:
        raise ValueError("For serialization, all leaves must be either None or jax.Array-like "
                         f"objects; found leaves of type {sorted(set(bad))}.")
    distinct = not _same_path_everywhere(directory)
    if process_count() > 1 and distinct:
        raise ValueError("Saving to different locations on different hosts is not supported: "
                         "give every process the same directory.")
    root = _norm_path(directory)
    description = utils.serialize_pytreedef(treedef)
    description[utils._LEAF_IDS_KEY] = [_describe(x) for x in leaves]
    _prepare_directory(root, overwrite, distinct, key)

    def write_structure():
        if process_index() == 0 or distinct:
            (root / _PYTREEDEF_FILE).write_text(json.dumps(description, indent=2))
    leaf_ids = [i for i, x in enumerate(leaves) if _is_array_like(x)]
    store_path = root / _ARRAY_STORE_DIRNAME
    futures = [_executor.submit(write_structure),
               _executor.submit(_write_arrays, store_path, [leaves[i] for i in leaf_ids],
                                leaf_ids, [ts_specs_flat[i] for i in leaf_ids], distinct)]
    for f in futures:
        f.result()
    _sync(key, "array_serialization")
    if leaf_ids:  # (on a thread: asyncio.run does not nest)
        _executor.submit(_combine_process_stores, store_path, distinct).result()
    _sync(key, "end")


def nonblocking_save(data, directory, *, overwrite: bool = True,
                     ts_specs=None) -> utils.PyTreeFuture:
    """:func:`save` started on a thread; the future's ``pytree`` is ``data`` with its arrays
    as ShapeDtypeStructs and its ``result()`` (None) waits for the write."""
    future = utils.PyTreeFuture(_executor.submit(save, data, directory, overwrite=overwrite,
                                                 ts_specs=ts_specs))
    future.pytree = tree_util.tree_map(
        lambda x: ShapeDtypeStruct(x.shape, x.dtype) if _is_array_like(x) else x, data)
    return future


# --- loading -------------------------------------------------------------------------------
def load_pytreedef(directory):
    """The saved pytree's structure, its arrays as ShapeDtypeStructs (no array is read)."""
    raw = json.loads((_norm_path(directory) / _PYTREEDEF_FILE).read_text())
    leaves = [_undescribe(d) for d in raw[utils._LEAF_IDS_KEY]]
    return tree_util.tree_unflatten(utils.deserialize_pytreedef(raw), leaves)


def _read_arrays(store_path, leaf_ids: list, ts_specs: list, shardings: list) -> dict:
    specs = [ts_impl.merge_nested_ts_specs(
        ts_impl.get_tensorstore_spec(_norm_path(store_path) / str(i), ocdbt=True), spec)
        for i, spec in zip(leaf_ids, ts_specs)]
    if specs:
        shared = specs[0]["kvstore"]["base"]["path"]
        for spec in specs:
            ts_impl.verify_tensorstore_spec(spec, None, shared, ocdbt=True,
                                            check_metadata=False)

    async def read_all():
        limiter = ts_impl._LimitInFlightBytes(_READ_BUDGET_BYTES)
        return await asyncio.gather(*[
            ts_impl.async_deserialize(sharding, spec, byte_limiter=limiter)
            for sharding, spec in zip(shardings, specs)])
    return dict(zip(leaf_ids, asyncio.run(read_all())))


def load(directory, shardings, *, mask=None, ts_specs=None):
    """The pytree saved in ``directory``, each array placed by ``shardings`` (a prefix tree of
    Shardings, or of ShapeDtypeStructs with a sharding, whose shape and dtype then apply).
    ``mask``: a prefix tree of booleans; a False part comes back as None, unread."""
    root = _norm_path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"Checkpoint directory {root} does not exist")
    pytree = load_pytreedef(directory)
    shardings_flat = _broadcast(shardings, pytree)
    ts_specs_flat = _broadcast(ts_specs, pytree, is_leaf=ts_impl.is_tensorstore_spec_leaf)
    if mask is not None:
        pytree = tree_util.tree_map(
            lambda keep, part: part if keep else tree_util.tree_map(lambda _: None, part),
            mask, pytree)
    leaves, treedef = tree_util.tree_flatten(pytree, is_leaf=_is_none)
    if any(isinstance(s, Format) for s in shardings_flat):
        raise NotImplementedError(
            "Deserialization with `Format` instead of `Sharding` is not currently supported. "
            "Pass ShapeDtypeStruct(shape, dtype, sharding=format) instead.")
    leaf_ids = [i for i, x in enumerate(leaves) if x is not None]
    arrays = _executor.submit(_read_arrays, root / _ARRAY_STORE_DIRNAME, leaf_ids,
                              [ts_specs_flat[i] for i in leaf_ids],
                              [shardings_flat[i] for i in leaf_ids]).result()
    return tree_util.tree_unflatten(treedef, [arrays.get(i) for i in range(len(leaves))])


def nonblocking_load(directory, shardings, *, mask=None, ts_specs=None) -> utils.PyTreeFuture:
    """:func:`load` started on a thread; the future's ``pytree`` is the saved structure (its
    arrays as ShapeDtypeStructs) and its ``result()`` the loaded pytree."""
    future = utils.PyTreeFuture(_executor.submit(load, directory, shardings, mask=mask,
                                                 ts_specs=ts_specs))
    future.pytree = load_pytreedef(directory)
    return future

