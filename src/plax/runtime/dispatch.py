"""Eager execution: host data to Arrays, and one primitive at a time on Arrays.

A primitive applied to concrete values is compiled once per (primitive,
params, input types, device) into a one-equation executable and cached.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.caches import BoundedCache
from plax.core.config import config
from plax.core.avals import (ShapedArray, abstractify, canonicalize_dtype_handlers,
                             masked_array_error, physical_aval)
from plax.core.dce import dce_jaxpr
from plax.core.jaxpr import Jaxpr, JaxprEqn, Var
from plax.core.primitive import abstract_eval, impl_rules
from plax.core.trace import current_trace, install_eager_evaluation
from plax.lowering.stablehlo import lower_jaxpr_to_module
from plax.runtime import pipeline_steps, tokens, xla
from plax.runtime.array import (CONCRETE, Array, buffer_of, make_array,
                                register_internal_store)
from plax.sharding.mesh import computation_mesh
from plax.sharding.named import typed_aval
from plax.sharding.single import SingleDeviceSharding

_sharding_cache = BoundedCache("device shardings", 1024)


def sharding_for(device) -> SingleDeviceSharding:
    s = _sharding_cache.get(device)
    if s is None:
        s = _sharding_cache.put(device, SingleDeviceSharding(device))
    return s


_default_device = [None]  # the device the global jax_default_device setting names (cached)


def default_device():
    """Where new arrays go, and computations whose inputs are not committed to a device."""
    if config.plain_dispatch():  # no context manager active: the cached global choice
        dev = _default_device[0]
        if dev is None:
            dev = _default_device[0] = _resolve_default_device(config.read("default_device"))
        return dev
    return _resolve_default_device(config.read("default_device"))


def _resolve_default_device(setting):
    if setting is None:
        return xla.get_backend().local_devices()[0]
    if isinstance(setting, str):
        return xla.get_backend(setting).local_devices()[0]
    return setting


def forget_default_device() -> None:
    """Drop the cached default device: the next ``default_device()`` resolves the setting anew."""
    _default_device[0] = None


def _default_device_setting_changed(name: str) -> None:
    if name in ("default_device", "platforms"):
        forget_default_device()


config._listeners.append(_default_device_setting_changed)


# --- host data -> Array -------------------------------------------------------------
_KNOWN_HOST_TYPES = frozenset(canonicalize_dtype_handlers)  # plax's own entries


def registered_host_value(x):
    """``x`` through the handler a library registered for its type (``canonicalize_dtype_
    handlers``), or unchanged for the types plax converts itself."""
    if type(x) in _KNOWN_HOST_TYPES:
        return x
    handler = canonicalize_dtype_handlers.get(type(x))
    return x if handler is None else handler(x)


def canonical_host_value(x, dtype=None) -> tuple[np.ndarray, bool]:
    """``x`` as a host array of plax's canonical dtype, and whether it is weakly typed."""
    weak = type(x) in (int, float, complex)
    x = registered_host_value(x)
    if isinstance(x, np.ma.MaskedArray):
        raise masked_array_error()
    if dtype is not None:
        dt = dtypes.canonicalize_dtype(dtype)
        weak = False
    else:
        dt = abstractify(x).dtype if not isinstance(x, (list, tuple)) else None
    if type(x) is int and dt is not None and dtypes.is_integer(dt):
        info = dtypes.iinfo(dt)
        if not info.min <= x <= info.max:
            raise OverflowError(f"Python int {x} too large to convert to {dt}.")
    return np.asarray(x, dtype=dt), weak


def array_from_host(x, dtype=None, weak_type=None, device=None, committed=False) -> Array:
    """Copy host data ``x`` (NumPy value or Python scalar) to a new Array."""
    host, weak = canonical_host_value(x, dtype)
    if weak_type is not None:
        weak = weak_type
    if host.dtype not in dtypes.supported_dtypes:
        raise TypeError(f"Arrays of dtype {host.dtype} are not supported by plax.")
    device = device if device is not None else default_device()
    aval = ShapedArray(host.shape, host.dtype, weak)
    out = xla.put(host, aval, sharding_for(device), [device], dtypes.x64_enabled(), committed)
    if not host.ndim:  # a trace takes a scalar made while it runs as a literal (as JAX's)
        current_trace().note_host_scalar(out)
    return out


def addressable_assignment(sharding) -> tuple:
    """The devices of ``sharding`` this process holds, in the sharding's device order (all of
    them in a single process)."""
    devices = sharding._device_assignment
    pid = devices[0].client.process_index()
    return tuple(d for d in devices if d.process_index == pid)


