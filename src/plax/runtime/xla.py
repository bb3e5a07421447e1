"""The only module that imports jaxlib: clients, devices, transfers, compile, execute.

Everything else in plax talks to XLA through the functions here. jaxlib's
underscored APIs move between releases, so each is used in one place, with a
feature check where 0.10 and 0.11 differ.
"""
from __future__ import annotations

import functools
import importlib
import os
import pickle
import threading
import time
import warnings

# First, before jaxlib loads: the environment variables it (and SciPy's OpenBLAS) read then.
from plax.runtime import xla_env  # noqa: F401  (keep above the jaxlib imports)

import numpy as np

import jaxlib
import jaxlib.xla_client as xc
from jaxlib import _jax, _profile_data, _profiler

from plax.core.config import config
from plax.runtime import (cuda_plugin, loaded_bytes, pipeline_steps, platforms, shutdown,
                          tpu_plugin)
from plax.runtime.pipeline_steps import executable_name, module_fun_name
from plax.runtime.callback_errors import raise_callback_failure
from plax.runtime.cpu_devices import cpu_device_count
from plax.runtime.jaxlib_lookups import answer_jaxlib_lookups as _answer_jaxlib_lookups

# Once the program exits, daemon threads park on every path into jaxlib (runtime/shutdown.py).
_exiting = shutdown.exiting

JAXLIB_VERSION = jaxlib.__version__
JAXLIB_EXTENSION_VERSION = getattr(xc, "_version", 0)  # the C++ extension's API version
Device = xc.Device
DeviceList = xc.DeviceList
ifrt_programs = _jax.ifrt_programs  # jaxlib's IFRT program builders (jax.extend.ifrt_programs)
XlaRuntimeError = xc.XlaRuntimeError
# jax.errors.JaxRuntimeError is jaxlib's class itself: what XLA raises while compiling or
# running a program (a failing FFI kernel, a bad custom call) is caught by it; plax raises it
# for its own reports of such failures too.
JaxRuntimeError = XlaRuntimeError
Client = xc.Client  # the type of an XLA client (a backend)
SingleDeviceShardingBase = xc.SingleDeviceSharding
GSPMDShardingBase = xc.GSPMDSharding
HloSharding = xc.HloSharding

# jaxlib's C++ array code asks for the x64 state; plax passes it explicitly on
# every transfer, but a registered default keeps other entry points working.
try:
    _jax.jax_jit.set_enable_x64_state(_jax.config.Config(
        "jax_enable_x64", False, include_in_jit_key=True, include_in_trace_context=True))
except Exception:  # older/newer jaxlib without this hook: explicit flags suffice
    pass


# --- backends -----------------------------------------------------------------
_lock = threading.Lock()
_backends: dict = {}
_default_platform: str | None = None


def _make_cpu_client():
    n, said_by = cpu_device_count()
    if n < 1:
        raise ValueError(f"{said_by} must give at least 1 CPU device, got {n}.")
    if _distributed_runtime is None:
        return xc.make_cpu_client(asynchronous=True, num_devices=n)
    client, process_id, num_processes, hostname, _ = _distributed_runtime
    gloo = _jax.make_gloo_tcp_collectives(distributed_client=client, hostname=hostname)
    return xc.make_cpu_client(asynchronous=True, num_devices=n, distributed_client=client,
                              node_id=process_id, num_nodes=num_processes, collectives=gloo)


_cuda_api = None  # the loaded CUDA plugin's PJRT C API (loaded once per process)


def _make_cuda_client():
    """A client of NVIDIA's CUDA PJRT plugin (runtime/cuda_plugin.py finds it), with its GPU
    kernels registered: cuSOLVER/cuBLAS, Python callbacks, threefry."""
    global _cuda_api
    plugin = cuda_plugin.find()
    if plugin is None:
        raise platforms.PlatformNotInstalled("no CUDA plugin is installed; install one with "
                                             "pip install 'plax[cuda13]' (or 'plax[cuda12]')")
    if _cuda_api is None:
        cuda_plugin.preload_nvidia_libraries()
        try:
            _cuda_api = xc.load_pjrt_plugin_dynamically("cuda", plugin.library)
            xc.initialize_pjrt_plugin("cuda")
        except Exception as e:
            raise RuntimeError(f"the CUDA plugin at {plugin.library} (found through "
                               f"{plugin.found_by}) could not be loaded: {e}") from None
        _register_cuda_kernels(_cuda_api, plugin.kernels)
    os.environ.update(cuda_plugin.client_settings())  # PLAX_ names -> XLA_ ones, read below
    options = xc.generate_pjrt_gpu_plugin_options()
    distributed = None
    if _distributed_runtime is not None:  # one GPU process of many: NCCL collectives
        distributed, process_id, num_processes, _, local_ids = _distributed_runtime
        options.update(node_id=process_id, num_nodes=num_processes)
        if local_ids is not None:
            options["visible_devices"] = list(local_ids)
    return xc.make_c_api_client("cuda", options, distributed)


