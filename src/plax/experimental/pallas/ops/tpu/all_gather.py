"""An all-gather written as a Pallas kernel, as ``jax.experimental.pallas.ops.tpu.all_gather``.

``all_gather(x, mesh=, axis_name=)`` gathers the shards of ``x`` (split along its first
dimension over one mesh axis) onto every device, as ``lax.all_gather(..., tiled=True)``
would. The devices of the axis form a ring: each copies its own shard into its slot of the
output, then, ``axis_size - 1`` times, forwards a slot to each neighbour with remote DMAs,
its first half leftwards and its second half rightwards, so that every half travels at most
half way round. The slot sent at each step is the one received at the step before.

plax's kernel has no barrier handshake before the first remote copy (plax has no
``pltpu.get_barrier_semaphore`` yet). In interpret mode (any backend but a TPU) the devices
run in step; compiled for a TPU, the kernel needs remote DMAs in plax's Mosaic lowering.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import plax
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

__all__ = ["P", "get_neighbor", "ag_kernel", "all_gather"]

P = plax.sharding.PartitionSpec


def get_neighbor(idx, mesh, axis_name: str, *, direction: str) -> tuple:
    """The mesh coordinates of the device next to position ``idx`` of ``axis_name``
    (``direction``: "left" or "right", wrapping round the ring); the other axes keep this
    device's coordinates."""
    if direction not in ("left", "right"):
        raise ValueError(f"direction must be 'left' or 'right', got {direction!r}")
    size = lax.axis_size(axis_name)
    step = 1 if direction == "right" else size - 1
    return tuple(lax.rem(idx + step, size) if name == axis_name else lax.axis_index(name)
                 for name in mesh.axis_names)


def ag_kernel(x_ref, o_ref, send_sem, recv_sem, *, axis_name: str, mesh):
    """The all-gather kernel body: ``x_ref`` this device's shard, ``o_ref`` [axis_size,
    *shard] the gathered output, ``send_sem``/``recv_sem`` pairs (left, right) of DMA
    semaphores."""
    me = lax.axis_index(axis_name)
    size = lax.axis_size(axis_name)
    pltpu.async_copy(x_ref, o_ref.at[me], recv_sem[0]).wait()
    left = get_neighbor(me, mesh, axis_name, direction="left")
    right = get_neighbor(me, mesh, axis_name, direction="right")
    rows = x_ref.shape[0]
    halves = ((pl.ds(0, rows // 2), left, 0, 1), (pl.ds(rows // 2, rows - rows // 2), right, 1, -1))
    pending = []
    for step in range(size - 1):
        for copy in pending:  # the slot forwarded now is the one these copies delivered
            copy.wait()
        pending = []
        for rows_of, neighbor, sem, toward in halves:
            if rows_of.size == 0:
                continue
            slot = lax.rem(me + toward * step + step * size, size)
            copy = pltpu.make_async_remote_copy(o_ref.at[slot, rows_of], o_ref.at[slot, rows_of],
                                                send_sem[sem], recv_sem[sem], device_id=neighbor)
            copy.start()
            pending.append(copy)
    for copy in pending:
        copy.wait()


def _kernel(x_ref, o_ref, send_left, send_right, recv_left, recv_right, *, axis_name, mesh):
    ag_kernel(x_ref, o_ref, (send_left, send_right), (recv_left, recv_right),
              axis_name=axis_name, mesh=mesh)


@functools.partial(plax.jit, static_argnames=["mesh", "axis_name", "memory_space"])
def all_gather(x, *, mesh, axis_name: str | Sequence[str], memory_space=pltpu.VMEM):
    """``x`` (sharded along its first dimension over ``axis_name`` of ``mesh``) gathered
    whole onto every device of the axis, by the ring kernel ``ag_kernel``."""
    names = (axis_name,) if isinstance(axis_name, str) else tuple(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"Only one axis supported (got axis_name={axis_name!r}).")
    (name,) = names
    if mesh.shape[name] == 1:
        return x

    def gather_local(shard):
        size = lax.axis_size(name)
        out = pl.pallas_call(
            functools.partial(_kernel, axis_name=name, mesh=mesh),
            out_shape=plax.ShapeDtypeStruct((size, *shard.shape), shard.dtype),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=0, scratch_shapes=[pltpu.SemaphoreType.DMA] * 4,
                in_specs=[pl.BlockSpec(memory_space=memory_space)],
                out_specs=pl.BlockSpec(memory_space=memory_space)),
            compiler_params=pltpu.CompilerParams(collective_id=0),
            interpret=plax.default_backend() != "tpu", name="all_gather",
        )(shard)
        return out.reshape((size * shard.shape[0], *shard.shape[1:]))

    return plax.shard_map(gather_local, mesh=mesh, in_specs=P(name), out_specs=P(None),
                          check_vma=False)(x)
