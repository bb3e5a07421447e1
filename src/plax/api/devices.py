"""Devices and data: which devices there are, and moving values between host and devices
(``device_put``, ``device_get``, ``block_until_ready``, ...). Re-exported by ``plax.api.jit``."""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.trace import Tracer, current_trace
from plax.runtime import dispatch, transfer_guards, xla
from plax.runtime.array import CONCRETE, all_arrays, buffer_of
from plax.sharding import (AbstractMesh, NamedSharding, PartitionSpec, Sharding,
                           SingleDeviceSharding)
from plax.sharding.layouts import Format, Layout, default_layout
from plax.sharding.named import resolve_spec


# --- devices ----------------------------------------------------------------------------
def devices(backend=None) -> list:
    """All devices of ``backend`` (the default platform when None)."""
    return list(xla.get_backend(backend).devices())


def local_devices(process_index: int | None = None, backend=None) -> list:
    """The devices attached to process ``process_index`` (this one when None)."""
    client = xla.get_backend(backend)
    pid = client.process_index() if process_index is None else process_index
    return [d for d in client.devices() if d.process_index == pid]


def device_count(backend=None) -> int:
    return len(xla.get_backend(backend).devices())


def local_device_count(backend=None) -> int:
    return len(xla.get_backend(backend).local_devices())


def process_index(backend=None) -> int:
    return xla.get_backend(backend).process_index()


def process_count(backend=None) -> int:
    return max(d.process_index for d in xla.get_backend(backend).devices()) + 1


def process_indices(backend=None) -> list:
    """The indices of every process holding devices of ``backend``."""
    return sorted({d.process_index for d in xla.get_backend(backend).devices()})


# The older names of the process functions (a process was once called a host).
host_id, host_count, host_ids = process_index, process_count, process_indices


def default_backend() -> str:
    """The platform of the default backend: "cpu", or "gpu" on NVIDIA GPUs (as JAX names it)."""
    platform = xla.default_platform()
    return "gpu" if platform in ("cuda", "rocm") else platform


def copy_to_host_async(x):
    """Start copying every Array leaf of ``x`` to the host (reads of them then wait less)."""
    for leaf in tree_util.tree_leaves(x):
        if type(leaf) in CONCRETE:
            leaf.copy_to_host_async()
    return x


def print_environment_info(return_string: bool = False):
    """The versions of plax, jaxlib, NumPy and Python, and the devices (printed, or returned
    with ``return_string=True``)."""
    import platform
    from plax.version import __version__
    lines = [f"plax:    {__version__}", f"jaxlib:  {xla.jaxlib_version()}",
             f"numpy:   {np.__version__}",
             f"python:  {platform.python_version()} ({platform.platform()})",
             f"devices: {device_count()} ({default_backend()}): {devices()}"]
    text = "\n".join(lines)
    if return_string:
        return text
    print(text)


# --- data -------------------------------------------------------------------------------
def resolve_device(device):
    """What ``device_put`` puts a leaf on: None, a Device, or a multi-device Sharding."""
    if device is None or isinstance(device, xla.Device):
        return device
    if isinstance(device, PartitionSpec):
        return resolve_spec(device, "device_put")
    if isinstance(device, NamedSharding) and isinstance(device.mesh, AbstractMesh):
        return device  # a type's sharding: usable under jit only (see put_leaf)
    devs = getattr(device, "device_set", None)
    if devs is not None:
        if isinstance(device, SingleDeviceSharding) and device.memory_kind in (None, "device"):
            return next(iter(devs))  # (another memory kind keeps the sharding, to place by)
        return device
    raise ValueError(f"device_put only accepts None, a Sharding, a PartitionSpec or a Device as "
                     f"its device. Received invalid value: {device!r} (of type "
                     f"{type(device).__name__}); pick one of plax.devices() instead.")


def _is_placement(x) -> bool:
    return x is None or isinstance(x, (xla.Device, Sharding, PartitionSpec, Format))


