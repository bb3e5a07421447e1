"""``plax.experimental.key_reuse``: as ``jax.experimental.key_reuse``, a module with no
public names. The checker itself is ``plax.interpreters.key_reuse``: turn it on with
``plax.config.update("jax_debug_key_reuse", True)`` (or ``jax_debug_key_reuse`` as a
context manager) and a PRNG key used twice raises ``KeyReuseError``."""
