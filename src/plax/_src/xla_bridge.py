"""``jax._src.xla_bridge``: the XLA clients started so far, by platform (``_backends``,
empty until plax first needs a device)."""
from plax.runtime import xla as _xla


def __getattr__(name):
    if name == "_backends":
        return dict(_xla._backends)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
