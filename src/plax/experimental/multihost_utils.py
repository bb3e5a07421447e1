"""plax.experimental.multihost_utils: moving values between processes and global arrays (as
``jax.experimental.multihost_utils``).

Every function goes through the mesh of all devices and one jitted program, so the same code
serves one process (where local data is the whole array) and several (where each process
contributes its devices' part).
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from plax import tree_util
from plax.api.devices import device_put, devices, process_count, process_index
from plax.api.jit import jit
from plax.api.arrays import assemble_shards, make_array_from_process_local_data
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, impl_rules, register_lowering,
                             transpose_rules)
from plax.core.trace import Tracer
from plax.first_order.ad_util import deflinear, instantiate
from plax.runtime import dispatch, distributed
from plax.runtime.array import CONCRETE
from plax.sharding.mesh import Mesh
from plax.sharding.named import NamedSharding
from plax.sharding.partition_spec import PartitionSpec

__all__ = ["host_local_array_to_global_array", "global_array_to_host_local_array",
           "process_allgather", "broadcast_one_to_all", "sync_global_devices", "assert_equal",
           "host_local_array_to_global_array_p", "global_array_to_host_local_array_p",
           "live_devices", "ProcessFailureError", "reached_preemption_sync_point"]


def _specs(pspecs, tree):
    is_leaf = lambda s: s is None or isinstance(s, PartitionSpec)  # noqa: E731
    if is_leaf(pspecs):
        return [pspecs or PartitionSpec()] * len(tree_util.tree_leaves(tree))
    return [s or PartitionSpec()
            for s in tree_util.broadcast_prefix(pspecs, tree, is_leaf=is_leaf, name="pspecs")]


def _process_factor(global_mesh, pspec, ndim: int) -> list:
    """Per dimension: how many processes' parts make up its global extent under ``pspec``
    (the mesh axes splitting it, over the part of them on this process's devices)."""
    local = global_mesh.local_mesh
    out = []
    for i in range(ndim):
        entry = pspec[i] if i < len(pspec) else None
        axes = () if entry is None else (entry if isinstance(entry, tuple) else (entry,))
        out.append(math.prod(global_mesh.shape[a] // local.shape[a] for a in axes))
    return out


def _local_to_global(x, *, global_mesh, pspec):
    sharding = NamedSharding(global_mesh, pspec)
    if not global_mesh.is_multi_process:
        if type(x) not in CONCRETE:
            return make_array_from_process_local_data(sharding, np.asarray(x))
        return device_put(x, sharding)
    if type(x) in CONCRETE and not x.is_fully_addressable:
        return x  # already global
    factor = _process_factor(global_mesh, pspec, np.ndim(x))
    global_shape = tuple(n * f for n, f in zip(np.shape(x), factor))
    local = NamedSharding(global_mesh.local_mesh, pspec)
    if type(x) in CONCRETE and x.sharding.is_equivalent_to(local, x.ndim):
        # Each local device's shard of ``x`` is its shard of the global array: no copy.
        pieces = {s.device: s.data for s in x.addressable_shards}
        return assemble_shards(global_shape, sharding, pieces, x.dtype, x.weak_type)
    return make_array_from_process_local_data(sharding, np.asarray(x), global_shape)


def _global_to_local(x, *, global_mesh, pspec):
    sharding = NamedSharding(global_mesh, pspec)
    if not global_mesh.is_multi_process:
        return device_put(x, sharding)
    if type(x) not in CONCRETE:  # host data: the whole global value, on every process
        x = device_put(np.asarray(x), sharding)
    elif not x.sharding.is_equivalent_to(sharding, x.ndim):
        x = dispatch.reshard(x, sharding)
    factor = _process_factor(global_mesh, pspec, x.ndim)
    local_shape = tuple(n // f for n, f in zip(x.shape, factor))
    # Each local device's shard of the global array is its shard of the local one.
    pieces = {s.device: s.data for s in x.addressable_shards}
    return assemble_shards(local_shape, NamedSharding(global_mesh.local_mesh, pspec), pieces,
                           x.dtype, x.weak_type)


# One primitive each, as in JAX: eagerly they move data; traced (under jit) they are the
# identity, and in one process a host-local value's type is its global type.
host_local_array_to_global_array_p = Primitive("host_local_array_to_global_array")
global_array_to_host_local_array_p = Primitive("global_array_to_host_local_array")


def _same_type(x, *, global_mesh, pspec):
    return ShapedArray(x.shape, x.dtype, weak_type=x.weak_type)


def _batch_rule(prim):
    def rule(axis, vals, dims, *, global_mesh, pspec):
        (x,), (d,) = vals, dims
        if d is None:
            return prim.bind(x, global_mesh=global_mesh, pspec=pspec), None
        parts = list(pspec) + [None] * (d - len(pspec))
        parts.insert(d, None)  # the mapped dimension is not split
        return prim.bind(x, global_mesh=global_mesh, pspec=PartitionSpec(*parts)), d
    return rule


for _prim, _impl in ((host_local_array_to_global_array_p, _local_to_global),
                     (global_array_to_host_local_array_p, _global_to_local)):
    abstract_eval_rules[_prim] = _same_type
    impl_rules[_prim] = _impl
    register_lowering(_prim, lambda ctx, x, **params: x)
    deflinear(_prim)  # linear, and (as in JAX) its own transpose
    transpose_rules[_prim] = lambda ct, x, _p=_prim, **params: [_p.bind(instantiate(ct),
                                                                        **params)]
    batch_rules[_prim] = _batch_rule(_prim)


def _convert(prim, inputs, global_mesh, pspecs):
    leaves, tree = tree_util.tree_flatten(inputs)
    out = [prim.bind(x, global_mesh=global_mesh, pspec=s) if isinstance(x, Tracer)
           else impl_rules[prim](x, global_mesh=global_mesh, pspec=s)
           for x, s in zip(leaves, _specs(pspecs, inputs))]
    return tree_util.tree_unflatten(tree, out)


def host_local_array_to_global_array(local_inputs, global_mesh: Mesh, pspecs):
    """Each process's host-local leaves as global Arrays laid out over ``global_mesh`` by
    ``pspecs`` (a pytree prefix of PartitionSpecs); one process: the leaves as they are.
    Under jit, the identity."""
    return _convert(host_local_array_to_global_array_p, local_inputs, global_mesh, pspecs)


def global_array_to_host_local_array(global_inputs, global_mesh: Mesh, pspecs):
    """Global Arrays as this process's host-local ones (laid out by ``pspecs`` over its
    devices); one process: the arrays laid out by ``pspecs`` over ``global_mesh``. Under jit,
    the identity."""
    return _convert(global_array_to_host_local_array_p, global_inputs, global_mesh, pspecs)


class ProcessFailureError(Exception):
    """Raised by ``live_devices`` when processes have failed; ``failed_devices`` is the set
    of their devices."""

    def __init__(self, failed_devices):
        super().__init__(f"Devices failed: {failed_devices}")
        self.failed_devices = failed_devices


@contextlib.contextmanager
def live_devices(devices):
    """A block of code run on those of ``devices`` whose processes are alive (JAX's
    experimental fault-tolerance API). Entering waits for every live process hosting some
    of ``devices`` (so all agree on the set) and yields its devices, sorted by id. Leaving
    meets those processes again: if any died meanwhile, every survivor raises
    ProcessFailureError naming the lost devices (chained to the block's own error, if any).

    After a death, plax runs no more programs that span processes (they raise
    ``plax.distributed.PeerFailureError``): the run has to be restarted."""
    if not distributed.is_initialized():
        raise RuntimeError("Distributed JAX not initialized.")
    devices = list(devices)
    if not devices:
        raise ValueError("No devices provided.")
    processes = {d.process_index for d in devices}
    if process_index() not in processes:
        raise ValueError(f"Provided devices do not have any local devices: live_devices "
                         f"needs some of process {process_index()}'s devices, and got devices "
                         f"of processes {sorted(processes)} only.")
    alive = distributed.meet_live(processes)
    error = None
    try:
        yield sorted((d for d in devices if d.process_index in alive), key=lambda d: d.id)
    except Exception as e:  # noqa: BLE001 (re-raised below, or chained to the failure)
        error = e
    still_alive = distributed.meet_live(alive)
    failed = {d for d in devices if d.process_index in alive - still_alive}
    if failed:
        raise ProcessFailureError(failed) from error
    if error is not None:
        raise error


def reached_preemption_sync_point(step_id: int) -> bool:
    """Whether every process has reached the step at which to save a checkpoint after a
    preemption notice; one process never has (False), as in JAX."""
    if process_count() == 1:
        return False
    raise RuntimeError("Preemption sync manager has not been initialized. Make sure the "
                       "'jax_enable_preemption_service' config is enabled.")


def _all_devices_mesh() -> Mesh:
    devs = devices()
    n = process_count()
    grid = np.array(sorted(devs, key=lambda d: (d.process_index, d.id)), dtype=object)
    return Mesh(grid.reshape(n, len(devs) // n), ("processes", "local"))


def _gather_global(x) -> np.ndarray:
    """The whole value of an array spanning several processes, on this one."""
    s = x.sharding
    mesh = s.mesh if isinstance(s, NamedSharding) else \
        Mesh(np.array(s._device_assignment, dtype=object), ("devices",))
    replicated = NamedSharding(mesh, PartitionSpec())
    return np.asarray(jit(lambda v: v, out_shardings=replicated)(x))


def process_allgather(in_tree, tiled: bool = False):
    """Every process's leaves of ``in_tree``, as NumPy arrays: stacked along a new leading axis
    (one entry per process), or concatenated along the first axis when ``tiled``. A leaf that
    is a global array (spanning processes) is gathered whole, which needs ``tiled=True``."""
    mesh = _all_devices_mesh()
    by_process = NamedSharding(mesh, PartitionSpec("processes"))
    replicated = NamedSharding(mesh, PartitionSpec())
    gather = jit(lambda x: x, out_shardings=replicated)

    def one(x):
        if type(x) in CONCRETE and not x.is_fully_addressable:
            if not tiled:
                raise ValueError("Gathering global non-fully-addressable arrays only supports "
                                 "tiled=True: such an array already holds every process's "
                                 "part; pass tiled=True to get its whole value.")
            return _gather_global(x)
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


_syncs = [0]  # sync_global_devices calls made by this process (the same count on every one)


def sync_global_devices(name: str) -> None:
    """A barrier across processes: returns once every process has called it (with the same
    ``name``: a different one raises AssertionError). A name may be used again."""
    if process_count() == 1:
        return
    run = distributed.current()
    call = _syncs[0]
    _syncs[0] += 1
    prefix = f"plax/sync_global_devices/{call}/"
    run.client.key_value_set(prefix + str(run.process_id), name)
    distributed.barrier("plax_sync_global_devices")
    for pid in range(run.num_processes):
        other = run.client.blocking_key_value_get(prefix + str(pid), 60_000)
        if other != name:
            raise AssertionError(f"sync_global_devices name mismatch ('{name}'): process "
                                 f"{pid} called it with {other!r} at the same point.")


def assert_equal(in_tree, fail_message: str = "") -> None:
    """Raise AssertionError unless every process holds the same values of ``in_tree`` (a
    global array, one value across the processes, agrees with itself)."""
    leaves, tree = tree_util.tree_flatten(in_tree)
    local = [x for x in leaves if not (type(x) in CONCRETE and not x.is_fully_addressable)]
    gathered = process_allgather(local, tiled=True)
    for x, g in zip(local, gathered):
        x = np.asarray(x)
        if not np.array_equal(np.concatenate([x.reshape(-1) if x.ndim == 0 else x] *
                                             process_count()), g):
            raise AssertionError(f"{fail_message}. Expected: {g}; got: {x}.")