def _placement_of_format(leaf, fmt: Format):
    """The sharding a ``Format`` places ``leaf`` by, once its layout is one plax gives: none
    (XLA's choice) or the default row-major one."""
    ndim = np.ndim(leaf)
    if fmt.layout is not None and fmt.layout != default_layout(ndim):
        if fmt.layout is Layout.AUTO:
            raise ValueError(f"device_put: sharding and layout in `Format` should be concrete; "
                             f"got {fmt} for an array of shape {np.shape(leaf)}. Pass a Layout "
                             "or None (the default layout).")
        raise NotImplementedError(
            f"device_put: plax places arrays in XLA's default layout "
            f"({default_layout(ndim)} for shape {np.shape(leaf)}), not in {fmt.layout}. Pass "
            "Format(None, sharding), or the sharding alone.")
    return fmt.sharding


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """Put the leaves of ``x`` on ``device``: a Device, a Sharding (laid out over its
    devices), a PartitionSpec (over the context mesh), a Format (its sharding, in the default
    layout), or a pytree prefix of these. With a placement given, the result is committed."""
    def put_leaf(leaf, target):
        out = put_one(leaf, target)
        if isinstance(leaf, Tracer) or isinstance(out, np.ndarray):
            return out
        return current_trace().staged_constant(out)  # under jit, a tracer as in JAX

    def put_one(leaf, target):
        if isinstance(target, Format):
            target = _placement_of_format(leaf, target)
        dev = resolve_device(target)
        if isinstance(leaf, Tracer):
            if isinstance(dev, NamedSharding):  # under jit: the layout, or the type, asked for
                from plax.first_order import sharding_constraint as pin
                explicit = dev.mesh.explicit_axes
                return pin.reshard(leaf, dev) if explicit else \
                    pin.with_sharding_constraint(leaf, dev)
            return leaf
        if isinstance(leaf, np.ndarray) and leaf.dtype == dtypes.float0:
            return leaf  # float0 holds no data: it stays on the host, as in JAX
        if isinstance(dev, NamedSharding) and isinstance(dev.mesh, AbstractMesh):
            raise ValueError(
                "is_fully_addressable is not implemented for `plax.sharding.AbstractMesh`: "
                f"device_put cannot place data by {dev}, whose mesh has no devices. Pass "
                "NamedSharding(mesh, spec) with a concrete mesh, or a PartitionSpec under "
                "plax.set_mesh(mesh).")
        if isinstance(dev, Sharding):
            out = dispatch.reshard(leaf, dev) if type(leaf) in CONCRETE else \
                dispatch.put_sharded(leaf, dev)
        elif type(leaf) in CONCRETE:
            if dev is None:
                return leaf
            out = dispatch.to_device(leaf, dev, committed=True)
        else:
            return dispatch.array_from_host(leaf, device=dev, committed=dev is not None)
        if donate and type(leaf) in CONCRETE and out is not leaf:
            leaf.delete()
        return out

    with transfer_guards.explicit_transfer("put"):  # (the transfer guards let explicit puts through)
        if _is_placement(device):
            return tree_util.tree_map(lambda leaf: put_leaf(leaf, device), x)
        leaves, tree = tree_util.tree_flatten(x)
        targets = tree_util.broadcast_prefix(device, x, is_leaf=_is_placement,
                                             name="device_put")
        return tree.unflatten([put_leaf(leaf, t) for leaf, t in zip(leaves, targets)])


def device_get(x):
    """Fetch the leaves of ``x`` to host NumPy arrays (other leaves, traced values included,
    pass through, as in JAX)."""
    leaves = tree_util.tree_leaves(x)
    for leaf in leaves:
        if type(leaf) in CONCRETE:
            leaf.copy_to_host_async()

    def get_leaf(leaf):
        if type(leaf) in CONCRETE:  # typed PRNG keys have no NumPy form: they stay keys
            return leaf if dtypes.is_extended(leaf.dtype) else np.asarray(leaf)
        return leaf

    with transfer_guards.explicit_transfer("get"):
        return tree_util.tree_map(get_leaf, x)


def block_until_ready(x):
    """Wait until every Array leaf of ``x`` is computed; returns ``x``."""
    bufs = [buffer_of(leaf) for leaf in tree_util.tree_leaves(x) if type(leaf) in CONCRETE]
    if bufs:
        xla.block_until_ready(bufs)
    return x


def live_arrays(platform=None) -> list:
    """Every Array that is alive (not deleted), optionally only on ``platform``."""
    out = [a for a in all_arrays() if not a.is_deleted()]
    if platform is not None:
        out = [a for a in out if next(iter(a.devices())).platform == platform]
    return out
