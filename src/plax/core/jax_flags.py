"""JAX's configuration flags beyond plax's own table, which plax accepts and stores.

JAX programs and libraries set many flags that concern JAX's own machinery (GPU and TPU
backends, Pallas, jax2tf, export, profiling, traceback filtering, ...).
``jax.config.update(name, value)``, ``jax.config.<name>`` and the environment variables
``PLAX_<NAME>`` / ``JAX_<NAME>`` work for every one of them in plax, with JAX 0.10.2's defaults
and value checks, so such programs run. Most are stored only; plax acts on these:
``jax_legacy_prng_key`` ('warn'/'error' on legacy uint32 keys given to ``plax.random``, as in
JAX), ``jax_default_prng_impl`` (threefry2x32, rbg, unsafe_rbg, threefry4x32, philox2x32,
philox4x32), the transfer guards and
``jax_array_garbage_collection_guard`` (jaxlib's guards, runtime/xla.py), ``jax_no_tracing``,
``jax_no_execution``, ``jax_allow_f16_reductions``, ``jax_softmax_custom_jvp`` and
``jax_auto_pcast`` (see plax/api/runtime_flags.py, whose context managers set them), and
``jax_error_checking_behavior_{nan,divide,oob}`` (plax.numpy/error_checks.py). The flags plax
defines itself are in ``plax.core.config``.
"""

# name -> JAX's default, by the kind of value the flag takes.
BOOL_FLAGS = {
    'check_vma': False, 'eager_constant_folding': False,
    'jax2tf_associative_scan_reductions': False, 'jax2tf_default_native_serialization': True,
    'jax_allow_f16_reductions': True, 'jax_auto_pcast': True,
    'jax_bcoo_cusparse_lowering': False, 'jax_check_proxy_envs': True,
    'jax_check_static_indices': False, 'jax_compilation_cache_check_contents': False,
    'jax_compilation_cache_expect_pgle': False,
    'jax_compilation_cache_include_metadata_in_key': False,
    'jax_compiler_enable_remat_pass': True, 'jax_cpu_enable_async_dispatch': True,
    'jax_custom_vjp3': False, 'jax_debug_leaked_clients_on_clear_backends': False,
    'jax_disable_bwd_checks': False, 'jax_disable_most_optimizations': False,
    'jax_disable_vmap_shmap_error': False, 'jax_disallow_mesh_context_manager': False,
    'jax_distributed_debug': False, 'jax_enable_custom_prng': False, 'jax_enable_pgle': False,
    'jax_enable_preemption_service': True, 'jax_enable_recoverability': False,
    'jax_experimental_unsafe_xla_runtime_errors': False,
    'jax_export_ignore_forward_compatibility': False,
    'jax_force_dcn_cross_host_transfers': False, 'jax_high_dynamic_range_gumbel': False,
    'jax_include_debug_info_in_dumps': True, 'jax_include_full_tracebacks_in_locations': True,
    'jax_log_checkpoint_residuals': False, 'jax_mosaic_allow_hlo': False,
    'jax_mutable_array_checks': True, 'jax_no_execution': False, 'jax_no_tracing': False,
    'jax_pallas_enable_debug_checks': False,
    'jax_pallas_use_mosaic_gpu': True, 'jax_pallas_verbose_errors': False,
    'jax_pprint_use_color': True, 'jax_ragged_dot_use_gpu_pallas_triton_lowering': False,
    'jax_ragged_dot_use_ragged_dot_instruction': True,
    'jax_raise_persistent_cache_errors': False, 'jax_refs_to_pins': False, 'jax_remat3': False,
    'jax_remove_custom_partitioning_ptr_from_cache_key': False,
    'jax_remove_size_one_mesh_axis_from_type': False, 'jax_scan3': False,
    'jax_share_binary_between_hosts': False, 'jax_softmax_custom_jvp': False,
    'jax_sort_devices_by_process_index': True, 'jax_thread_guard': False,
    'jax_threefry_gpu_kernel_lowering': False, 'jax_use_direct_linearize': True,
    'jax_use_emit_pipeline_primitive': False, 'jax_use_shardy_partitioner': True,
    'jax_use_simplified_jaxpr_constants': False,
}

