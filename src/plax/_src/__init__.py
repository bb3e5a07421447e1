"""``plax._src``: the private ``jax._src`` names that libraries built on JAX import.

With ``jax`` resolving to plax, ``jax._src.<module>`` is ``plax._src.<module>``. Each name here
is a thin alias onto plax's own mechanism; plax itself never uses this package. A face answers
JAX's other names from the public plax module of the same role (``_face.face_getattr``); a
name plax does not provide raises an AttributeError naming it and why, and is listed with its
reason in that module's docstring. The table lists the names and who needs them:

============================================  =============================  =====================
name                                          plax's mechanism               needed by
============================================  =============================  =====================
traceback_util.register_exclusion             core.source_info exclusions    equinox, flax
traceback_util.api_boundary                   core.tracebacks                flax
traceback_util.include_frame                  core.source_info exclusions    equinox
traceback_util._exclude_paths                 core.source_info exclusions    flax
dispatch.wait_for_tokens                      runtime.tokens: effects done   equinox
dtypes.TypePromotionError, finfo, ...         core.dtypes                    equinox, flax
core.trace_state_clean                        the current trace              numpyro
core.ShapedArray, physical_aval               core.avals                     flax
xla_bridge._backends                          runtime.xla's started clients  chex
compiler.backend_compile_and_load             a jaxlib client's compile      chex
tree_util._registry                           core.tree_core's node registry flax.nnx
ad_util.stop_gradient_p                       lax's stop_gradient primitive  lineax
flatten_util.ravel_pytree                     plax.flatten_util              blackjax
checkify.*                                    interpreters.checkify          flax.nnx
state.types.AbstractRef                       core.refs                      flax.nnx
tree_util.flatten_one_level                   core.tree_core                 orbax-checkpoint
distributed.global_state                      runtime.distributed's run      orbax-checkpoint
lib.jaxlib_extension_version                  jaxlib's extension version     grain
api_util.infer_argnums_and_argnames           a signature's parameters       e3nn-jax (jax-md)
core.Primitive                                core.primitive (extend.core's) jax-md
earray.EArray                                 runtime.array (KeyArray)       flax (fp8)
interpreters.pxla                             plax.interpreters.pxla         flax (fp8)
cudnn.fused_attention_stablehlo.check_*       nn.attention (no cuDNN kernel) keras
config.<flag>, bool_state, ...                core.config flags as States    JAX's tests
core.*                                        core avals/jaxpr/trace, extend JAX's tests
dtypes.*                                      core.dtypes (its lattice)      JAX's tests
util.safe_map, cache, ...                     jaxlib.utils, core.caches      JAX's tests
lib.xla_client, _jax, version, ...            runtime.xla's jaxlib           JAX's tests
lib.mlir.ir, lib.mlir.dialects.hlo            lowering.mlir_bindings         JAX's tests
interpreters.ad/batching/mlir/...             plax.interpreters              JAX's tests
linear_util, source_info_util                 plax.extend                    JAX's tests
effects.ordered_effects, ...                  core.effects (Effect.ordered)  JAX's tests
dispatch.apply_primitive, simple_impl         runtime.dispatch               JAX's tests
xla_bridge.get_backend, devices, ...          runtime.xla, api.devices       JAX's tests
sharding(_impls), mesh, layout                plax.sharding                  JAX's tests
shard_map, xla_metadata, compute_on           api.shard_map, experimental    JAX's tests
lax.lax/control_flow/linalg/...               plax.lax, higher_order         JAX's tests
numpy.util/fft/indexing                       plax.numpy                     JAX's tests
scipy.special, scipy.sparse.linalg            plax.scipy                     JAX's tests
random.prng/core/threefry2x32/rbg             first_order.prng, random       JAX's tests
state.primitives.get_p, discharge_state, ...  first_order.state, discharge JAX's tests
export.shape_poly                             core.symbolic_shapes           JAX's tests
tpu.linalg.qdwh, svd                          lax.linalg.qdwh, svd_qdwh      JAX's tests
api, api_util, array, typing, ...             the public plax modules        JAX's tests
test_util (jtu): JaxTestCase, sample_product  plax's API; test_util_parts  JAX's own tests
internal_test_util.lax_test_util              plax.lax, test_util            JAX's lax tests
hypothesis_test_util.setup_hypothesis         hypothesis, test_util          JAX's state tests
============================================  =============================  =====================
"""

_SUBMODULES = frozenset({
    "abstract_arrays", "ad_checkpoint", "ad_util", "api", "api_util", "array",
    "blocked_sampler", "callback", "checkify", "cloud_tpu_init", "compilation_cache",
    "compilation_cache_interface", "compiler", "compute_on", "config", "core", "cudnn",
    "custom_derivatives", "dispatch", "distributed", "dlpack", "dtypes", "earray", "effects",
    "error_check", "export", "flatten_util", "hijax", "indexing", "interpreters", "jaxpr_util",
    "lax", "layout", "lib", "linear_util", "literals", "mesh", "mesh_utils", "monitoring",
    "named_sharding", "numpy", "op_shardings", "path", "pretty_printer", "profiler", "random",
    "scipy", "shard_map", "sharding", "sharding_impls", "source_info_util", "state", "tpu",
    "traceback_util", "tree_util", "typing", "util", "xla_bridge", "xla_metadata",
    "hypothesis_test_util", "internal_test_util", "test_util", "test_warning_util"})


def __getattr__(name):
    # ``jax._src.xla_bridge._backends`` is read without importing the submodule first.
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
