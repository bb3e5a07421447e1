"""``plax.extend``: JAX's extension API (``jax.extend``) on plax's own machinery.

Libraries built on JAX's internals (equinox, flax, numpyro, ...) define primitives, walk
jaxprs and register rules through these modules. Each is a thin face over plax: a primitive
made here is a plax primitive, and a rule registered here lands in plax's rule tables
(``plax.core.rules``), so it works under every plax transformation. Like JAX's, this API
carries no compatibility promise across releases.

The submodules load on first use.
"""
_SUBMODULES = frozenset({"backend", "core", "ifrt_programs", "linear_util", "lowering", "mlir",
                         "random", "sharding", "source_info_util", "xla"})


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")  # also binds it here
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