INT_FLAGS = {  # an int, or None
    'jax_captured_constants_report_frames': 0, 'jax_captured_constants_warn_bytes': 2000000000,
    'jax_compiler_detailed_logging_min_ops': 10,
    'jax_cpu_get_global_topology_timeout_minutes': 5,
    'jax_cpu_get_local_topology_timeout_minutes': 2, 'jax_embedded_constants_max_bytes': 32,
    'jax_export_calling_convention_version': 10, 'jax_pgle_aggregation_percentile': 90,
    'jax_pgle_profiling_runs': 3, 'jax_random_seed_offset': 0, 'jax_serialization_version': 0,
    'jax_share_binary_between_hosts_timeout_ms': 1200000,
    'jax_traceback_in_locations_limit': 100, 'jax_tracer_error_num_traceback_frames': 5,
    'jax_xla_profile_version': 0, 'mock_num_gpu_processes': 0,
}

FLOAT_FLAGS = {
    'jax_exec_time_optimization_effort': 0.0, 'jax_memory_fitting_effort': 0.0,
}

STRING_FLAGS = {  # any string (or None)
    'jax_backend_target': '', 'jax_cross_host_transfer_socket_address': '',
    'jax_cross_host_transfer_timeout_seconds': None,
    'jax_cross_host_transfer_transfer_size': None, 'jax_cross_host_transport_addresses': '',
    'jax_cuda_visible_devices': 'all', 'jax_debug_log_modules': '',
    'jax_dump_ir_modes': 'stablehlo', 'jax_dump_ir_to': '',
    'jax_hlo_source_file_canonicalization_regex': None, 'jax_mock_gpu_topology': '',
    'jax_oneapi_visible_devices': 'all',
    'jax_persistent_cache_enable_xla_caches': 'xla_gpu_per_fusion_autotune_cache_dir',
    'jax_pjrt_client_create_options': None, 'jax_platform_name': '',
    'jax_rocm_visible_devices': 'all', 'jax_source_url_schema': None, 'jax_xla_backend': '',
}

_TRANSFER_GUARD = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")
_LEVELS = ("UNKNOWN", "O0", "O1", "O2", "O3")
CHOICE_FLAGS = {  # name -> (default, the values JAX accepts); None is accepted too
    'jax_array_garbage_collection_guard': (None, ('allow', 'log', 'fatal')),
    'jax_cpu_collectives_implementation': ('gloo', ('gloo', 'mpi', 'megascale')),
    'jax_default_prng_impl': ('threefry2x32', ('threefry2x32', 'rbg', 'unsafe_rbg',
                                               'threefry4x32', 'philox2x32', 'philox4x32')),
    'jax_error_checking_behavior_divide': ('ignore', ('ignore', 'raise')),
    'jax_error_checking_behavior_nan': ('ignore', ('ignore', 'raise')),
    'jax_error_checking_behavior_oob': ('ignore', ('ignore', 'raise')),
    'jax_explicit_x64_dtypes': ('warn', ('warn', 'error', 'allow')),
    'jax_legacy_prng_key': ('allow', ('allow', 'warn', 'error')),
    'jax_logging_level': ('NOTSET', ('NOTSET', 'DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL')),
    'jax_memory_fitting_level': ('O2', _LEVELS),
    'jax_optimization_level': ('UNKNOWN', _LEVELS),
    'jax_send_traceback_to_runtime': ('off', ('off', 'on', 'full')),
    'jax_traceback_filtering': (
        'auto', ('off', 'tracebackhide', 'remove_frames', 'quiet_remove_frames', 'auto')),
    'jax_transfer_guard': (None, _TRANSFER_GUARD),
    'jax_transfer_guard_device_to_device': (None, _TRANSFER_GUARD),
    'jax_transfer_guard_device_to_host': (None, _TRANSFER_GUARD),
    'jax_transfer_guard_host_to_device': (None, _TRANSFER_GUARD),
    'jax_use_magma': ('auto', ('off', 'on', 'auto')),
}