def check_host_arg_sharding(sharding, what: str = "jit") -> None:
    """Raise JAX's error for host (NumPy) data given a layout split over other processes'
    devices: no process holds the whole value to cut it from."""
    if not sharding.is_fully_addressable and not sharding.is_fully_replicated:
        raise ValueError(
            f"Passing non-trivial shardings for numpy inputs is not allowed ({what} was given "
            f"host data for {sharding}, which spans other processes' devices). Either ask for a "
            "replicated sharding explicitly, or build a plax.Array first: "
            "plax.make_array_from_process_local_data(...) from each process's local data, or "
            "plax.make_array_from_callback(...) when every process has the whole value.")


def put_sharded(x, sharding, committed: bool = True, weak_type: bool = False) -> Array:
    """Host data ``x`` (or an Array, read back) laid out over devices by ``sharding``; with
    other processes' devices in ``sharding``, this process puts only its devices' pieces of
    ``x`` (each process holds the whole value, as JAX's device_put expects). ``weak_type``:
    host data taken as weakly typed."""
    if type(x) in CONCRETE:
        x._check_alive()
        if not x._readable():  # part of it lives in other processes: XLA moves it
            from plax.runtime import spmd  # (spmd builds on this module)
            moved = spmd.reshard_on_device(x, sharding)
            if moved is None:
                raise ValueError(
                    f"Cannot lay out an array spanning several processes ({x.sharding}) by "
                    f"{sharding}: only a layout over the same devices can be reached without "
                    "gathering it (use plax.experimental.multihost_utils.process_allgather).")
            return moved if committed else make_array(buffer_of(moved), moved.aval, False)
        host, weak, aval = x._physical_value(), x.weak_type, x.aval
    else:
        host, weak = canonical_host_value(x)
        if host.dtype not in dtypes.supported_dtypes:
            raise TypeError(f"Arrays of dtype {host.dtype} are not supported by plax.")
        aval = ShapedArray(host.shape, host.dtype, weak or weak_type)
    sharding.check_shape(aval.shape, "One of device_put args is incompatible with its sharding "
                                     f"annotation {sharding!r}: ")
    aval = typed_aval(aval, sharding)
    devices = addressable_assignment(sharding)
    where = sharding.devices_indices_map(aval.shape)
    # (np.asarray with order="C", not np.ascontiguousarray: that makes a scalar 1-d)
    pieces = [np.asarray(host[where[d]], order="C") for d in devices]
    kind = sharding.memory_kind
    singles = [sharding_for(d) if kind in (None, "device") else
               SingleDeviceSharding(d, memory_kind=kind) for d in devices]
    buf = xla.put_pieces(pieces, physical_aval(aval), sharding, devices, dtypes.x64_enabled(),
                         singles)
    return make_array(buf, aval, committed)


def reshard(x: Array, sharding, committed: bool = True) -> Array:
    """``x`` laid out by ``sharding`` (the same Array when it already is)."""
    x._check_alive()
    if x.sharding == sharding:
        return x if x._committed == committed else make_array(buffer_of(x), x.aval, committed)
    if x.sharding.is_equivalent_to(sharding, x.ndim):
        if _memory_kind(x.sharding) == _memory_kind(sharding):
            return relabel(x, sharding, committed)
        # the same layout in another memory (pinned host, say): XLA copies it there
        aval = typed_aval(x.aval, sharding)
        buf = xla.copy_to_devices(buffer_of(x), sharding._device_assignment, sharding)
        return make_array(buf, aval, committed)
    # On accelerators XLA moves the data between devices; CPU devices share the host's
    # memory, where a copy through NumPy is faster than XLA's CPU collectives (measured:
    # 177 us against 352 us for f32[64,64] on 8 devices).
    if x.sharding._device_assignment[0].platform != "cpu":
        from plax.runtime import spmd  # (spmd builds on this module)
        moved = spmd.reshard_on_device(x, sharding)
        if moved is not None:
            return moved if committed else make_array(buffer_of(moved), moved.aval, False)
    return put_sharded(x, sharding, committed)


def _memory_kind(sharding) -> str:
    return sharding.memory_kind or "device"


def relabel(x: Array, sharding, committed: bool = True) -> Array:
    """``x``'s data (no copy) under ``sharding``, which lays it out as ``x``'s own does: the
    result reports the sharding asked for, as JAX's does (a one-device mesh's NamedSharding
    and that device's SingleDeviceSharding, say)."""
    aval = typed_aval(x.aval, sharding)
    buf = xla.rewrap(buffer_of(x), physical_aval(aval), committed, sharding)
    return make_array(buf, aval, committed)


