"""``plax.experimental.serialize_executable``: a compiled function as bytes, and back.

``serialize(compiled)`` gives ``(payload, in_tree, out_tree)``; ``deserialize_and_load``
rebuilds a ``Compiled`` from them, in this process or another one on a machine with the
same jaxlib and devices. As in JAX, the pytree structures are handed back separately (the
caller keeps or rebuilds them).

The payload is plax's own container: a magic line, a format version, then a pickle of what
running the executable takes besides XLA's machine code (the argument and result types,
which arguments the program keeps, donations, constants the function closed over as NumPy
arrays, the device it was compiled for, the StableHLO text) with jaxlib's serialised
executable. Loading it runs machine code and unpickles data: never load a payload from a
source you do not trust.

Devices are written as their ids and found again by id among the devices the payload is
loaded for. Programs with host callbacks or ordered effects, or with PRNG key arrays among
their arguments or results, are refused with an error saying so.
"""
from __future__ import annotations

import io
import pickle

import numpy as np

from plax.api.stages import Compiled
from plax.core import dtypes
from plax.lowering.stablehlo import ModuleText
from plax.runtime import dispatch, jitted, spmd, xla

__all__ = ["serialize", "deserialize_and_load"]

_MAGIC = b"PLAX-SERIALIZED-EXECUTABLE\n"
_FORMAT = 1


def _check_serializable(compiled) -> None:
    if not isinstance(compiled, Compiled):
        raise TypeError("serialize takes a compiled function (plax.jit(f).lower(...).compile())"
                        f", got {type(compiled).__name__}.")
    exe = compiled._exe
    program = exe if isinstance(exe, spmd.SpmdProgram) else exe.program
    if program.text.host_callbacks or program.text.takes_token:
        raise ValueError("Compilation does not support serialization: the program calls back "
                         "into Python (host callbacks or ordered effects), whose functions "
                         "cannot be written out.")
    for what, avals in (("argument", program.in_avals), ("result", program.out_avals)):
        if any(dtypes.is_extended(a.dtype) for a in avals):
            raise NotImplementedError(f"serialize: a PRNG key array is an {what} of this "
                                      "program; pass and return its key_data instead.")
    if isinstance(exe, spmd.SpmdProgram) and len(exe.handlers[True]) != len(exe.out_avals):
        raise NotImplementedError("serialize: the program inspects shardings "
                                  "(inspect_array_sharding), whose callbacks cannot be "
                                  "written out.")


class _Pickler(pickle.Pickler):
    """Devices (in shardings, meshes, the program's placement) are written as their ids."""

    def persistent_id(self, obj):
        if isinstance(obj, xla.Device):
            return ("device", obj.id)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, devices_by_id: dict):
        super().__init__(io.BytesIO(data))
        self.devices_by_id = devices_by_id

    def persistent_load(self, pid):
        kind, ident = pid
        if kind != "device":
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        try:
            return self.devices_by_id[ident]
        except KeyError:
            raise ValueError(f"deserialize_and_load: the executable runs on the device with id "
                             f"{ident}, which is not among the execution devices "
                             f"({sorted(self.devices_by_id)}).") from None


def serialize(compiled):
    """``(payload bytes, in_tree, out_tree)`` of a ``Compiled``."""
    _check_serializable(compiled)
    exe, entry = compiled._exe, compiled._entry
    consts = []
    for c in entry.consts:
        if dtypes.is_extended(getattr(c, "dtype", np.float32)):
            raise NotImplementedError("serialize: the function closes over a PRNG key array; "
                                      "pass it as an argument instead.")
        consts.append(np.asarray(c))
    if isinstance(exe, spmd.SpmdProgram):
        program = exe
        placement = {"devices": list(exe.exe.local_devices()),
                     "in_shardings": exe.in_shardings, "out_shardings": exe.out_shardings}
    else:
        program = exe.program
        placement = {"devices": [program.device], "donated": tuple(exe.donated)}
    state = {
        "spmd": isinstance(exe, spmd.SpmdProgram), "placement": placement,
        "device_ids": [d.id for d in placement["devices"]],
        "platform": placement["devices"][0].platform, "jaxlib": xla.jaxlib_version(),
        "text": str(program.text), "name": exe.name, "kept": tuple(exe.kept),
        "program_in_avals": tuple(program.in_avals),
        "program_out_avals": tuple(program.out_avals),
        "in_avals": tuple(entry.in_avals), "consts": consts,
        "arg_names": tuple(entry.arg_names or ()),
        "fixed_device": entry.params.get("device") is not None,
    }
    with io.BytesIO() as out:
        _Pickler(out, protocol=5).dump((xla.serialize_executable(program.exe), state))
        body = out.getvalue()
    payload = _MAGIC + _FORMAT.to_bytes(4, "little") + body
    return payload, entry.in_tree, entry.out_tree


