"""Interpreters beyond the core transformations (checkify and the key-reuse checker), and
``jax.interpreters``' modules as faces over plax's rule tables: ``ad``, ``batching``,
``mlir``, ``partial_eval``, ``pxla`` and ``xla`` (loaded on first use, also as attributes)."""
_FACES = frozenset({"ad", "batching", "mlir", "partial_eval", "pxla", "xla"})


def __getattr__(name):
    if name in _FACES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