def to_device(x: Array, device, committed=True) -> Array:
    """``x`` on ``device`` (a copy when it lives elsewhere)."""
    x._check_alive()
    if x.sharding.device_set == {device}:
        if type(x.sharding) is not SingleDeviceSharding:  # a one-device mesh's layout
            return relabel(x, sharding_for(device), committed)
        return x if x._committed == committed else make_array(buffer_of(x), x.aval, committed)
    if len(x.sharding.device_set) > 1 or device.process_index != device.client.process_index():
        # gathered through the host; or another process's device (that process puts it: this
        # one holds no shard of the result)
        return put_sharded(x, sharding_for(device), committed)
    buf = xla.copy_to_devices(buffer_of(x), [device], sharding_for(device))
    return make_array(buf, x.aval, committed)


def is_spread(x) -> bool:
    """Whether ``x`` is an Array laid out over more than one device (a mesh)."""
    return type(x) in CONCRETE and type(x._sharding) is not SingleDeviceSharding


def device_of(x: Array):
    """The (first) device holding ``x``."""
    return x.sharding._device_assignment[0]


def pick_device(args, what: str):
    """The device a computation on ``args`` runs on: that of its committed inputs."""
    chosen = None
    for a in args:
        if type(a) in CONCRETE and a._committed:
            d = device_of(a)
            if chosen is None:
                chosen = d
            elif d != chosen:
                raise ValueError(
                    f"Received incompatible devices for {what}: an argument is committed to "
                    f"{chosen} and another to {d}. Move them to one device with "
                    "plax.device_put first.")
    if chosen is None:  # uncommitted arrays follow the default device, as in JAX
        return default_device(), False
    return chosen, True


# Device copies of host scalars (eager ``x * 2`` reuses the buffer for 2).
# Buffers are immutable; one a donating jit consumed is put again.
_scalar_buffers = BoundedCache("scalar buffers", 512)
register_internal_store(_scalar_buffers.values)


def xla_aval(aval: ShapedArray) -> ShapedArray:
    """The type XLA holds values of ``aval`` as: float0 (no data) as booleans, as in JAX,
    and PRNG keys as their uint32 words."""
    if aval.dtype == dtypes.float0:
        return aval.update(dtype=np.dtype(np.bool_))
    return physical_aval(aval)


def to_buffer(x, aval: ShapedArray, device):
    """The jaxlib buffer holding ``x`` on ``device`` with type ``aval``."""
    if type(x) in CONCRETE:  # never float0: those stay on the host
        buf = buffer_of(x)
        if getattr(buf._sharding, "device_for_dispatch", None) is device and not buf.is_deleted():
            return buf  # the common case, checked cheaply
        x._check_alive()
        if x.sharding.device_set != {device}:
            return buffer_of(to_device(x, device, x._committed))
        return buf
    if aval.dtype == dtypes.float0:
        x, aval = np.zeros(aval.shape, np.bool_), xla_aval(aval)
    host = np.asarray(registered_host_value(x), dtype=aval.dtype)
    if host.ndim:
        return xla.put(host, aval, sharding_for(device), [device], dtypes.x64_enabled())
    key = (host.tobytes(), aval, device)
    buf = _scalar_buffers.get(key)
    if buf is None or buf.is_deleted():  # (a donating jit may have consumed it)
        buf = _scalar_buffers.put(key, xla.put(host, aval, sharding_for(device), [device],
                                               dtypes.x64_enabled()))
    return buf


