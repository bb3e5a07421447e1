"""``multiple_of_p``: a hint that an integer is a multiple of some values (``pl.multiple_of``).

It computes nothing (every platform's lowering returns its operand); in a kernel lowered
for TPU it becomes ``tpu.assume_multiple``, which lets Mosaic prove a dynamic offset is
aligned (``x_ref[pl.ds(pl.multiple_of(i * 128, 128), 128)]``).
"""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, jvp_rules,
                             mosaic_lowering_rules, register_lowering)

__all__ = ["multiple_of_p"]

multiple_of_p = Primitive("multiple_of")


def _jvp(primals, tangents, *, values):
    return multiple_of_p.bind(primals[0], values=values), tangents[0]


def _batch(axis, vals, dims, *, values):
    return multiple_of_p.bind(vals[0], values=values), dims[0]


def _mosaic(ctx, x, *, values):
    x = ctx.value(x)
    for v in values:
        x = ctx.op1("tpu.assume_multiple", [x], x.aval, f"multiple = {int(v)} : i32")
    return x


abstract_eval_rules[multiple_of_p] = lambda aval, *, values: aval
register_lowering(multiple_of_p, lambda ctx, x, *, values: x)
jvp_rules[multiple_of_p] = _jvp
batch_rules[multiple_of_p] = _batch
mosaic_lowering_rules[multiple_of_p] = _mosaic
