"""Remote DMAs and semaphore signals in interpret mode, between the devices of the one named
axis of an enclosing ``shard_map``.

Every device runs the same kernel, so each remote operation is issued by all of them at
once: a device learns who targets it by gathering the targets' ids over the axis
(``all_gather``) and receives from the device that does (one sender per receiver, as on the
chip). A remote copy's data and destination view come from the sender; its receive
semaphore counts the elements received, its send semaphore those sent. A remote signal adds
every increment aimed at the device. Outside a ``shard_map`` (no named axis) or over
several named axes they raise.
"""
from __future__ import annotations

import numpy as np

from plax.core.trace import axis_env
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import arithmetic, collectives, comparison, conversion, reductions
from plax.first_order import slicing

__all__ = ["REMOTE_ERROR", "remote_axis", "device_index", "receive", "signals_for_me"]

REMOTE_ERROR = (
    "Remote DMAs and signals (make_async_remote_copy, a device_id) copy between the devices "
    "of a multi-device kernel: in interpret mode, run the pallas_call inside a shard_map "
    "over one named mesh axis (or compiled, on a TPU).")


def remote_axis(device_id, device_id_type) -> str:
    """The named axis remote operations run over, with the checks of ``device_id``."""
    names = [name for name, _ in axis_env() if name is not None]
    if not names:
        raise NotImplementedError(REMOTE_ERROR)
    if getattr(device_id_type, "value", device_id_type) == "logical":
        if len(names) > 1:
            raise NotImplementedError("Sharding with more than one named axis not implemented "
                                      "in dma_start_p for LOGICAL device_id_type.")
        return names[-1]
    if isinstance(device_id, (tuple, list)) and len(device_id) != len(names):
        raise ValueError(f"device_id ({len(device_id)}) and mesh ({len(names)}) must have "
                         "same length.")
    if len(names) > 1:
        raise NotImplementedError("Meshes with more than 1 named dimension not implemented in "
                                  "dma_start_p")
    return names[0]


def device_index(device_id, axis: str):
    """The target's position along ``axis`` (an int32 scalar) from a ``device_id`` (an int,
    a one-element tuple, or a dict by axis name)."""
    if isinstance(device_id, dict):
        device_id = device_id.get(axis, collectives.axis_index(axis))
    if isinstance(device_id, (tuple, list)):
        (device_id,) = device_id
    if isinstance(device_id, (int, np.integer)):
        return np.int32(device_id)
    return conversion.convert_element_type(device_id, np.int32)


def _sender(target, axis: str):
    """``(whether a device targets this one, the position of the one that does)``."""
    aimed = comparison.eq(collectives.all_gather(target, axis),
                          collectives.axis_index(axis))
    return reductions.reduce_or(aimed, (0,)), reductions.argmax(aimed, 0, np.int32)


def _from(x, index, axis: str):
    """``x`` as the device at ``index`` along ``axis`` holds it."""
    gathered = collectives.all_gather(x, axis)
    return slicing.dynamic_index_in_dim(gathered, index, 0, keepdims=False)


def receive(data, dst_transforms, target, axis: str):
    """What this device receives of a remote copy every device issues: ``(received (a
    bool), the sender's data, the sender's destination transforms)``."""
    received, index = _sender(target, axis)
    leaves, tree = tree_flatten(tuple(dst_transforms))
    # (static parts of the index are the same on every device)
    leaves = [x if isinstance(x, (int, np.integer)) else _from(x, index, axis) for x in leaves]
    return received, _from(data, index, axis), tree_unflatten(tree, leaves)


def signals_for_me(inc, target, axis: str):
    """The sum of the increments of a remote signal every device issues that are aimed at
    this one (int32)."""
    targets = collectives.all_gather(target, axis)
    incs = collectives.all_gather(inc, axis)
    aimed = comparison.eq(targets, collectives.axis_index(axis))
    zeros = arithmetic.mul(incs, np.int32(0))
    return reductions.reduce_sum(comparison.select_n(aimed, zeros, incs), (0,))
