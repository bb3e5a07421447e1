"""``plax.experimental.control_deps``: order ops XLA could otherwise run in any order.

``control_dep(src, dst)`` adds a control dependency: the op computing ``dst`` runs after
the one computing ``src``. It is a side-effecting FFI call to XLA's ``control_dep`` target
(``plax.ffi.ffi_call``, as in JAX), which XLA turns into the dependency; it returns nothing
and, like any FFI call without a ``vmap_method``, is refused by ``grad`` and ``vmap``.
"""
from __future__ import annotations

from plax.ffi import ffi_call

__all__ = ["control_dep", "schedule"]


def control_dep(src, dst):
    """Make the op computing ``dst`` run after the one computing ``src``."""
    return ffi_call("control_dep", (), has_side_effect=True)(src, dst)


def schedule(ops):
    """Run the ops computing ``ops`` in the order given: ``schedule([a, b, c])`` adds the
    control dependencies a -> b and b -> c."""
    for src, dst in zip(ops[:-1], ops[1:]):
        control_dep(src, dst)