def _register_cuda_kernels(api, kernels) -> None:
    """Make the plugin's custom calls known to XLA for platform CUDA: the FFI handlers and
    types of its extension (Python callbacks among them), then jaxlib's lists of the
    cuSOLVER, linalg and PRNG kernels. plax.ffi targets registered for "cuda" earlier are
    passed on by the handler."""
    if kernels is None:
        warnings.warn("plax: the CUDA plugin's kernels (jax_cuda13_plugin or "
                      "jax_cuda12_plugin) are not installed: GPU linear algebra and Python "
                      "callbacks will not compile. Install plax[cuda13].", stacklevel=3)
        return
    ext = importlib.import_module(f"{kernels}.cuda_plugin_extension")
    xc.register_custom_call_handler("CUDA", functools.partial(ext.register_custom_call_target,
                                                              api))
    xc.register_custom_type_handler("CUDA", functools.partial(ext.register_custom_type, api))
    for name, value in ext.ffi_types().items():
        xc.register_custom_type(name, value, platform="CUDA")
    for name, value in ext.ffi_handlers().items():
        xc.register_custom_call_target(name, value, platform="CUDA", api_version=1)
    from jaxlib import gpu_linalg, gpu_prng, gpu_solver
    for module in (gpu_solver, gpu_linalg, gpu_prng):
        for name, value, api_version in module.registrations().get("CUDA", ()):
            xc.register_custom_call_target(name, value, platform="CUDA",
                                           api_version=api_version)


def _make_tpu_client():
    """A client of libtpu's PJRT plugin (runtime/tpu_plugin.py finds it), with the client
    options JAX passes (``jax_pjrt_client_create_options``)."""
    library = tpu_plugin.find()
    if library is None:
        raise platforms.PlatformNotInstalled("libtpu is not installed; install it with pip "
                                             "install 'plax[tpu]'")
    tpu_plugin.set_up_environment(JAXLIB_VERSION)
    try:
        if not xc.pjrt_plugin_loaded("tpu"):  # (its profiler joins plax's traces, as JAX's)
            _profiler.register_plugin_profiler(
                xc.load_pjrt_plugin_dynamically("tpu", library.path))
        if not xc.pjrt_plugin_initialized("tpu"):
            xc.initialize_pjrt_plugin("tpu")
        options = tpu_plugin.client_options(config.read("pjrt_client_create_options"))
        distributed = _distributed_runtime[0] if _distributed_runtime is not None else None
        return xc.make_c_api_client("tpu", options, distributed)
    except Exception as e:  # noqa: BLE001 (said in the user's terms)
        raise RuntimeError(tpu_plugin.explain_failure(e, library)) from None


# Tried in this order (the first started is the default): the TPU, then the GPU, where their
# plugins are installed, then the CPU.
platforms.register_factory("tpu", _make_tpu_client)
platforms.register_factory("cuda", _make_cuda_client)
platforms.register_factory("cpu", _make_cpu_client)
register_backend_factory = platforms.register_factory
_FACTORIES = platforms.FACTORIES


def ifrt_proxy_module():
    """jaxlib's IFRT proxy client module (``get_client(address, options)``), None where
    this jaxlib has none."""
    try:
        from jaxlib import _ifrt_proxy
    except ImportError:
        return None
    return _ifrt_proxy


def backends() -> dict:
    """Initialise (once) and return ``{platform: client}`` for the requested platforms
    (runtime/platforms.py says which, in which order, and what a failure means)."""
    global _default_platform
    if _backends:
        return _backends
    with _lock:
        if _backends:
            return _backends
        _backends.update(platforms.start())
        _default_platform = next(iter(_backends))
        _pin_aval_class(_backends[_default_platform])
    return _backends


def _pin_aval_class(client) -> None:
    """Have jaxlib's one-time lookup of ``ShapedArray`` find plax's class (a read inside
    ``_AnswerJaxlibLookups``), before any user array exists."""
    from plax.core.avals import ShapedArray
    from plax.sharding.single import SingleDeviceSharding
    dev = client.local_devices()[0]
    probe = np.zeros((), np.float32)
    buf = put(probe, ShapedArray((), probe.dtype), SingleDeviceSharding(dev), [dev], False)
    to_numpy(buf)


def get_backend(platform: str | None = None):
    bs = backends()
    if platform is None:
        return bs[_default_platform]
    key = platforms.canonical(platform)
    if key not in bs:
        raise RuntimeError(f"Unknown backend {platform!r}: it is not available here. Available "
                           f"backends are {sorted(bs)}.")
    return bs[key]


def default_platform() -> str:
    backends()
    return _default_platform


def clear_backends() -> None:
    global _default_platform
    with _lock:
        _backends.clear()
        _default_platform = None


def process_index(platform=None) -> int:
    return get_backend(platform).process_index()


# --- the distributed runtime (many processes: runtime/distributed.py drives it) ---------
# (client, process_id, num_processes, hostname, local device ids): the clients join the run
_distributed_runtime = None


def distributed_service(address: str, num_processes: int, heartbeat_timeout: int,
                        shutdown_timeout: int):
    """Start XLA's coordination service on ``address`` (process 0 only). Its tasks are
    "recoverable": a dead one is reported to whoever asks (``get_live_nodes``) instead of
    making the runtime abort every other process."""
    return _jax.get_distributed_runtime_service(address, num_processes,
                                                heartbeat_timeout=heartbeat_timeout,
                                                shutdown_timeout=shutdown_timeout,
                                                recoverable=True)


