"""with_sharding_constraint: pin the layout of an intermediate value (``sharding_constraint``).

Under jit the value is laid out as asked (Shardy's ``sdy.sharding_constraint``),
and XLA's partitioner propagates from there; eagerly it is ``device_put``. The
constraint is linear (tangents and cotangents get the same layout); under vmap the
batch dimension is left unsplit.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.primitive import Primitive
from plax.core.rules import Zero, abstract_eval_rules, batch_rules, impl_rules, register_lowering
from plax.core.rules import transpose_rules
from plax.core.avals import physical_aval
from plax.lax.ad_util import deflinear
from plax.runtime import dispatch
from plax.runtime.array import Array
from plax.sharding.named import NamedSharding, resolve_spec
from plax.sharding.partition_spec import PartitionSpec

__all__ = ["with_sharding_constraint", "sharding_constraint_p"]

sharding_constraint_p = Primitive("sharding_constraint")


def _resolve(sharding) -> NamedSharding:
    if isinstance(sharding, PartitionSpec):
        return resolve_spec(sharding, "with_sharding_constraint")
    if isinstance(sharding, NamedSharding):
        return sharding
    raise TypeError(f"with_sharding_constraint takes NamedShardings or PartitionSpecs, got "
                    f"{type(sharding).__name__}.")


def with_sharding_constraint(x, shardings):
    """``x`` (a pytree) laid out by ``shardings`` (a sharding, a PartitionSpec, or a pytree
    prefix of them)."""
    leaves, tree = tree_util.tree_flatten(x)
    is_leaf = lambda s: s is None or isinstance(s, (NamedSharding, PartitionSpec))  # noqa: E731
    if is_leaf(shardings):
        per_leaf = [shardings] * len(leaves)
    else:
        per_leaf = tree_util.tree_leaves(tree_util.tree_broadcast(shardings, x, is_leaf=is_leaf),
                                         is_leaf=is_leaf)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        if s is None:
            outs.append(leaf)
            continue
        s = _resolve(s)
        s.check_shape(getattr(leaf, "shape", ()), "with_sharding_constraint: ")
        outs.append(sharding_constraint_p.bind(leaf, sharding=s))
    return tree_util.tree_unflatten(tree, outs)


def _impl(x, *, sharding):
    if type(x) is not Array:
        return dispatch.put_sharded(x, sharding)
    return dispatch.reshard(x, sharding, committed=True)


def _lowering(ctx, x, *, sharding):
    ndim = physical_aval(ctx.avals_in[0]).ndim
    attr = sharding.shardy_attribute(ndim, ctx.fn.module.mesh_symbol(sharding.mesh))
    return ctx.op1("sdy.sharding_constraint", [x], props=f"sharding = {attr}")


def _batch(axis, vals, dims, *, sharding):
    (x,), (d,) = vals, dims
    entries = list(sharding.spec) + [None] * (len(x.aval.shape) - 1 - len(sharding.spec))
    entries.insert(d, None)
    return sharding_constraint_p.bind(x, sharding=sharding.with_spec(PartitionSpec(*entries))), d


abstract_eval_rules[sharding_constraint_p] = lambda x, *, sharding: x
impl_rules[sharding_constraint_p] = _impl
register_lowering(sharding_constraint_p, _lowering)
deflinear(sharding_constraint_p)
transpose_rules[sharding_constraint_p] = lambda ct, x, *, sharding: [
    Zero(x.aval) if type(ct) is Zero else sharding_constraint_p.bind(ct, sharding=sharding)]
batch_rules[sharding_constraint_p] = _batch
