"""``jax._src.compiler``: compiling an MLIR module with a jaxlib client."""


def backend_compile_and_load(backend, module, executable_devices, options, host_callbacks=()):
    """Compile ``module`` (a jaxlib ``ir.Module``) with ``backend`` (a jaxlib client) for
    ``executable_devices`` under compile ``options``; the loaded executable."""
    return backend.compile_and_load(module, executable_devices=executable_devices,
                                    compile_options=options, host_callbacks=list(host_callbacks))
