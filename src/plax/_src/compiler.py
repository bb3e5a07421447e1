"""``jax._src.compiler``: compiling an MLIR module with a jaxlib client, and the compile
options plax builds (``plax.extend.backend.get_compile_options``)."""
from plax.extend.backend import get_compile_options  # noqa: F401


def backend_compile_and_load(backend, module, executable_devices, options, host_callbacks=()):
    """Compile ``module`` (a jaxlib ``ir.Module``) with ``backend`` (a jaxlib client) for
    ``executable_devices`` under compile ``options``; the loaded executable."""
    return backend.compile_and_load(module, executable_devices=executable_devices,
                                    compile_options=options, host_callbacks=list(host_callbacks))
