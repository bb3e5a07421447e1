"""``jax._src.dispatch``: running primitives eagerly (``plax.runtime.dispatch``) and waiting
for the effects of programs already issued (``plax.runtime.tokens``)."""
from plax.core.rules import impl_rules as _impl_rules
from plax.runtime import dispatch as _runtime
from plax.runtime import tokens as _tokens
from plax.runtime.tokens import barrier as wait_for_tokens  # noqa: F401

from plax._src import _face

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)


def apply_primitive(prim, *args, **params):
    """``prim`` on concrete ``args``, run as a one-equation compiled program."""
    return _runtime.run_primitive(prim, args, params)


def simple_impl(prim) -> None:
    """Have ``prim`` run eagerly as a one-equation compiled program (plax's way for any
    primitive without an impl rule of its own)."""
    _impl_rules.pop(prim, None)


class RuntimeTokens:
    """JAX's ``dispatch.runtime_tokens``: ``clear()`` waits for the effects issued so far
    and forgets the ordered-effect tokens; ``current_tokens`` maps each ordered effect to
    the token the last run having it returned (plax threads one token per set of devices,
    ``plax.runtime.tokens``, which runs with other ordered effects advance too)."""

    @property
    def current_tokens(self) -> dict:
        return _tokens.current_tokens()

    def clear(self) -> None:
        _tokens.barrier()
        _tokens.clear()

    def block_until_ready(self) -> None:
        _tokens.barrier()


runtime_tokens = RuntimeTokens()
