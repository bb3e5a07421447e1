"""``jax.experimental.key_reuse._core``: the key-reuse checker's signatures and entry points
(``plax.interpreters.key_reuse``). ``check_key_reuse(f, *args)`` traces ``f`` and raises
``KeyReuseError`` where it consumes a key twice, with or without ``jax_debug_key_reuse``."""
from plax.interpreters.key_reuse import (Forward, KeyReuseSignature, Sink, Source,  # noqa: F401
                                         assert_consumed, assert_consumed_value_p,
                                         assert_unconsumed, consume, consume_p, jaxpr_signature,
                                         signature_of as key_reuse_signature_from_eqn)
from plax.core.rules import key_reuse_rules as key_reuse_signatures  # noqa: F401


def jaxpr_type_signature(jaxpr) -> KeyReuseSignature:
    """The key-reuse signature of ``jaxpr``: inputs consumed, outputs fresh or forwarded."""
    return jaxpr_signature(jaxpr)


def function_type_signature(fun, *args) -> KeyReuseSignature:
    """The key-reuse signature of ``fun`` traced on ``args``."""
    from plax.api.jit import make_jaxpr  # (the public API sits above the checker)
    return jaxpr_signature(make_jaxpr(fun)(*args).jaxpr)


def check_key_reuse_jaxpr(jaxpr) -> None:
    """Raise KeyReuseError where ``jaxpr`` consumes a key twice."""
    jaxpr_signature(jaxpr)


def check_key_reuse(fun, /, *args) -> None:
    """Raise KeyReuseError where ``fun`` (traced on ``args``) consumes a key twice."""
    function_type_signature(fun, *args)
