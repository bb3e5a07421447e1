"""Interpreters beyond the core transformations (checkify and the key-reuse checker), and
``jax.interpreters``' modules as faces over plax's rule tables: ``ad``, ``batching``,
``mlir`` and ``partial_eval``."""