# --- compiled programs ----------------------------------------------------------------
class CompiledProgram:
    """An XLA executable with the types it was built for and its result handlers."""

    __slots__ = ("exe", "in_avals", "out_avals", "device", "handlers", "text", "_takes_token",
                 "_has_callbacks", "_special")
    # ``handlers`` maps committed (True/False) to the result handlers making such arrays.

    def __init__(self, exe, in_avals, out_avals, device, text):
        self.exe = exe
        self.in_avals = tuple(in_avals)
        self.out_avals = tuple(out_avals)
        self.device = device
        self.text = text
        s = sharding_for(device)
        self._special = special_results(self.out_avals)
        self._takes_token = getattr(text, "takes_token", False)
        self._has_callbacks = bool(getattr(text, "host_callbacks", ()))
        self.handlers = result_handlers([(a, s) for a in out_avals],
                                        s if self._takes_token else None)

    def run(self, bufs, committed: bool) -> list:
        """The results as Arrays; float0 ones (no data) as NumPy float0 zeros, as in JAX."""
        handlers = self.handlers[committed]
        if self._takes_token or self._has_callbacks:
            outs = self._run_effectful(bufs, handlers)
        else:
            outs = xla.execute(self.exe, bufs, handlers, self.text)
        return arrays_from_results(outs, self.out_avals, committed, self._special)

    def _run_effectful(self, bufs, handlers) -> list:
        key = (self.device,)
        if self._takes_token:
            bufs = [tokens.ordered_token(key, sharding_for(self.device)), *bufs]
        outs, done = xla.execute_with_completion(self.exe, bufs, handlers, self.text)
        tokens.note_run(done)
        if self._takes_token:
            effects = getattr(self.text, "ordered_effects", ())
            tokens.set_ordered_token(key, outs[0], effects)
            outs = outs[1:]
        return outs


def result_handlers(avals_and_shardings, token_sharding=None) -> dict:
    """For committed True and False: the result handlers making arrays of these types and
    layouts (after a token's, when the program returns one)."""
    out = {}
    for committed in (True, False):
        hs = [xla.result_handler(xla_aval(a), s, committed) for a, s in avals_and_shardings]
        if token_sharding is not None:
            hs.insert(0, xla.result_handler(tokens.TOKEN_AVAL, token_sharding, committed))
        out[committed] = hs
    return out


def special_results(avals) -> tuple:
    """The positions of results that a result handler does not make as plax's array:
    PRNG keys (key arrays over their words) and float0 (no data)."""
    return tuple(i for i, a in enumerate(avals)
                 if dtypes.is_extended(a.dtype) or a.dtype == dtypes.float0)


def arrays_from_results(bufs, avals, committed: bool, special: tuple) -> list:
    """A program's results (from its result handlers) as plax's arrays; float0 ones as
    NumPy zeros, as in JAX. ``special`` is ``special_results(avals)``."""
    if not special:
        return bufs
    out = list(bufs)
    for i in special:
        a = avals[i]
        out[i] = np.zeros(a.shape, dtypes.float0) if a.dtype == dtypes.float0 else \
            make_array(out[i], a, committed)
    return out


def compile_jaxpr(jaxpr: Jaxpr, device, name: str = "main") -> CompiledProgram:
    shown = f"jit({name[4:]})" if name.startswith("jit_") else name  # (profiler, monitoring)
    with pipeline_steps.step("lower", shown, "/jax/core/compile/jaxpr_to_mlir_module_duration"):
        text = lower_jaxpr_to_module(jaxpr, module_name=name, platform=device.platform)
    exe = xla.compile(text, [device])
    in_avals = [v.aval for v in list(jaxpr.constvars) + list(jaxpr.invars)]
    return CompiledProgram(exe, in_avals, [v.aval for v in jaxpr.outvars], device, text)


_prim_cache = BoundedCache("primitive executables", 8192)


def _debugging() -> bool:
    return config.read("debug_nans") or config.read("debug_infs")


def one_equation_jaxpr(prim, avals, params) -> Jaxpr:
    invars = [Var(a) for a in avals]
    outvars = [Var(a) for a in abstract_eval(prim, avals, params)]
    return Jaxpr([], invars, outvars, [JaxprEqn(invars, outvars, prim, params)])


def apply_primitive(prim, args, params):
    """Run ``prim`` eagerly on concrete ``args``."""
    impl = impl_rules.get(prim)
    if impl is not None:  # higher-order primitives: their inner ops are checked one by one
        return impl(*args, **params)
    return run_primitive(prim, args, params)


install_eager_evaluation(apply_primitive)  # how EvalTrace runs primitives


_prim_callables = BoundedCache("C++ primitive callables", 8192)  # (prim, params) -> callable
_plain, _overrides = config._plain, config._active_overrides  # see config.plain_dispatch()


def run_primitive(prim, args, params):
    """Run ``prim`` on concrete ``args`` as a one-equation executable (compiled once), from
    jaxlib's C++ dispatch when no flag or context asks for Python (runtime/cpp_jit.py)."""
    if _plain[0] and not _overrides[0]:
        try:
            key = (prim, tuple(params.items()))
            run = _prim_callables.get(key)
        except TypeError:  # unhashable parameters
            return run_primitive_in_python(prim, args, params)
        if run is None:
            from plax.runtime import cpp_jit  # (cpp_jit builds on this module)
            run = _prim_callables.put(key, cpp_jit.primitive_callable(prim, params))
        return run(*args)
    return run_primitive_in_python(prim, args, params)


