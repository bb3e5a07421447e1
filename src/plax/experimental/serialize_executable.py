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

Programs over several devices (SPMD), with host callbacks or ordered effects, or with PRNG
key arrays among their arguments or results are refused with an error saying so.
"""
from __future__ import annotations

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
    if isinstance(compiled._exe, spmd.SpmdProgram):
        raise NotImplementedError("serialize: plax serialises programs of one device; this one "
                                  "runs over several (an SPMD program).")
    program = compiled._exe.program
    if program.text.host_callbacks or program.text.takes_token:
        raise ValueError("Compilation does not support serialization: the program calls back "
                         "into Python (host callbacks or ordered effects), whose functions "
                         "cannot be written out.")
    for what, avals in (("argument", program.in_avals), ("result", program.out_avals)):
        if any(dtypes.is_extended(a.dtype) for a in avals):
            raise NotImplementedError(f"serialize: a PRNG key array is an {what} of this "
                                      "program; pass and return its key_data instead.")


def serialize(compiled):
    """``(payload bytes, in_tree, out_tree)`` of a ``Compiled`` (one device's program)."""
    _check_serializable(compiled)
    exe, entry = compiled._exe, compiled._entry
    program = exe.program
    consts = []
    for c in entry.consts:
        if dtypes.is_extended(getattr(c, "dtype", np.float32)):
            raise NotImplementedError("serialize: the function closes over a PRNG key array; "
                                      "pass it as an argument instead.")
        consts.append(np.asarray(c))
    state = {
        "executable": xla.serialize_executable(program.exe),
        "platform": program.device.platform, "device_id": program.device.id,
        "jaxlib": xla.jaxlib_version(), "text": str(program.text), "name": exe.name,
        "program_in_avals": program.in_avals, "program_out_avals": program.out_avals,
        "kept": tuple(exe.kept), "donated": tuple(exe.donated),
        "in_avals": tuple(entry.in_avals), "consts": consts,
        "arg_names": tuple(entry.arg_names or ()),
        "fixed_device": entry.params.get("device") is not None,
    }
    payload = _MAGIC + _FORMAT.to_bytes(4, "little") + pickle.dumps(state, protocol=5)
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


def _load_state(serialized) -> dict:
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
        return pickle.loads(data[head:])
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


def deserialize_and_load(serialized, in_tree, out_tree, backend=None, execution_devices=None):
    """A ``Compiled`` from ``serialize``'s three results. It runs on the device it was
    compiled for when ``execution_devices`` (default: ``backend``'s devices) hold it, else
    on the first of them. Only load payloads you trust: loading runs their machine code."""
    state = _load_state(serialized)
    candidates = _devices_of(backend, execution_devices)
    device = next((d for d in candidates if d.id == state["device_id"]), candidates[0])
    if device.platform != state["platform"]:
        raise ValueError(f"deserialize_and_load: the executable was compiled for "
                         f"{state['platform']}, and cannot run on {device}.")
    if state["jaxlib"] != xla.jaxlib_version():
        raise ValueError(f"deserialize_and_load: the executable was compiled with jaxlib "
                         f"{state['jaxlib']}; this is jaxlib {xla.jaxlib_version()}. "
                         "Compile it again here.")
    exe = xla.deserialize_executable(state["executable"], [device])
    program = dispatch.CompiledProgram(exe, state["program_in_avals"],
                                       state["program_out_avals"], device,
                                       ModuleText(state["text"]))
    loaded = jitted.JitExecutable(program, state["kept"], state["donated"], state["name"])
    entry = _LoadedEntry(state, in_tree, out_tree, device)
    return Compiled(_NoStaticArguments(), entry, loaded)