def distributed_client(address: str, process_id: int, init_timeout: int,
                       heartbeat_timeout: int, shutdown_timeout: int):
    """A coordination-service client, not yet connected."""
    return _jax.get_distributed_runtime_client(
        address, process_id, init_timeout=init_timeout, heartbeat_timeout=heartbeat_timeout,
        shutdown_timeout=shutdown_timeout, shutdown_on_destruction=False, use_compression=True)


def join_distributed_runtime(client, process_id: int, num_processes: int, hostname,
                             wait=None, call=None, local_device_ids=None) -> None:
    """Make the clients, when they start, one of ``num_processes`` joined by ``client``: the
    CPU client with gloo collectives over TCP on ``hostname``, the CUDA one with NCCL on the
    GPUs ``local_device_ids`` (all when None). So that a dead peer raises instead of
    trapping the caller: ``wait(bufs)`` is called before every blocking wait on results,
    and every program runs as ``call(run, *run_args)``. A None client undoes it."""
    global _distributed_runtime, _distributed_wait, _distributed_call
    _distributed_runtime = None if client is None else (client, process_id, num_processes,
                                                         hostname, local_device_ids)
    _distributed_wait, _distributed_call = wait, call


_distributed_wait = _distributed_call = None


def distributed_runtime_joined() -> bool:
    return _distributed_call is not None


def backends_started() -> bool:
    return bool(_backends)


# --- transfers ------------------------------------------------------------------
def put(host: np.ndarray, aval, sharding, devices, x64: bool, committed: bool = True):
    """Copy host data onto ``devices`` (one piece per device) as one jaxlib array.

    ``host`` must already have the canonical dtype of ``aval``: 64-bit data with
    x64 off would otherwise be narrowed silently.
    """
    _exiting[0] and shutdown.park()
    pieces = host if isinstance(host, list) else [host]
    # IMMUTABLE_ONLY_DURING_CALL: the runtime copies before returning (the host array may
    # change afterwards), so no second, forced copy is needed.
    return xc.batched_device_put(aval, sharding, pieces, list(devices), committed, False,
                                 xc.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL, x64)


def put_pieces(pieces: list, aval, sharding, devices, x64: bool, single_shardings):
    """One jaxlib array laid out by ``sharding`` from one host piece per device.

    jaxlib's batched put cannot lay out a partially replicated sharding (it fails with
    ``bad_function_call``): such arrays are assembled from single-device puts.
    """
    hlo = sharding._to_xla_hlo_sharding(len(aval.shape))
    if not hlo.replicate_on_last_tile_dim():
        return put(pieces, aval, sharding, devices, x64)
    singles = [put(p, aval.update(shape=p.shape), s, [d], x64)
               for p, d, s in zip(pieces, devices, single_shardings)]
    return assemble(aval, sharding, singles, True)


def to_numpy(buf) -> np.ndarray:
    return to_numpy_did_copy(buf)[0]


def to_numpy_did_copy(buf) -> tuple[np.ndarray, bool]:
    """Read a single-device jaxlib array back: the host array, and whether it is a copy.

    On the CPU the host array is the device buffer itself (no copy). Its base is a
    capsule holding the buffer, never the Python array object: a host copy cached on
    the array must not refer back to the array, or the pair is a cycle the garbage
    collector cannot see (the C++ array type does not traverse its cached value), and
    every array ever read would stay alive with its buffer.
    """
    _exiting[0] and shutdown.park()
    if _distributed_wait is not None:
        _distributed_wait((buf,))
    try:
        with _answer_jaxlib_lookups:
            return buf._single_device_array_to_np_array_did_copy()
    except XlaRuntimeError as e:  # a host callback of the program that made it failed
        raise_callback_failure(e)
        raise


def shards(buf) -> list:
    """The single-device pieces of a jaxlib array."""
    with _answer_jaxlib_lookups:  # jaxlib makes each piece's sharding through "jax"
        return list(buf._arrays)


def shard_device(shard_buf):
    """The device holding a single-device jaxlib array."""
    return shard_buf._sharding._internal_device_list[0]


def copy_to_host_async(buf) -> None:
    with _answer_jaxlib_lookups:  # (each piece's sharding is made through "jax")
        for s in buf._arrays:
            s._copy_single_device_array_to_host_async()


def copy_to_devices(buf, devices, sharding):
    """A copy of ``buf`` laid out by ``sharding`` on ``devices``."""
    return xc.batched_copy_array_to_devices_with_sharding(
        [buf], [xc.DeviceList(tuple(devices))], [sharding],
        [xc.ArrayCopySemantics.ALWAYS_COPY])[0]


def block_until_ready(bufs) -> None:
    _exiting[0] and shutdown.park()
    if _distributed_wait is not None:
        _distributed_wait(bufs)
    try:
        xc.batched_block_until_ready(list(bufs))
    except XlaRuntimeError as e:
        raise_callback_failure(e)
        raise


