"""plax: composable transformations of numerical Python programs, on XLA.

``import plax`` loads the core, ``plax.lax`` and ``plax.numpy``; the other
submodules (``plax.random``, ``plax.nn``, ``plax.scipy``, ``plax.experimental``,
...) and the top-level names that live in them load on first use (PEP 562
``__getattr__``), so they cost nothing until a program reaches for them.
"""
from plax.core.config import config, enable_x64  # noqa: F401
from plax.core.dtypes import float0  # noqa: F401
from plax import dtypes, errors  # noqa: F401
from plax.version import __version__, __version_info__  # noqa: F401
from plax.core.config import (  # noqa: F401
    debug_nans, debug_infs, debug_key_reuse, log_compiles, enable_checks, numpy_rank_promotion,
    threefry_partitionable, check_tracer_leaks, checking_leaks,
    numpy_dtype_promotion, default_matmul_precision, default_device)
from plax.runtime.array import Array  # noqa: F401
from plax.runtime.xla import Device  # noqa: F401
from plax.api.devices import (  # noqa: F401
    devices, local_devices, device_count, local_device_count, process_index, process_count,
    default_backend, device_put, device_get, block_until_ready, live_arrays, process_indices,
    host_id, host_count, host_ids, copy_to_host_async, print_environment_info,
)
from plax.api.jit import (  # noqa: F401
    make_jaxpr, ShapeDtypeStruct, jit, eval_shape, disable_jit, named_call, named_scope,
    clear_caches, clear_backends, effects_barrier, ensure_compile_time_eval, typeof,
)
from plax.api.autodiff import (  # noqa: F401
    jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian, linear_transpose)
from plax.api.autodiff import jacobian  # noqa: F401
from plax.sharding.mesh import make_mesh, set_mesh  # noqa: F401
from plax.sharding import NamedSharding, PartitionSpec as P  # noqa: F401
from plax.runtime.array import Shard  # noqa: F401
from plax.api.vmap import vmap  # noqa: F401
from plax.higher_order.custom_derivatives import custom_jvp, custom_vjp  # noqa: F401
from plax.higher_order.closure_convert import closure_convert  # noqa: F401
from plax import core, lax, numpy, sharding, tree_util, version  # noqa: F401

# Loaded on first use. Submodules: plax.<name>.
_LAZY_SUBMODULES = frozenset({
    "_src", "ad_checkpoint", "api_util", "custom_batching", "custom_derivatives", "debug",
    "distributed", "dlpack", "drop_in", "example_libraries", "experimental", "export", "extend", "ffi",
    "flatten_util", "image", "interpreters", "lib", "monitoring", "nn", "ops", "profiler", "random",
    "ref", "scipy", "stages", "test_util", "tree", "typing"})
# Top-level names defined in a module loaded on first use: name -> (module, attribute).
_LAZY_NAMES = {
    "shard_map": ("plax.api.shard_map", "shard_map"),
    "pmap": ("plax.api.pmap", "pmap"),
    "pure_callback": ("plax.api.callbacks", "pure_callback"),
    "custom_gradient": ("plax.higher_order.custom_gradient", "custom_gradient"),
    "install_as_jax": ("plax.drop_in", "install_as_jax"),
    "checkpoint": ("plax.higher_order.remat", "checkpoint"),
    "remat": ("plax.higher_order.remat", "remat"),
    "checkpoint_policies": ("plax.higher_order.remat", "checkpoint_policies"),
    "make_array_from_callback": ("plax.api.arrays", "make_array_from_callback"),
    "make_array_from_single_device_arrays": (
        "plax.api.arrays", "make_array_from_single_device_arrays"),
    "make_array_from_process_local_data": ("plax.api.arrays", "make_array_from_process_local_data"),
    "device_put_sharded": ("plax.api.arrays", "device_put_sharded"),
    "device_put_replicated": ("plax.api.arrays", "device_put_replicated"),
    "Ref": ("plax.ref", "Ref"),
    "new_ref": ("plax.ref", "new_ref"),
    "freeze": ("plax.ref", "freeze"),
    "empty_ref": ("plax.ref", "empty_ref"),
    "free_ref": ("plax.ref", "free_ref"),
    "ds": ("plax.ref", "ds"),
    "default_prng_impl": ("plax.random.flags", "default_prng_impl"),
    "legacy_prng_key": ("plax.random.flags", "legacy_prng_key"),
    "enable_custom_prng": ("plax.random.flags", "enable_custom_prng"),
    "reshard": ("plax.sharding", "reshard"),
    "smap": ("plax.api.smap", "smap"),
    "fwd_and_bwd": ("plax.api.fwd_and_bwd", "fwd_and_bwd"),
    "ad": ("plax.api.fwd_and_bwd", "ad"),
    "memory": ("plax.core.memory", "memory"),
}
# Context managers over runtime flags (plax.api.runtime_flags): name -> the same name there.
_LAZY_NAMES.update((name, ("plax.api.runtime_flags", name)) for name in (
    "transfer_guard", "transfer_guard_host_to_device", "transfer_guard_device_to_device",
    "transfer_guard_device_to_host", "make_user_context", "no_tracing", "no_execution",
    "thread_guard", "allow_f16_reductions", "array_garbage_collection_guard", "auto_pcast",
    "explain_cache_misses", "jax2tf_associative_scan_reductions",
    "remove_size_one_mesh_axis_from_type", "softmax_custom_jvp"))


def __getattr__(name):
    import importlib
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # also binds it here
    if name in _LAZY_NAMES:
        module, attr = _LAZY_NAMES[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _LAZY_SUBMODULES | set(_LAZY_NAMES))
