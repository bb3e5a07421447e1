"""jit calls dispatched in C++: jaxlib's jit fast path, fed by plax's own Python path.

``plax.jit`` returns jaxlib's C++ jit object. It flattens the arguments with the C++ pytree
``registry`` below (a mirror of plax's), looks their signature up in its cache, and on a
hit runs the executable and makes the output arrays without a Python frame (plax's arrays are
jaxlib's C++ ``ArrayImpl``; runtime/array.py).

On a miss it calls ``JitWrapped._cpp_miss``, which runs the call through plax's Python path
(tracing and compiling if need be) and, for a plain eager call, hands back
``fastpath_data`` for the signature: the executable, the output structure and types, and
the shardings the arguments must have. Calls that need Python each time (host callbacks,
ordered effects, float0 outputs, arguments that must be moved first, programs with
collectives on CPU) get no fast-path data, so they stay on the Python path.

Whatever changes what a call means outside its arguments is mirrored into settings the C++
key includes: globally the x64 flag, the other flags that change tracing, the default
device and the debug flags; per thread the current trace, the named axes in scope and the
flags overridden in config contexts, with their values. Only plain eager calls are recorded,
so any other call misses.
"""
from __future__ import annotations

import numpy as np

from plax.core import tree_core
from plax.core.avals import ShapedArray, WeakHostArray, weak_host_value
from plax.core import trace as trace_mod
from plax.core.config import config
from plax.runtime import dispatch, jitted, shutdown, spmd, xla
from plax.runtime.array import CONCRETE, ArrayImpl, KeyArray, buffer_of
from plax.sharding.single import SingleDeviceSharding


def _jit_context():
    # (exiting: a new key, so every call misses and reaches Python, where daemon threads park)
    return (config.trace_context(), config.read("default_device"), config._plain[0],
            shutdown.exiting[0])


_disable_jit = xla.jit_key_setting("plax_disable_jit", False)
_x64 = xla.jit_key_setting("plax_enable_x64", bool(config.read("enable_x64")))
_post_hook = xla.jit_key_setting("plax_jit_post_hook", None, in_key=False)
_context = xla.jit_key_setting("plax_jit_context", _jit_context())
shutdown.on_exit(lambda: _context.set_global(_jit_context()))
xla.install_jit_settings(_disable_jit, _x64, _post_hook)
# Per thread: the current trace, the named axes in scope, the flags overridden (and their
# values). Only plain eager calls (an EvalTrace, no named axes, no flag that asks for Python)
# are ever recorded in C++, so calls in any other state miss and reach Python.
_trace_key = xla.jit_key_setting("plax_current_trace", None)
_axis_env_key = xla.jit_key_setting("plax_axis_env", ())
_override_key = xla.jit_key_setting("plax_overridden_flags", ())
trace_mod.install_dispatch_hooks(_trace_key.set_local, _axis_env_key.set_local)


def _overrides_changed(overridden: tuple) -> None:
    # The thread's overridden flags are in the key; C++ reads x64 itself (how it types
    # Python scalars), so that follows the thread's value while it is overridden.
    _override_key.set_local(overridden)
    x64 = any(name == "enable_x64" for name, _ in overridden)
    xla.set_local_jit_setting(_x64, bool(config.read("enable_x64")) if x64 else None)


config.install_override_hook(_overrides_changed)


def _follow_config(name: str) -> None:
    # The global values (a thread's overridden flags are in its own key and settings).
    _x64.set_global(bool(config.read("enable_x64")))
    _scalar_args.clear()
    _context.set_global(_jit_context())
    if name == "platforms":
        xla.clear_all_jit_caches()


config._listeners.append(_follow_config)


# --- the pytree registry the C++ side flattens with -----------------------------------------
registry = xla.PyTreeRegistry(enable_none=True, enable_tuple=True, enable_namedtuple=True,
                              enable_list=True, enable_dict=True)
# A concrete array is a leaf C++ knows (its type, sharding and commitment are part of the
# signature). A key array is a node over the array of its words, its key type in the treedef.
registry.register_node(KeyArray, lambda x: ((x._base,), x.aval),
                       lambda aval, children: KeyArray(aval, children[0]))
# plax's weakly typed host constants are NumPy arrays to C++: a node of their own keeps their
# signature apart from a plain array's.
registry.register_node(WeakHostArray, lambda x: ((x.view(np.ndarray),), None),
                       lambda _, children: weak_host_value(children[0], children[0].dtype))


def _mirror(nodetype, entry) -> None:
    if nodetype not in (tuple, list, dict, type(None)):  # (built into the C++ registry)
        registry.register_node(nodetype, entry.flatten, entry.unflatten)


for _t, _entry in list(tree_core.node_registry.items()):
    _mirror(_t, _entry)
tree_core.registration_hooks.append(_mirror)


# --- arguments that are not Arrays -----------------------------------------------------------
# Device copies of Python scalar arguments, by (type, value, device): eager ``y * 2.0`` puts
# 2.0 on the device once. Zeros are keyed by their text too (0.0 == -0.0). Cleared when the
# x64 flag (which picks their dtype) changes.
_scalar_args: dict = {}
_PY_SCALARS = (int, float, bool, complex)