def assemble(aval, sharding, shard_bufs, committed: bool = True):
    """One jaxlib array from per-device single-device arrays."""
    with _answer_jaxlib_lookups:
        return xc.ArrayImpl(aval, sharding, list(shard_bufs), committed, True)


def rewrap(buf, aval, committed: bool, sharding=None):
    """A jaxlib array over ``buf``'s data (no copy) typed ``aval``, committed or not, and
    labelled ``sharding`` if given (one laying the data out as ``buf``'s does)."""
    own = buf._sharding
    pieces = [buf] if isinstance(own, SingleDeviceShardingBase) else shards(buf)
    return xc.ArrayImpl(aval, own if sharding is None else sharding, pieces, committed, True)


def to_dlpack(buf, stream=None):
    """A DLPack capsule over a single-device jaxlib array's data (no copy)."""
    return _jax.buffer_to_dlpack_managed_tensor(buf, stream=stream)


def hlo_sharding_replicated():
    return xc.HloSharding.replicate()


def hlo_sharding_tiled(tiles: list, mesh_sizes: list, axis_order: list, replication: int = 1,
                       unreduced: int = 1):
    """XLA's HloSharding of a tiling over a mesh: ``tiles`` blocks per dimension, held by the
    mesh's devices (indices 0.. in mesh order) with the mesh axes permuted to
    ``axis_order``; a group of ``unreduced`` devices holds partial sums of each block, a
    last group of ``replication`` devices copies of it."""
    if unreduced > 1 and replication == 1 and all(t == 1 for t in tiles):
        return xc.HloSharding.unreduced()
    dims, groups = list(tiles), []
    if unreduced > 1:
        dims.append(unreduced)
        groups.append(xc.OpSharding.Type.UNREDUCED)
    if replication > 1:
        dims.append(replication)
        groups.append(xc.OpSharding.Type.REPLICATED)
    return xc.HloSharding.iota_tile(dims, list(mesh_sizes), list(axis_order), groups)


def jaxlib_version() -> str:
    return jaxlib.__version__


def jaxlib_submodule(name: str):
    """jaxlib's module ``jaxlib.<name>`` (``jax._src.lib`` re-exports jaxlib's modules)."""
    return importlib.import_module(f"jaxlib.{name}")


def device_list(devices):
    return xc.DeviceList(tuple(devices))


# --- compile and execute ----------------------------------------------------------
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_EVENTS = "/jax/compilation_cache/"  # the persistent cache's events (plax.monitoring)


# --- HLO passes of a program's own (jax.extend.xla) and HloSharding protos ------------------
xla_client = xc  # jaxlib's xla_client module, as jax.extend.sharding re-exports it
_hlo_transforms: set = set()  # (name, stage) of the passes registered on the CPU client


def register_hlo_transform(name: str, stage: int, callback) -> None:
    """Run ``callback(serialized HloModuleProto) -> bytes | None`` as an XLA pass named
    ``name`` at pipeline ``stage`` (0: before scheduling, 1: after) of every CPU
    compilation. Programs are not taken from the persistent cache meanwhile."""
    from jaxlib import _xla
    _xla.register_xla_transform(name, stage, callback)
    _hlo_transforms.add((name, stage))


def clear_hlo_transform(name: str, stage: int) -> bool:
    """Remove the pass ``name`` at ``stage``; whether one was registered."""
    from jaxlib import _xla
    _hlo_transforms.discard((name, stage))
    return bool(_xla.clear_xla_transform(name, stage))


def op_sharding_from_proto(data: bytes):
    """jaxlib's ``OpSharding`` parsed from a serialized OpSharding proto."""
    proto = xc.OpSharding()
    proto.ParseFromString(data)
    return proto


def compile_options(num_replicas: int = 1, num_partitions: int = 1, devices=None,
                    spmd: bool = False, options=None):
    """jaxlib's ``CompileOptions`` for a program of ``num_replicas`` x ``num_partitions``
    on ``devices`` (replica-major; none: XLA's default assignment), with XLA's SPMD
    partitioner (reading Shardy's attributes) when ``spmd``, and the XLA option pairs
    ``options``."""
    co = xc.CompileOptions()
    co.num_replicas = num_replicas
    co.num_partitions = num_partitions
    if devices is not None:  # pin the logical->physical assignment (else: device 0)
        ids = np.array([d.id for d in devices], dtype=np.int32).reshape(num_replicas,
                                                                       num_partitions)
        co.device_assignment = xc.DeviceAssignment.create(ids)
    if spmd:
        co.executable_build_options.use_spmd_partitioning = True
        co.executable_build_options.use_shardy_partitioner = True
    if options:
        co.env_option_overrides = list(options)
    return co


def compile(text: str, devices, num_replicas: int = 1, num_partitions: int = 1,
            spmd: bool = False, options=None, fun_name: str | None = None):
    """Compile StableHLO ``text`` for ``devices``; returns a jaxlib LoadedExecutable.

    ``options`` are XLA compiler options as (name, value) pairs (jit's ``compiler_options``).
    The Python callables of the module's host callbacks (``text.host_callbacks``, a
    ``ModuleText``) are handed to XLA with it. Programs without host callbacks go through
    the persistent compilation cache (``runtime.compile_cache``): loaded from it when an
    entry exists, written to it after XLA compiles them. ``fun_name`` (``"jit(f)"``) names
    the program to the profiler and plax.monitoring (default: from the module's name).
    """
    with pipeline_steps.step("compile", fun_name or (lambda: module_fun_name(text)), BACKEND_COMPILE_EVENT):
        return _compile(text, devices, num_replicas, num_partitions, spmd, options)


