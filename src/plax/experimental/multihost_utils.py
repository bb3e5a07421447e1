"""plax.experimental.multihost_utils: moving values between processes and global arrays (as
``jax.experimental.multihost_utils``).

Every function goes through the mesh of all devices and one jitted program, so the same code
serves one process (where local data is the whole array) and several (where each process
contributes its devices' part).
"""
from __future__ import annotations

import zlib

import numpy as np

import contextlib

from plax import tree_util
from plax.api.devices import device_put, devices, process_count, process_index
from plax.api.jit import jit
from plax.api.arrays import make_array_from_process_local_data
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, impl_rules, register_lowering,
                             transpose_rules)
from plax.core.trace import Tracer
from plax.first_order.ad_util import deflinear, instantiate
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


def _local_to_global(x, *, global_mesh, pspec):
    if process_count() > 1 or type(x) not in CONCRETE:
        return make_array_from_process_local_data(
            NamedSharding(global_mesh, pspec), np.asarray(x) if type(x) not in CONCRETE else x)
    return device_put(x, NamedSharding(global_mesh, pspec))


def _global_to_local(x, *, global_mesh, pspec):
    if process_count() > 1:
        raise NotImplementedError(
            "global_array_to_host_local_array across processes needs the distributed runtime "
            "(plax.distributed), which is not available yet.")
    return device_put(x, NamedSharding(global_mesh, pspec))


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
    """The devices of ``devices`` whose processes are alive, for a fault-tolerant
    multi-process program. It needs the distributed runtime: without it (plax has none yet),
    it raises JAX's RuntimeError, as JAX's does in a program that never called
    ``jax.distributed.initialize``."""
    raise RuntimeError("Distributed JAX not initialized.")
    yield devices  # (unreachable: makes this a generator)


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
