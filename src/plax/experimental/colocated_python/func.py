"""Colocated Python callables: specialisation, device inference, and checked execution."""
from __future__ import annotations

import dataclasses
import functools
import threading

from plax import tree_util
from plax.core.shape_dtype_struct import ShapeDtypeStruct
from plax.runtime.array import Array


@dataclasses.dataclass(frozen=True)
class Specialization:
    """What a colocated callable was specialised with: input specs (a pytree of
    ShapeDtypeStruct for ``(args, kwargs)``), a function from input to output specs, the
    output specs once known, and the devices."""
    in_specs: object = None
    out_specs_fn: object = None
    out_specs: object = None
    devices: tuple | None = None

    def update(self, **changes) -> "Specialization":
        for name, value in changes.items():
            if value is not None and getattr(self, name) is not None:
                raise ValueError(f"{name} already specified")
        merged = {k: v for k, v in changes.items() if v is not None}
        if merged.get("devices") is not None:
            merged["devices"] = tuple(merged["devices"])
        return dataclasses.replace(self, **merged)


def spec_of(x) -> ShapeDtypeStruct:
    """The ShapeDtypeStruct of an argument or result (an Array: with its sharding)."""
    if isinstance(x, ShapeDtypeStruct):
        return x
    if isinstance(x, Array):
        return ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
    raise ValueError(f"colocated_python only supports jax.Array as input and output, but got "
                     f"{type(x)}. Put host data on the devices first with plax.device_put.")


def devices_of(leaves) -> tuple | None:
    """The one device list every array leaf uses (None without arrays)."""
    found = {tuple(x.sharding._device_assignment) for x in leaves if isinstance(x, Array)}
    if not found:
        return None
    if len(found) != 1:
        raise ValueError(f"All arguments must use the same device list, but got multiple "
                         f"device lists: {sorted(found, key=str)}.")
    return found.pop()


def _same_specs(got, want, what: str) -> None:
    got_leaves, got_tree = tree_util.tree_flatten(got)
    want_leaves, want_tree = tree_util.tree_flatten(want)
    if got_tree != want_tree:
        raise ValueError(f"colocated Python {what} have the structure {got_tree}, but the "
                         f"specialization says {want_tree}.")
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if (g.shape, g.dtype) != (w.shape, w.dtype) or (
                w.sharding is not None and g.sharding is not None and g.sharding != w.sharding):
            raise ValueError(f"colocated Python {what}, leaf {i}: got {g}, but the "
                             f"specialization says {w}.")


def make_callable(fun, specialization: Specialization | None = None):
    """The colocated callable of ``fun`` under ``specialization``."""
    spec = specialization or Specialization()
    lock = threading.Lock()
    known_out = [spec.out_specs]  # output specs, once the first call or out_specs_fn says

    @functools.wraps(fun)
    def call(*args, **kwargs):
        leaves = tree_util.tree_leaves((args, kwargs))
        if not leaves and spec.devices is None:
            raise ValueError("No devices found. colocated_python function without input "
                             "arguments must be first specialized with devices.")
        in_specs = tree_util.tree_map(spec_of, (args, kwargs))
        if spec.in_specs is not None:
            _same_specs(in_specs, spec.in_specs, "arguments")
        devices = devices_of(leaves)
        if spec.devices is not None and devices is not None and devices != spec.devices:
            raise ValueError(f"colocated Python arguments are on {list(devices)}, but the "
                             f"function is specialized to {list(spec.devices)}.")
        devices = devices or spec.devices
        with lock:
            if known_out[0] is None and spec.out_specs_fn is not None:
                known_out[0] = spec.out_specs_fn(*in_specs[0], **in_specs[1])
        result = fun(*args, **kwargs)
        out_leaves = tree_util.tree_leaves(result)
        out_specs = tree_util.tree_map(spec_of, result)
        out_devices = devices_of(out_leaves)
        if out_devices is not None and set(out_devices) - set(devices):
            raise ValueError(f"colocated Python function returned arrays on {list(out_devices)}"
                             f", outside its devices {list(devices)}.")
        with lock:
            if known_out[0] is None:
                known_out[0] = out_specs
            else:
                _same_specs(out_specs, known_out[0], "results")
        return result

    def specialize(in_specs=None, out_specs_fn=None, devices=None):
        """A colocated callable with input specs, an output-spec function, or devices fixed."""
        return make_callable(fun, spec.update(in_specs=in_specs, out_specs_fn=out_specs_fn,
                                              devices=devices))

    call.specialize = specialize
    return call