def _compile(text, devices, num_replicas, num_partitions, spmd, options):
    _exiting[0] and shutdown.park()
    platforms.check_compiler_usable()
    client = devices[0].client
    co = compile_options(num_replicas, num_partitions, devices, spmd, options)
    callbacks = [host_transfer_callback(client, c) if hasattr(c, "send_channels") else c
                 for c in getattr(text, "host_callbacks", ())]
    device_list = xc.DeviceList(tuple(devices))
    key = None
    # Imported here, not at load: it brings hashlib (OpenSSL), a cost every import paid.
    from plax.runtime import compile_cache
    if compile_cache.enabled():
        if callbacks:  # their Python callables cannot be written to disk
            compile_cache.note_uncacheable(text, "host callbacks")
        elif _hlo_transforms:  # a registered pass must see every compilation
            compile_cache.note_uncacheable(text, "registered HLO module transformations")
        else:
            pipeline_steps.record_event(CACHE_EVENTS + "compile_requests_use_cache")
            key = _cache_key(text, client, devices, num_replicas, num_partitions, spmd, options)
            fetch_start = time.time()
            exe = _cache_fetch(key, text, client, device_list, co)
            if exe is not None:
                pipeline_steps.record_event(CACHE_EVENTS + "cache_hits")
                if pipeline_steps.span_recorder is not None:
                    pipeline_steps.span_recorder(CACHE_EVENTS + "cache_retrieval_time_sec", fetch_start,
                                  time.time())
                return exe
            pipeline_steps.record_event(CACHE_EVENTS + "cache_misses")
    start = time.perf_counter()
    try:
        if callbacks:  # only the parsed-module overload takes host callbacks
            exe = client.compile_and_load(_parse_module(text), executable_devices=device_list,
                                          compile_options=co, host_callbacks=callbacks)
        else:
            exe = client.compile_and_load(text, device_list, co)
    except xc.XlaRuntimeError as e:
        raise JaxRuntimeError(f"XLA failed to compile the program: {e}\n--- module ---\n{text}") from e
    if key is not None:
        compile_cache.store(key, text, lambda: client.serialize_executable(exe),
                            time.perf_counter() - start)
    return exe


def host_transfer_callback(client, callback):
    """jaxlib's host callback for a ``lowering.stablehlo.HostTransferCallback`` (a TPU
    program's send/recv host transfers): the client runs its function on their arrays."""
    def shapes(pairs):
        return [xc.Shape.array_shape(np.dtype(dtype), tuple(shape)) for shape, dtype in pairs]
    return client.make_python_callback_from_host_send_and_recv(
        callback.fn, shapes(callback.sent), shapes(callback.received),
        list(callback.send_channels), list(callback.recv_channels), pickle.dumps)


def _cache_key(text, client, devices, num_replicas, num_partitions, spmd, options) -> bytes:
    """The persistent cache's key: the text and everything in its CompileOptions, the
    devices, the platform and jaxlib."""
    facts = (num_replicas, num_partitions, bool(spmd), tuple(options or ()),
             tuple((d.id, d.device_kind, d.process_index) for d in devices),
             client.platform, client.platform_version, JAXLIB_VERSION)
    from plax.runtime import compile_cache
    return compile_cache.make_key(text, facts)


def _cache_fetch(key, text, client, device_list, co):
    """The cached executable of ``key``, or None."""
    if "lapack_" in text:  # its kernels must be registered before XLA loads the program
        _load_lapack_kernels()
    from plax.runtime import compile_cache
    return compile_cache.fetch(key, text, lambda blob: loaded_bytes.remember(
        client.deserialize_executable(blob, device_list, co), blob))


def result_handler(aval, sharding, committed: bool = True):
    """A handler turning raw results into arrays (0.11 dropped ``_skip_checks``)."""
    try:
        return xc.array_result_handler(aval, sharding, committed, _skip_checks=True)
    except TypeError:
        return xc.array_result_handler(aval, sharding, committed)


def execute(exe, args, handlers, text=None):
    """Run ``exe`` on jaxlib arrays; returns jaxlib arrays built by ``handlers``. ``text``,
    the program's module, names it to the profiler and in errors."""
    _exiting[0] and shutdown.park()
    if _distributed_call is not None:  # many processes: run it where a dead peer can't trap us
        return _distributed_call(_run_checked, _execute, exe, args, handlers, text)
    if not _plain_flags[0] or _active_overrides[0] or profiler_active():  # (inlined: hot)
        return _watched(_execute, exe, args, handlers, text)
    return _execute(exe, args, handlers)


def execute_with_completion(exe, args, handlers, text=None):
    """``execute``, also returning a token whose ``block_until_ready()`` waits until the run
    (its host callbacks included) has finished."""
    _exiting[0] and shutdown.park()
    if _distributed_call is not None:
        return _distributed_call(_run_checked, _execute_with_completion, exe, args, handlers,
                                 text)
    return _run_checked(_execute_with_completion, exe, args, handlers, text)


