"""plax.experimental.multihost_utils: moving values between processes and global arrays (as
``jax.experimental.multihost_utils``).

Every function goes through the mesh of all devices and one jitted program, so the same code
serves one process (where local data is the whole array) and several (where each process
contributes its devices' part).
"""
from __future__ import annotations

import zlib

import numpy as np

from plax import tree_util
from plax.api.devices import device_put, devices, process_count, process_index
from plax.api.jit import jit
from plax.api.arrays import make_array_from_process_local_data
from plax.runtime.array import CONCRETE
from plax.sharding.mesh import Mesh
from plax.sharding.named import NamedSharding
from plax.sharding.partition_spec import PartitionSpec

__all__ = ["host_local_array_to_global_array", "global_array_to_host_local_array",
           "process_allgather", "broadcast_one_to_all", "sync_global_devices", "assert_equal"]


def _specs(pspecs, tree):
    is_leaf = lambda s: s is None or isinstance(s, PartitionSpec)  # noqa: E731
    if is_leaf(pspecs):
        return [pspecs or PartitionSpec()] * len(tree_util.tree_leaves(tree))
    return [s or PartitionSpec()
            for s in tree_util.broadcast_prefix(pspecs, tree, is_leaf=is_leaf, name="pspecs")]


def host_local_array_to_global_array(local_inputs, global_mesh: Mesh, pspecs):
    """Each process's host-local leaves as global Arrays laid out over ``global_mesh`` by
    ``pspecs`` (a pytree prefix of PartitionSpecs); one process: the leaves as they are."""
    leaves, tree = tree_util.tree_flatten(local_inputs)
    out = [make_array_from_process_local_data(NamedSharding(global_mesh, s),
                                              np.asarray(x) if type(x) not in CONCRETE else x)
           if process_count() > 1 or type(x) not in CONCRETE
           else device_put(x, NamedSharding(global_mesh, s))
           for x, s in zip(leaves, _specs(pspecs, local_inputs))]
    return tree_util.tree_unflatten(tree, out)


def global_array_to_host_local_array(global_inputs, global_mesh: Mesh, pspecs):
    """Global Arrays as this process's host-local ones (laid out by ``pspecs`` over its
    devices); one process: the arrays laid out by ``pspecs`` over ``global_mesh``."""
    if process_count() > 1:
        raise NotImplementedError(
            "global_array_to_host_local_array across processes needs the distributed runtime "
            "(plax.distributed), which is not available yet.")
    leaves, tree = tree_util.tree_flatten(global_inputs)
    out = [device_put(x, NamedSharding(global_mesh, s))
           for x, s in zip(leaves, _specs(pspecs, global_inputs))]
    return tree_util.tree_unflatten(tree, out)


def _all_devices_mesh() -> Mesh:
    devs = devices()
    n = process_count()
    grid = np.array(sorted(devs, key=lambda d: (d.process_index, d.id)), dtype=object)
    return Mesh(grid.reshape(n, len(devs) // n), ("processes", "local"))


def process_allgather(in_tree, tiled: bool = False):
    """Every process's leaves of ``in_tree``, as NumPy arrays: stacked along a new leading axis
    (one entry per process), or concatenated along the first axis when ``tiled``."""
    mesh = _all_devices_mesh()
    by_process = NamedSharding(mesh, PartitionSpec("processes"))
    replicated = NamedSharding(mesh, PartitionSpec())
    gather = jit(lambda x: x, out_shardings=replicated)

    def one(x):
        local = np.asarray(x)[None]
        stacked = np.asarray(gather(make_array_from_process_local_data(
            by_process, local, (process_count(),) + local.shape[1:])))
        if tiled:
            return stacked.reshape((-1,) + stacked.shape[2:]) if stacked.ndim > 1 else stacked
        return stacked
    return tree_util.tree_map(one, in_tree)


def broadcast_one_to_all(in_tree, is_source: bool | None = None):
    """Process 0's leaves (or those of the process with ``is_source``) on every process, as
    NumPy arrays."""
    if is_source is None:
        is_source = process_index() == 0
    gathered = process_allgather(
        tree_util.tree_map(lambda x: np.asarray(x) if is_source else np.zeros_like(x), in_tree))
    flags = process_allgather(np.asarray(bool(is_source)))
    source = int(np.argmax(flags))
    return tree_util.tree_map(lambda g: np.asarray(g[source]), gathered)


def sync_global_devices(name: str) -> None:
    """A barrier across processes (every process must call it with the same ``name``)."""
    h = np.asarray(zlib.crc32(name.encode()), np.uint32)
    assert_equal(h, f"sync_global_devices name mismatch ({name!r})")


def assert_equal(in_tree, fail_message: str = "") -> None:
    """Raise AssertionError unless every process holds the same values of ``in_tree``."""
    for g in tree_util.tree_leaves(process_allgather(in_tree)):
        if not all(np.array_equal(g[0], g[i]) for i in range(1, g.shape[0])):
            raise AssertionError(f"{fail_message} Expected equal values on every process, "
                                 f"got {g}.".strip())
