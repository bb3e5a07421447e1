"""``plax._src``: the private ``jax._src`` names that libraries built on JAX import.

With ``jax`` resolving to plax, ``jax._src.<module>`` is ``plax._src.<module>``. Each name here
is a thin alias onto plax's own mechanism; plax itself never uses this package. The table
lists every name and the library that needs it:

============================================  =============================  =====================
name                                          plax's mechanism               needed by
============================================  =============================  =====================
traceback_util.register_exclusion             core.source_info exclusions    equinox, flax
traceback_util.api_boundary                   (plax keeps whole tracebacks)  flax
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
state.types.AbstractRef                       (plax has no mutable refs yet) flax.nnx
tree_util.flatten_one_level                   core.tree_core                 orbax-checkpoint
distributed.global_state                      runtime.distributed's run      orbax-checkpoint
lib.jaxlib_extension_version                  jaxlib's extension version     grain
api_util.infer_argnums_and_argnames           a signature's parameters       e3nn-jax (jax-md)
core.Primitive                                core.primitive (extend.core's) jax-md
earray.EArray                                 runtime.array (KeyArray)       flax (fp8)
interpreters.pxla                             plax.interpreters.pxla         flax (fp8)
test_util (jtu): JaxTestCase, sample_product  plax's API; test_util_parts  JAX's own tests
internal_test_util.lax_test_util              plax.lax, test_util            JAX's lax tests
hypothesis_test_util.setup_hypothesis         hypothesis, test_util          JAX's state tests
============================================  =============================  =====================
"""

_SUBMODULES = frozenset({
    "ad_util", "api_util", "checkify", "compiler", "core", "dispatch", "distributed", "dtypes",
    "earray", "flatten_util", "hypothesis_test_util", "internal_test_util", "interpreters", "lib",
    "state", "test_util", "traceback_util", "tree_util", "xla_bridge"})


def __getattr__(name):
    # ``jax._src.xla_bridge._backends`` is read without importing the submodule first.
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