def _run_checked(run, exe, args, handlers, text):
    if not _plain_flags[0] or _active_overrides[0] or profiler_active():
        return _watched(run, exe, args, handlers, text)
    return run(exe, args, handlers)


def _execute(exe, args, handlers):
    try:
        return exe.execute_sharded(args).consume_with_handlers(handlers)
    except XlaRuntimeError as e:
        raise_callback_failure(e)
        raise


def _execute_with_completion(exe, args, handlers):
    try:
        results = exe.execute_sharded(args, with_tokens=True)
        done = results.consume_token()
        return results.consume_with_handlers(handlers), done
    except XlaRuntimeError as e:
        raise_callback_failure(e)
        raise


# A run is watched when a flag may refuse it (jax_no_execution: not plain, or an override
# block) or a profiler session is collecting: two list reads and a C++ flag read per run.
_plain_flags, _active_overrides = config._plain, config._active_overrides


def _watched(run, exe, args, handlers, text):
    name = module_fun_name(text) if text is not None else executable_name(exe)
    if config.read("no_execution"):
        raise RuntimeError(f"JAX tried to execute function {name}, but the no_execution "
                           "config option is set (plax.no_execution).")
    with pipeline_steps.step("execute", name):
        return run(exe, args, handlers)


def wait_for(token) -> None:
    """Block on a completion token of ``execute_with_completion``."""
    if _distributed_wait is not None:
        _distributed_wait((token,))
    try:
        token.block_until_ready()
    except XlaRuntimeError as e:
        raise_callback_failure(e)
        raise


_mlir_context = None


def mlir_context():
    """The jaxlib MLIR context plax parses modules in (the dialects plax emits registered)."""
    _parse_module("module {}")
    return _mlir_context


def _parse_module(text: str):
    """``text`` parsed into a jaxlib MLIR module (with the dialects plax emits registered)."""
    global _mlir_context
    from jaxlib.mlir import ir
    with _lock:
        if _mlir_context is None:
            from jaxlib.mlir._mlir_libs import _jax_mlir_ext
            from jaxlib.mlir.dialects import chlo, mhlo, sdy
            from jaxlib.mlir.dialects import stablehlo as stablehlo_dialect
            context = ir.Context()
            registry = ir.DialectRegistry()
            _jax_mlir_ext.register_dialects(registry)
            context.append_dialect_registry(registry)
            context.load_all_available_dialects()
            sdy.register_dialect(context)
            mhlo.register_mhlo_dialect(context)
            chlo.register_dialect(context)
            stablehlo_dialect.register_dialect(context)
            _mlir_context = context
        with _mlir_context:
            return ir.Module.parse(str(text))


def output_hlo_shardings(exe) -> list:
    """The HloSharding XLA chose for each output of an SPMD executable (None for a program
    over one device, where XLA reports none)."""
    protos = exe.get_output_shardings()
    return None if protos is None else [xc.HloSharding.from_proto(s) for s in protos]


def parameter_hlo_shardings(exe) -> list:
    return [xc.HloSharding.from_proto(s) for s in exe.get_parameter_shardings()]


def optimized_hlo_text(exe) -> str:
    return exe.hlo_modules()[0].to_string()


def mlir_module(text: str):
    """A StableHLO module's text as jaxlib's MLIR module object (``str()`` prints it)."""
    return _parse_module(text)


def hlo_computation(text: str):
    """A StableHLO module converted to XLA's HLO, as jaxlib's XlaComputation (before XLA's
    optimisations; ``as_hlo_text()`` prints it)."""
    return _jax.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False,
                                                    return_tuple=False)


def stablehlo_to_hlo_text(text: str, debug_info: bool = False) -> str:
    """HLO text of a StableHLO module (before XLA's optimisations); metadata if ``debug_info``."""
    try:
        from jaxlib import _hlo as hlo_lib
    except ImportError:  # jaxlib builds that keep the HLO printer in _jax
        hlo_lib = _jax
    computation = hlo_computation(text)
    options = hlo_lib.HloPrintOptions.short_parsable()
    options.print_metadata = debug_info
    return computation.as_hlo_module().to_string(options)


def hlo_cost_analysis(text: str, platform: str | None = None) -> dict:
    """XLA's cost estimate (flops, bytes accessed, ...) of a StableHLO module as lowered,
    before XLA's optimisations, on ``platform``'s backend."""
    module = hlo_computation(text).get_hlo_module()
    return dict(_jax.hlo_module_cost_analysis(get_backend(platform), module))


# --- LAPACK kernels (CPU linear algebra) -------------------------------------------------
_lapack_ready = False


def lapack_target(name: str) -> str:
    """The custom-call target ``name`` (e.g. "lapack_spotrf_ffi") of jaxlib's CPU LAPACK
    kernels, ready to compile and run: on first use every kernel is registered as a typed-FFI
    target and pointed at SciPy's LAPACK (executing one before that crashes the process)."""
    _load_lapack_kernels()
    return name