class _LoadedEntry:
    """What a ``Compiled`` reads of a trace entry, for a deserialised executable."""

    def __init__(self, state, in_tree, out_tree, device):
        self.consts = tuple(state["consts"])
        self.in_tree, self.out_tree = in_tree, out_tree
        self.in_avals = tuple(state["in_avals"])
        self.arg_names = state["arg_names"]
        self.params = {"name": state["name"],
                       "device": device if state["fixed_device"] else None}
        self._out_avals = state["program_out_avals"]
        self.cacheable = True  # (its constants are values: calls may be run from C++)
        self.placed_consts = {}  # device -> the constants put there (by Compiled's calls)

    def arg_name(self, i: int) -> str:
        return self.arg_names[i] if i < len(self.arg_names) else f"leaf {i}"

    def out_info(self):
        from plax import tree_util
        from plax.api.jit import shape_dtype_struct_of
        return tree_util.tree_unflatten(self.out_tree,
                                        [shape_dtype_struct_of(a) for a in self._out_avals])


class _NoStaticArguments:
    """The jitted function a deserialised ``Compiled`` stands for: its static arguments
    were compiled in, so calls pass only the others."""

    _static_argnums = ()
    _static_argnames = ()


def _load_state(serialized, devices_by_id) -> tuple:
    data = bytes(serialized)
    head = len(_MAGIC) + 4
    if len(data) < head or not data.startswith(_MAGIC):
        raise ValueError("deserialize_and_load: these bytes are not an executable serialised "
                         "by plax.experimental.serialize_executable.serialize (truncated, or "
                         "another format).")
    version = int.from_bytes(data[len(_MAGIC):head], "little")
    if version != _FORMAT:
        raise ValueError(f"deserialize_and_load: the payload has format version {version}; this "
                         f"plax reads version {_FORMAT}. Serialise it again with this plax.")
    try:
        return _Unpickler(data[head:], devices_by_id).load()
    except ValueError:
        raise
    except Exception as e:
        raise ValueError("deserialize_and_load: the payload is damaged (truncated or "
                         f"altered): {e}") from e


def _devices_of(backend, execution_devices):
    if backend is None or isinstance(backend, str):
        from plax.api.devices import devices
        backend_devices = devices(backend)
        client = backend_devices[0].client
    else:
        client, backend_devices = backend, list(backend.devices())
    if execution_devices is not None:
        execution_devices = list(execution_devices)
        other = execution_devices[0].client
        if other != client:
            raise ValueError(
                "Execution devices belong to a client other than `backend`. Got backend "
                f"client: {(client.platform, client.platform_version)} and execution devices "
                f"client: {(other.platform, other.platform_version)}")
        return execution_devices
    return backend_devices


class _AnyDevice(dict):
    """Devices by id; an id not among them reads as the first (a one-device program then
    runs there; a program over several devices is refused after loading)."""

    def __init__(self, candidates):
        super().__init__((d.id, d) for d in candidates)
        self.first = candidates[0]

    def __missing__(self, key):
        return self.first


def deserialize_and_load(serialized, in_tree, out_tree, backend=None, execution_devices=None):
    """A ``Compiled`` from ``serialize``'s three results. A program of one device runs on
    the device it was compiled for when ``execution_devices`` (default: ``backend``'s
    devices) hold it, else on the first of them; a program over several devices needs
    devices with the ids it was compiled for. Only load payloads you trust: loading runs
    their machine code."""
    candidates = _devices_of(backend, execution_devices)
    blob, state = _load_state(serialized, _AnyDevice(candidates))
    devices = state["placement"]["devices"]
    if state["spmd"] and [d.id for d in devices] != state["device_ids"]:
        raise ValueError(f"deserialize_and_load: the executable runs over the devices with ids "
                         f"{state['device_ids']}, which are not all among the execution devices "
                         f"({sorted(d.id for d in candidates)}).")
    if devices[0].platform != state["platform"]:
        raise ValueError(f"deserialize_and_load: the executable was compiled for "
                         f"{state['platform']}, and cannot run on {devices[0]}.")
    if state["jaxlib"] != xla.jaxlib_version():
        raise ValueError(f"deserialize_and_load: the executable was compiled with jaxlib "
                         f"{state['jaxlib']}; this is jaxlib {xla.jaxlib_version()}. "
                         "Compile it again here.")
    text = ModuleText(state["text"])
    if state["spmd"]:
        exe = xla.deserialize_executable(blob, devices, num_partitions=len(devices))
        loaded = spmd.SpmdProgram(exe, state["kept"], state["program_in_avals"],
                                  state["program_out_avals"],
                                  state["placement"]["in_shardings"],
                                  state["placement"]["out_shardings"], text, state["name"])
    else:
        device, = devices
        exe = xla.deserialize_executable(blob, [device])
        program = dispatch.CompiledProgram(exe, state["program_in_avals"],
                                           state["program_out_avals"], device, text)
        loaded = jitted.JitExecutable(program, state["kept"], state["placement"]["donated"],
                                      state["name"])
    entry = _LoadedEntry(state, in_tree, out_tree, devices[0])
    return Compiled(_NoStaticArguments(), entry, loaded)
