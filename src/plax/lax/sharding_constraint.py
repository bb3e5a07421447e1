"""with_sharding_constraint: pin the layout of an intermediate value (``sharding_constraint``).

Under jit the value is laid out as asked (Shardy's ``sdy.sharding_constraint``),
and XLA's partitioner propagates from there; eagerly it is ``device_put``. The
constraint is linear (tangents and cotangents get the same layout); under vmap the
batch dimension is left unsplit.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, effectful_primitives,
                             impl_rules, jvp_rules, register_lowering, transpose_rules)
from plax.core.avals import physical_aval
from plax.lax.ad_util import deflinear
from plax.runtime import dispatch
from plax.runtime.array import Array
from plax.sharding.named import NamedSharding, resolve_spec
from plax.sharding.partition_spec import PartitionSpec

__all__ = ["with_sharding_constraint", "sharding_constraint_p", "inspect_array_sharding",
           "inspect_sharding_p"]

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


# --- inspect_array_sharding: the layout XLA chose, handed to a callback -------------------------
inspect_sharding_p = Primitive("inspect_sharding", multiple_results=True)


def inspect_array_sharding(value, *, callback):
    """Call ``callback`` with the sharding of ``value``: at once for a concrete array; under
    jit, when the program is compiled, with the layout XLA's partitioner chose for it (for
    values of the jitted function itself; inside a nested jit, with the outer call's)."""
    if type(value) is Array:
        callback(value.sharding)
        return None
    inspect_sharding_p.bind(value, callback=callback)
    return None


def _inspect_impl(x, *, callback):
    callback(x.sharding)
    return []


def _inspect_jvp(primals, tangents, *, callback):
    inspect_sharding_p.bind(primals[0], callback=callback)
    return [], []


def _inspect_batch(axis, vals, dims, *, callback):
    inspect_sharding_p.bind(vals[0], callback=callback)
    return [], []


abstract_eval_rules[inspect_sharding_p] = lambda x, *, callback: []
impl_rules[inspect_sharding_p] = _inspect_impl
register_lowering(inspect_sharding_p, lambda ctx, x, *, callback: [])
jvp_rules[inspect_sharding_p] = _inspect_jvp
batch_rules[inspect_sharding_p] = _inspect_batch
effectful_primitives.add(inspect_sharding_p)  # no outputs: dead-code elimination keeps it