def _load_lapack_kernels() -> None:
    global _lapack_ready
    if not _lapack_ready:
        with _lock:
            if not _lapack_ready:
                from jaxlib.cpu import _lapack
                try:
                    _lapack.initialize()  # loads LAPACK/BLAS from scipy.linalg.cython_*
                except ImportError as e:
                    raise ImportError("plax's linear algebra on CPU runs jaxlib's LAPACK "
                                      "kernels, which take their LAPACK from SciPy: "
                                      "pip install scipy") from e
                for target, capsule in _lapack.registrations().items():
                    xc.register_custom_call_target(target, capsule, platform="cpu",
                                                   api_version=1)
                _lapack_ready = True


# --- jaxlib's C++ jit dispatch ----------------------------------------------------------
# jaxlib's ``pjit`` object flattens arguments with a C++ pytree registry, looks up their
# signature in a C++ cache and runs the executable, all without Python frames; on a miss it
# calls back into Python, which answers with the "fast-path data" below so that the next
# call with the same signature stays in C++. runtime/cpp_jit.py drives it.
PyTreeRegistry = _jax.pytree.PyTreeRegistry
ArrayImpl = xc.ArrayImpl  # plax's concrete arrays (runtime/array.py)
JitFunctionCache = _jax.PjitFunctionCache
JitFunction = _jax.PjitFunction


def attach_methods(cls, methods: dict) -> None:
    """Give jaxlib's C++ class ``cls`` (ArrayImpl, JitFunction) these methods and attributes."""
    for name, value in methods.items():
        setattr(cls, name, value)


def answer_lookups_in(cls, names) -> None:
    """Have jaxlib's own members ``names`` of ``cls`` (methods or properties a user calls
    directly) run with the ``jax`` modules they import answered by plax. A JAX installed
    beside plax would otherwise be imported by them, and it puts its own methods on these
    shared C++ classes in place of plax's."""
    for name in names:
        member = cls.__dict__[name]
        if isinstance(member, property):
            def getter(self, _get=member.__get__):
                with _answer_jaxlib_lookups:
                    return _get(self)
            setattr(cls, name, property(getter, doc=member.__doc__))
        else:
            def method(self, *args, _cpp=member, **kwargs):
                with _answer_jaxlib_lookups:
                    return _cpp(self, *args, **kwargs)
            method.__name__, method.__doc__ = name, member.__doc__
            setattr(cls, name, method)


class FastpathData(tuple):
    """What the C++ cache stores per signature (jaxlib reads these attributes by name)."""

    __slots__ = ()
    _fields = ("xla_executable", "out_pytree_def", "in_shardings", "out_shardings", "out_avals",
               "out_committed", "kept_var_bitvec", "in_device_local_layouts", "const_args")

    def __new__(cls, *values):
        return tuple.__new__(cls, values)


for _i, _name in enumerate(FastpathData._fields):
    setattr(FastpathData, _name, property(lambda self, i=_i: self[i]))


def jit_key_setting(name: str, value, in_key: bool = True):
    """A setting the C++ jit cache reads on every call (part of its key when ``in_key``)."""
    return _jax.config.Config(name, value, include_in_jit_key=in_key)


def set_local_jit_setting(setting, value) -> None:
    """Set a jit setting for this thread; ``value`` None clears it (the global one holds)."""
    setting.set_local(_jax.config.unset if value is None else value)


def install_jit_settings(disable_jit, enable_x64, post_hook) -> None:
    """Point jaxlib's C++ jit at the settings it consults: whether jit is disabled, whether
    Python scalars are 64-bit, and a hook called after each fast-path run (None: none)."""
    _jax.jax_jit.set_disable_jit_state(disable_jit)
    _jax.jax_jit.set_enable_x64_state(enable_x64)
    _jax.jax_jit.set_post_hook_state(post_hook)


def cpp_jit_function(name, fun, cache_miss, static_argnums, static_argnames, cache_key,
                     registry, shard_arg, cache):
    """jaxlib's C++ jit callable (see the section comment)."""
    return _jax.pjit(name, fun, cache_miss, list(static_argnums), list(static_argnames),
                     cache_key, registry, shard_arg, cache)


def clear_all_jit_caches() -> None:
    _jax.PjitFunctionCache.clear_all()


# --- foreign functions (plax.ffi), DLPack, executables as bytes --------------------------
def register_custom_call_target(name: str, fn, platform: str = "cpu", api_version: int = 1,
                                **kwargs) -> None:
    """Make ``fn`` (a PyCapsule holding an XLA FFI handler, or a dict of them by stage name)
    the custom-call target ``name`` on ``platform``; ``api_version`` 1 is the typed FFI, 0
    the older untyped custom call. Registered before the platform's client starts, it is
    held by jaxlib until then."""
    xc.register_custom_call_target(name, fn, platform, api_version, **kwargs)


# Cross-host array transfers (jax.experimental.transfer): jaxlib's server and connection.
TransferServer, TransferConnection = _jax.TransferServer, _jax.TransferConnection
start_transfer_server = _jax.start_transfer_server
make_error_array = getattr(_jax, "_make_error_array", None)

