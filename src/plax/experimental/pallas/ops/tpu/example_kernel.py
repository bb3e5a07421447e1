"""The smallest TPU kernel, as ``jax.experimental.pallas.ops.tpu.example_kernel``: doubling
an array in one block (interpret mode on a backend other than a TPU)."""
from __future__ import annotations

import plax
from plax.experimental import pallas as pl

__all__ = ["double", "double_kernel"]


def double_kernel(x_ref, y_ref):
    """``y = 2 * x`` on whole blocks."""
    y_ref[:] = x_ref[:] * 2


def double(x):
    """``2 * x``, computed by ``double_kernel``."""
    return pl.pallas_call(double_kernel, out_shape=x,
                          interpret=plax.default_backend() != "tpu")(x)