def run_primitive_in_python(prim, args, params, with_program=False):
    """``run_primitive`` without C++ (its miss handler, and calls under flags or contexts):
    one program on one device, or one SPMD program over a mesh when an argument is laid out
    over several devices. With ``with_program``, also the program when C++ may run it again
    (None: it may not)."""
    avals = tuple(abstractify(a) for a in args)
    if any(is_spread(a) for a in args) or computation_mesh() is not None:
        from plax.runtime import spmd  # (spmd builds on this module)
        key, program = None, spmd.primitive_program(prim, args, avals, params)
        outs = program.run(list(args))
    else:
        device, committed = pick_device(args, f"primitive {prim.name}")
        try:
            key = (prim, tuple(params.items()), avals, device)
            program = _prim_cache.get(key)
        except TypeError:
            key, program = None, None
        if program is None:
            jaxpr = one_equation_jaxpr(prim, avals, params)
            program = compile_jaxpr(jaxpr, device, name=f"jit_{prim.name}")
            if key is not None:
                _prim_cache.put(key, program)
        outs = program.run([to_buffer(a, av, device) for a, av in zip(args, avals)], committed)
    out = outs if prim.multiple_results else outs[0]
    if _debugging():
        check_primitive_outputs(prim, out)
    if with_program:  # (cpp_jit.fastpath_data refuses arguments that had to be moved)
        return out, (program if key is not None else None)
    return out


def live_part(jaxpr: Jaxpr, keep_unused: bool):
    """``jaxpr`` with only the equations its results need, and the indices of the inputs it
    keeps (all of them with ``keep_unused``)."""
    if keep_unused:
        return jaxpr, tuple(range(len(jaxpr.invars)))
    live, used = dce_jaxpr(jaxpr)
    return Jaxpr([], live.invars, live.outvars, live.eqns), \
        tuple(i for i, u in enumerate(used) if u)


def usable_donations(jaxpr: Jaxpr, donated: list, name: str) -> tuple:
    """Keep a donation only where an output of the same type can reuse the buffer (as JAX
    does, warning about the rest, whose inputs then stay alive)."""
    free: dict = {}
    for v in jaxpr.outvars:
        key = (v.aval.shape, v.aval.dtype)
        free[key] = free.get(key, 0) + 1
    usable, unusable = [], []
    for v, d in zip(jaxpr.invars, donated):
        key = (v.aval.shape, v.aval.dtype)
        if d and free.get(key, 0):
            free[key] -= 1
        elif d:
            unusable.append(v.aval.str_short())
            d = False
        usable.append(d)
    if unusable:
        import warnings
        from plax.core.source_info import user_stacklevel
        warnings.warn(f"Some donated buffers were not usable in {name}: {', '.join(unusable)}. "
                      "Donation lets an output of the same shape and dtype reuse an input's "
                      "memory; these inputs have no such output and are not deleted.",
                      stacklevel=user_stacklevel())
    return tuple(usable)


def donation_aliases(jaxpr: Jaxpr, donated) -> list:
    """Per input: the output whose buffer a donated input becomes (the first unclaimed one of
    its shape and dtype, inputs in order, as JAX pairs them), or None."""
    free: dict = {}
    for i, v in enumerate(jaxpr.outvars):
        free.setdefault((v.aval.shape, v.aval.dtype), []).append(i)
    return [free[key].pop(0) if d and free.get(key := (v.aval.shape, v.aval.dtype)) else None
            for v, d in zip(jaxpr.invars, donated)]


def has_bad_values(x, nans: bool, infs: bool) -> bool:
    if not dtypes.is_inexact(x.dtype) or x.size == 0:
        return False
    v = np.asarray(x)
    return bool((nans and np.isnan(v).any()) or (infs and np.isinf(v).any()))


def check_primitive_outputs(prim, outs) -> None:
    """Eager counterpart of the debug flags: raise naming the primitive that made a NaN/inf."""
    nans, infs = config.read("debug_nans"), config.read("debug_infs")
    for o in (outs if prim.multiple_results else [outs]):
        if type(o) in CONCRETE and has_bad_values(o, nans, infs):
            kind = "nan" if nans and np.isnan(np.asarray(o)).any() else "inf"
            raise FloatingPointError(f"invalid value ({kind}) encountered in {prim.name}")
