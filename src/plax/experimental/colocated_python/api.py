"""colocated_cpu_devices, colocated_python and colocated_python_class."""
from __future__ import annotations

import collections
import functools

import numpy as np

from plax.api.devices import devices as _all_devices
from plax.experimental.colocated_python.func import make_callable
from plax.experimental.colocated_python.obj import wrap_class
from plax.sharding import Mesh


def colocated_cpu_devices(devices_or_mesh):
    """The CPU devices colocated with ``devices_or_mesh`` (devices, or a Mesh: then a Mesh of
    the same shape and axes). A CPU device is its own; accelerator devices take their
    process's CPU devices one to one, in order."""
    if isinstance(devices_or_mesh, Mesh):
        mesh = devices_or_mesh
        flat = _colocated(tuple(mesh.devices.flat))
        return Mesh(np.array(flat, dtype=object).reshape(mesh.devices.shape), mesh.axis_names,
                    axis_types=mesh.axis_types)
    return list(_colocated(tuple(devices_or_mesh)))


@functools.lru_cache(maxsize=1024)
def _colocated(devices: tuple) -> tuple:
    if all(d.platform == "cpu" for d in devices):
        return devices
    free = collections.defaultdict(list)  # process -> its CPU devices not yet taken
    for d in reversed(_all_devices("cpu")):
        free[d.process_index].append(d)
    out = []
    for d in devices:
        if d.platform == "cpu":
            out.append(d)
            continue
        if not free[d.process_index]:
            raise ValueError(f"Process {d.process_index} does not have enough local CPU "
                             f"devices for {len(devices)} devices; start plax with more "
                             "(PLAX_NUM_CPU_DEVICES).")
        out.append(free[d.process_index].pop())
    return tuple(out)


def colocated_python(fun):
    """``fun`` as a colocated Python callable: called with arrays, it runs on their devices'
    host (here) and returns arrays on those devices. ``.specialize(in_specs=...,
    out_specs_fn=..., devices=...)`` fixes its input specs, how its output specs follow
    from them, or its devices (needed when it takes no arrays)."""
    return make_callable(fun)


def colocated_python_class(cls):
    """A wrapper class whose instances make the real ``cls`` object on the host of the devices
    of the first method call's arrays, and run each method there as a colocated call."""
    return wrap_class(cls)