def shard_arg(x, sharding, layout=None):
    """The jaxlib buffer for a NumPy value or Python scalar argument laid out by
    ``sharding`` (C++ calls this for every argument that is not already a buffer)."""
    t = type(x)
    if t in _PY_SCALARS and type(sharding) is SingleDeviceSharding and x == x:
        key = (t, x if x else repr(x), sharding.device_for_dispatch)
        buf = _scalar_args.get(key)
        if buf is None or buf.is_deleted():  # (a donating jit may have consumed it)
            if len(_scalar_args) > 4096:
                _scalar_args.clear()
            buf = _scalar_args[key] = _put_arg(x, sharding)
        return buf
    return _put_arg(x, sharding)


def _put_arg(x, sharding):
    host, weak = dispatch.canonical_host_value(x)
    aval = ShapedArray(host.shape, host.dtype, weak)
    if type(sharding) is SingleDeviceSharding:
        return dispatch.to_buffer(host if host.ndim else x, aval, sharding.device_for_dispatch)
    return buffer_of(dispatch.put_sharded(host, sharding))


_HOST_LEAVES = (np.ndarray, np.generic, int, float, complex, bool)


def fastpath_data(exe, consts, leaves, result):
    """What the C++ cache needs to run ``exe`` (a jitted JitExecutable, an SpmdProgram or
    one primitive's CompiledProgram) again for arguments like ``leaves`` with no Python in
    between; None when such calls must keep going through Python."""
    if xla.distributed_runtime_joined():
        return None  # runs must go through Python, where a dead peer is watched for
    full = (*consts, *leaves)
    if isinstance(exe, spmd.SpmdProgram):
        program, kept = exe, exe.kept
        if exe.collective or any(exe._effects) or len(exe.handlers[True]) != len(exe.out_avals):
            return None  # (collectives run one at a time; inspection probes ride along)
        in_shardings = list(exe.in_shardings)
    else:
        program, kept = (exe.program, exe.kept) if isinstance(exe, jitted.JitExecutable) \
            else (exe, range(len(full)))
        if program._takes_token or program._has_callbacks:
            return None
        in_shardings = [dispatch.sharding_for(program.device)] * len(program.in_avals)
    if not all(type(c) in CONCRETE for c in consts):
        return None
    for i, s in zip(kept, in_shardings):
        x = full[i]
        if type(x) in CONCRETE:
            own = x._sharding
            if not (own is s or own == s) or x.is_deleted():
                return None  # it must be moved (or is gone): Python does that each time
    for x in leaves:  # unused arguments are flattened too: they must be types C++ knows
        if type(x) not in CONCRETE and not isinstance(x, _HOST_LEAVES):
            return None
    out_bufs, out_tree = registry.flatten(result)
    if not all(type(b) is ArrayImpl for b in out_bufs):
        return None  # e.g. float0 outputs, which are NumPy zeros
    kept_set = set(kept)
    return xla.FastpathData(
        program.exe, out_tree, in_shardings, [b._sharding for b in out_bufs],
        [b.aval for b in out_bufs], [b._committed for b in out_bufs],
        [i in kept_set for i in range(len(full))], [None] * len(in_shardings),
        [buffer_of(c) for c in consts])


_SIGNATURES_PER_FUNCTION = 1024  # (least recently used ones are dropped beyond this)
# Every jit of one function with the same options finds the signatures recorded by earlier
# ones here: jaxlib files them under (the function, held weakly; the options' shared state).
# (Least recently used signatures of all of them are dropped beyond the capacity.)
_shared_cache = xla.JitFunctionCache(capacity=8 * _SIGNATURES_PER_FUNCTION)


def install_methods(**methods) -> None:
    """Give jaxlib's C++ jit callables these methods (``lower``, ``trace``, ...), as plax's
    ``jit`` returns them."""
    xla.attach_methods(xla.JitFunction, methods)


def make(name: str, fun, cache_miss, static_argnums, static_argnames, shared_key=None):
    """jaxlib's C++ jit callable for one jitted function. With ``shared_key`` (hashable, one
    per function and options) its signatures are shared with every callable made for the
    same function and key; without, its cache lives and dies with it."""
    if shared_key is None:
        cache, shared_key = xla.JitFunctionCache(capacity=_SIGNATURES_PER_FUNCTION), ()
    else:
        cache = _shared_cache
    return xla.cpp_jit_function(name, fun, cache_miss, static_argnums, static_argnames,
                                shared_key, registry, shard_arg, cache)


def clear_all() -> None:
    """Forget every signature recorded by every C++ jit callable (primitives' included)."""
    xla.clear_all_jit_caches()


def primitive_callable(prim, params):
    """A C++ callable running ``prim`` with ``params`` eagerly (one per primitive and
    parameters; runtime/dispatch.py keeps them)."""
    def run(*args):  # the key the C++ cache files this callable's signatures under
        return dispatch.run_primitive_in_python(prim, args, params)

    def cache_miss(*args):
        outs, program = dispatch.run_primitive_in_python(prim, args, params, with_program=True)
        data = None if program is None else fastpath_data(program, (), args, outs)
        return outs, data, False
    return make(f"prim_{prim.name}", run, cache_miss, (), ())