# What a buffer callback gets: its buffers, the execution context and its stages.
FfiBuffer, FfiExecutionContext, FfiExecutionStage = \
    _jax.ffi.Buffer, _jax.ffi.ExecutionContext, _jax.ffi.ExecutionStage


def register_custom_type(name: str, type_registration, platform: str = "cpu") -> None:
    """Register a user type of the FFI (``{"type_id": capsule, "type_info": capsule}``)."""
    xc.register_custom_type(name, type_registration, platform=platform)


def register_custom_call_as_batch_partitionable(name: str) -> None:
    """Tell XLA's partitioner that custom call ``name`` may run per shard of leading dims."""
    xc.register_custom_call_as_batch_partitionable(name)


def include_dir() -> str:
    """The directory of C/C++ headers jaxlib ships (``xla/ffi/api/ffi.h``, ...)."""
    package = jaxlib.__file__ or next(iter(getattr(jaxlib, "__path__", ())), None)
    if package is None:
        raise RuntimeError("Cannot determine jaxlib directory: the jaxlib package has neither "
                           "__file__ nor __path__.")
    root = os.path.dirname(os.path.abspath(package)) if jaxlib.__file__ else package
    return os.path.join(root, "include")


def from_dlpack(capsule, device, stream=None, copy=None, dl_device_type=None):
    """A single-device jaxlib array over a DLPack capsule's data (no copy where XLA can use
    the memory as it is: compact strides and aligned data; otherwise jaxlib copies)."""
    with _answer_jaxlib_lookups:  # jaxlib makes the array's aval and sharding through "jax"
        try:
            return _jax.dlpack_managed_tensor_to_buffer(capsule, device, stream, copy,
                                                        dl_device_type)
        except TypeError:  # a jaxlib whose binding has no device-type argument
            return _jax.dlpack_managed_tensor_to_buffer(capsule, device, stream, copy)


def buffer_pointer(buf) -> int:
    """The address of a single-device jaxlib array's data."""
    return buf.unsafe_buffer_pointer()


def serialize_executable(exe) -> bytes:
    """A loaded executable as bytes (``deserialize_executable`` loads it again)."""
    blob = loaded_bytes.loaded_from(exe)
    return blob if blob is not None else exe.client.serialize_executable(exe)


def deserialize_executable(blob: bytes, devices, num_partitions: int = 1):
    """A loaded executable from ``serialize_executable``'s bytes, to run on ``devices``
    (those it was compiled for, or as many others of the same client), in replica-major
    order over ``num_partitions`` partitions (an SPMD program: all of them)."""
    platforms.check_compiler_usable()
    client = devices[0].client
    co = xc.CompileOptions()  # the device assignment the program runs with (else its own)
    co.num_replicas, co.num_partitions = len(devices) // num_partitions, num_partitions
    co.device_assignment = xc.DeviceAssignment.create(
        np.array([d.id for d in devices], dtype=np.int32).reshape(-1, num_partitions))
    exe = client.deserialize_executable(blob, xc.DeviceList(tuple(devices)), co)
    return loaded_bytes.remember(exe, blob)


# --- the profiler ------------------------------------------------------------------
# jaxlib's profiler: sessions writing TensorBoard/Perfetto traces, TraceMe annotations (cheap
# when no session is active: one C++ flag read), the remote-capture server.

TraceMe = _profiler.TraceMe
ProfileOptions = _profiler.ProfileOptions
ProfileData = _profile_data.ProfileData
ProfileEvent = _profile_data.ProfileEvent
ProfilePlane = _profile_data.ProfilePlane
profiler_active = TraceMe.is_enabled  # is a profiler session collecting annotations now?
pipeline_steps.TraceMe = TraceMe


def profiler_session(options):
    """Start collecting a trace (jaxlib's ProfilerSession; ``stop_and_export(dir)`` ends it)."""
    return _profiler.ProfilerSession(options)


def set_profiler_metadata(key: str, value: str) -> None:
    """Metadata written with the next trace (versions); no-op where jaxlib lacks it."""
    if hasattr(_profiler, "set_metadata"):
        _profiler.set_metadata(key, value)


def clear_profiler_metadata() -> None:
    if hasattr(_profiler, "clear_metadata"):
        _profiler.clear_metadata()


def start_profiler_server(port: int):
    """jaxlib's profiler server on ``port`` (stopped when the returned object is dropped)."""
    return _profiler.start_server(port)


def register_profiler_subprocess(pid: int, port: int):
    return _profiler.register_subprocess(pid, port)


def profiled_instructions_proto(tensorboard_dir: str) -> bytes:
    return _profiler.get_profiled_instructions_proto(tensorboard_dir)


def heap_profile(client) -> bytes:
    """The client's live buffers and executables as a pprof protocol buffer (not gzipped)."""
    return client.heap_profile()



def approx_top_k_reduction_output_size(input_size: int, rank: int, k: int, recall_target: float,
                                       aggregate_to_topk: bool, input_size_override: int) -> int:
    """XLA's size of approx_top_k's reduced dimension (its ApproxTopK shape rule)."""
    return int(_jax.approx_top_k_reduction_output_size(
        input_size, rank, k, float(recall_target), bool(aggregate_to_topk),
        input_size_override)[0])
