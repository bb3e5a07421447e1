"""``plax.experimental.pjit``: the older name of ``jit`` with shardings (JAX keeps it as an
alias: ``pjit(f, in_shardings=..., out_shardings=...)`` is ``jit`` with the same options)."""
from plax.api.jit import jit as pjit  # noqa: F401

__all__ = ["pjit"]
