"""``jax._src.cloud_tpu_init``: the set-up JAX does on Cloud TPU VMs, which plax does when it
starts the TPU client (``plax.runtime.tpu_plugin``); ``cloud_tpu_init()`` does it now."""
from plax.core.config import config as _config
from plax.runtime import tpu_plugin as _tpu_plugin
from plax.runtime.xla import JAXLIB_VERSION as _VERSION


def cloud_tpu_init() -> None:
    """Where libtpu is installed: libtpu's environment, and platforms 'tpu,cpu' when no
    platforms were asked for."""
    if _tpu_plugin.find() is None:
        return
    _tpu_plugin.set_up_environment(_VERSION)
    if not _config.read("platforms"):
        _config.update("platforms", "tpu,cpu")
