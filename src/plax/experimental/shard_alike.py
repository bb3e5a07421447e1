"""``plax.experimental.shard_alike``: ask XLA to give two values the same sharding.

``shard_alike(x, y)`` returns ``x`` and ``y`` unchanged, through ``shard_alike_p``, whose
lowering puts both into one Shardy sharding group (``sdy.sharding_group``): XLA's
sharding propagation then lays them out alike, whichever of the two had a sharding to
start from. It is linear (its transpose ties the cotangents the same way) and batches by
lining the two batch dimensions up.
"""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.rules import Zero, abstract_eval_rules, batch_rules, register_lowering, \
    transpose_rules
from plax.core.trace import get_aval
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import ad_util
from plax.first_order.batch_util import move_batch_dim

__all__ = ["shard_alike"]

shard_alike_p = Primitive("shard_alike", multiple_results=True)


def shard_alike(x, y):
    """``(x, y)`` unchanged, each leaf of ``x`` sharded like the same leaf of ``y`` (the two
    pytrees must have one structure and leaves of equal shapes)."""
    x_flat, x_tree = tree_flatten(x)
    y_flat, y_tree = tree_flatten(y)
    if x_tree != y_tree:
        raise ValueError(f"Trees should be equal. Got x_tree: {x_tree}, y_tree: {y_tree}")
    for a, b in zip(x_flat, y_flat):
        sa, sb = get_aval(a).shape, get_aval(b).shape
        if sa != sb:
            raise ValueError(f"The leaves shapes of `x` and `y` should match. Got `x` leaf "
                             f"shape: {sa} and `y` leaf shape: {sb}. (shard_alike ties "
                             "arrays of one shape; reshape one of them first.)")
    outs = [shard_alike_p.bind(a, b) for a, b in zip(x_flat, y_flat)]
    return (tree_unflatten(x_tree, [o[0] for o in outs]),
            tree_unflatten(y_tree, [o[1] for o in outs]))


def _abstract(x, y):
    return [x, y]


def _lowering(ctx, x, y):
    group = ctx.fn.module.next_sharding_group()
    for value, aval in zip((x, y), ctx.avals_in):
        ctx.op("sdy.sharding_group", [value], [aval], [], props=f"group_id = {group} : i64")
    return [x, y]


def _transpose(cts, x, y):
    ct_x, ct_y = cts
    if type(ct_x) is Zero or type(ct_y) is Zero:
        return [ct_x, ct_y]
    return list(shard_alike_p.bind(ct_x, ct_y))


def _batch(axis, vals, dims):
    (x, y), (dx, dy) = vals, dims
    if dx is None and dy is None:
        return shard_alike_p.bind(x, y), [None, None]
    d = dx if dx is not None else dy
    x, y = (move_batch_dim(v, dv, d, axis.size) for v, dv in ((x, dx), (y, dy)))
    return shard_alike_p.bind(x, y), [d, d]


abstract_eval_rules[shard_alike_p] = _abstract
register_lowering(shard_alike_p, _lowering)
ad_util.deflinear(shard_alike_p)
transpose_rules[shard_alike_p] = _transpose
batch_rules[shard_alike_p] = _batch
