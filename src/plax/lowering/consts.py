"""Constants of a called body: a higher-order primitive's lowering never drops them."""
from __future__ import annotations

import numpy as np


def const_operands(ctx, closed) -> list[str]:
    """SSA values of ``closed.consts`` (emitted as constants here), to pass to the lowered
    body ahead of its inputs; empty for a body without constants."""
    return [ctx.constant(host_value(c), v.aval)
            for v, c in zip(closed.jaxpr.constvars, closed.consts)]


def host_value(c) -> np.ndarray:
    """A constant's data on the host; for an array of PRNG keys, its physical words."""
    physical = getattr(c, "_physical_value", None)
    return physical() if physical is not None else np.asarray(c)
