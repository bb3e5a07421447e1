"""Constants of a called body: a higher-order primitive's lowering never drops them."""
from __future__ import annotations

import numpy as np


def const_operands(ctx, closed) -> list[str]:
    """SSA values of ``closed.consts`` (emitted as constants here), to pass to the lowered
    body ahead of its inputs; empty for a body without constants."""
    return [ctx.constant(np.asarray(c), v.aval)
            for v, c in zip(closed.jaxpr.constvars, closed.consts)]
