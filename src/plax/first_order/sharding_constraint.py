"""Pinning layouts: with_sharding_constraint (``sharding_constraint``) and, for shardings in
types, reshard (``reshard``) with auto_axes/explicit_axes.

Under jit the value is laid out as asked (Shardy's ``sdy.sharding_constraint``),
and XLA's partitioner propagates from there; eagerly it is ``device_put``. Both are
linear (tangents and cotangents get the same layout); under vmap the batch dimension
is left unsplit. ``reshard`` changes a value's type (``f32[8@x,4]`` to ``f32[8,4@x]``);
on a mesh whose axes are all Explicit, with_sharding_constraint only checks the type.
"""
from __future__ import annotations

import functools

from plax import tree_util
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, batch_rules, effectful_primitives, impl_rules,
                             jvp_rules, param_printers, register_lowering, transpose_rules)
from plax.core.sharding_types import like, sharding_rules, spec_of
from plax.core.source_info import pass_through_code
from plax.core.trace import EvalTrace, current_trace, get_aval
from plax.first_order.ad_util import deflinear
from plax.first_order.layout_constraint import check_layout_fits, layout_constraint_p
from plax.lowering.stablehlo import constrain_sharding
from plax.runtime import dispatch
from plax.runtime.array import CONCRETE
from plax.sharding.gspmd import GSPMDSharding
from plax.sharding.mesh import (AxisType, Mesh, context_mesh, get_abstract_mesh,
                                use_abstract_mesh, use_mesh)
from plax.sharding.named import (NamedSharding, concrete_sharding, out_sharding_param,
                                 resolve_spec, type_sharding)
from plax.sharding.layouts import Format, Layout
from plax.sharding.partition_spec import UNCONSTRAINED, PartitionSpec

__all__ = ["with_sharding_constraint", "sharding_constraint_p", "inspect_array_sharding",
           "inspect_sharding_p", "reshard", "reshard_p", "auto_axes", "explicit_axes",
           "with_out_sharding", "takes_out_sharding"]

sharding_constraint_p = Primitive("sharding_constraint")


def _resolve(sharding) -> NamedSharding:
    if isinstance(sharding, PartitionSpec):
        return resolve_spec(sharding, "with_sharding_constraint")
    if isinstance(sharding, NamedSharding):
        return sharding
    if isinstance(sharding, GSPMDSharding):
        return sharding.named_view
    raise TypeError(f"with_sharding_constraint takes NamedShardings or PartitionSpecs, got "
                    f"{type(sharding).__name__}.")


def _per_leaf(x, shardings):
    """The leaves of ``x``, its treedef, and the entry of the prefix tree ``shardings`` (of
    shardings, PartitionSpecs or None) for each leaf."""
    leaves, tree = tree_util.tree_flatten(x)
    is_leaf = lambda s: s is None or isinstance(  # noqa: E731
        s, (NamedSharding, GSPMDSharding, PartitionSpec, Format))
    if is_leaf(shardings):
        return leaves, tree, [shardings] * len(leaves)
    return leaves, tree, tree_util.broadcast_prefix_to_treedef(
        shardings, tree, is_leaf=is_leaf, name="with_sharding_constraint shardings", which="x")


def with_sharding_constraint(x, shardings):
    """``x`` (a pytree) laid out by ``shardings`` (a sharding, a PartitionSpec, a Format of a
    sharding, or a pytree prefix of them). On a mesh whose axes are all Explicit it asserts the value's type."""
    leaves, tree, per_leaf = _per_leaf(x, shardings)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        layout = None
        if isinstance(s, Format):  # a layout and a sharding: each constrains
            if s.layout is not None and s.layout is not Layout.AUTO:
                layout = s.layout
                check_layout_fits(layout, get_aval(leaf).ndim, "with_sharding_constraint")
            s = s.sharding
        if layout is not None and not isinstance(current_trace(), EvalTrace):
            # (eagerly there is nothing to lay out: arrays keep XLA's default layout)
            outs.append(layout_constraint_p.bind(
                leaf if s is None else with_sharding_constraint(leaf, s), layout=layout))
            continue
        if s is None:
            outs.append(leaf)
            continue
        s = _resolve(s)
        if not s.mesh.axis_names:  # a value's type off any mesh: nothing to lay out
            outs.append(leaf)
            continue
        s.check_shape(getattr(leaf, "shape", ()), "with_sharding_constraint: ", divisible=False)
        mesh = s.mesh
        if mesh.axis_names and all(t is AxisType.Explicit for t in mesh.axis_types):
            if any(e is UNCONSTRAINED for e in s.spec):
                raise ValueError(
                    f"{s.spec} cannot contain `P.UNCONSTRAINED` when no mesh axis_types are "
                    f"`Auto`. Got mesh axis_types: ({', '.join(t.name for t in mesh.axis_types)})"
                    ": on Explicit axes the layout is the value's type.")
            aval = get_aval(leaf)
            have, want = aval.sharding.spec, type_sharding(s, aval.ndim, keep_replicated=True)
            if tuple(have) != tuple(want.spec):
                raise AssertionError(
                    "`with_sharding_constraint` acts as an assert when all axes of mesh are of "
                    f"type `Explicit`. The array sharding: {have} did not match the sharding "
                    f"provided: {want.spec}. Please use `plax.sharding.reshard` to shard your "
                    "input to the sharding you want.")
        outs.append(sharding_constraint_p.bind(leaf, sharding=s))
    return tree_util.tree_unflatten(tree, outs)


def _impl(x, *, sharding):
    sharding = concrete_sharding(sharding)  # a type's sharding names only an abstract mesh
    if type(x) not in CONCRETE:
        return dispatch.put_sharded(x, sharding)
    return dispatch.reshard(x, sharding, committed=True)


def _lowering(ctx, x, *, sharding):
    return constrain_sharding(ctx, x, ctx.avals_in[0], sharding)


def _batch(axis, vals, dims, *, sharding):
    (x,), (d,) = vals, dims
    entries = list(sharding.spec) + [None] * (len(x.aval.shape) - 1 - len(sharding.spec))
    entries.insert(d, spec_of(x.aval)[d])  # unsplit, or as the batch dimension's type says
    return sharding_constraint_p.bind(x, sharding=sharding.with_spec(PartitionSpec(*entries))), d


abstract_eval_rules[sharding_constraint_p] = lambda x, *, sharding: x
impl_rules[sharding_constraint_p] = _impl
register_lowering(sharding_constraint_p, _lowering)
deflinear(sharding_constraint_p)
transpose_rules[sharding_constraint_p] = lambda ct, x, *, sharding: [
    sharding_constraint_p.bind(ct, sharding=sharding)]
batch_rules[sharding_constraint_p] = _batch
sharding_rules[sharding_constraint_p] = lambda avals_in, avals_out, *, sharding: [
    type_sharding(sharding, avals_in[0].ndim)]


# --- reshard: change the sharding in a value's type ----------------------------------------------
reshard_p = Primitive("reshard")


def reshard(xs, out_shardings):
    """``xs`` (a pytree) with the sharding in their types changed to ``out_shardings``
    (PartitionSpecs over the context mesh, NamedShardings, or a pytree prefix of them);
    XLA moves the data."""
    leaves, tree, per_leaf = _per_leaf(xs, out_shardings)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        if s is None:
            outs.append(leaf)
            continue
        aval = get_aval(leaf)
        _check_explicit_only(s)
        target = out_sharding_param(s, aval.ndim, "reshard")
        if isinstance(s, NamedSharding):
            s.check_shape(aval.shape, "reshard: ")
        if isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh) and \
                isinstance(current_trace(), EvalTrace):
            with use_mesh(s.mesh):  # eagerly, the data goes to the devices the caller named
                outs.append(reshard_p.bind(leaf, sharding=target))
            continue
        outs.append(reshard_p.bind(leaf, sharding=target))
    return tree_util.tree_unflatten(tree, outs)


def _check_explicit_only(s) -> None:
    """reshard changes types: its spec may name only Explicit axes, as JAX's."""
    mesh = s.mesh if isinstance(s, NamedSharding) else context_mesh()
    spec = s.spec if isinstance(s, NamedSharding) else s
    if mesh is None or not isinstance(spec, PartitionSpec):
        return
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    for name in spec.mesh_axes():
        if types.get(name, AxisType.Explicit) is not AxisType.Explicit:
            raise ValueError(
                f"PartitionSpec passed to reshard cannot contain axis names that are of type "
                f"Auto or Manual. Got PartitionSpec: {spec} with axis name: {name} of type: "
                f"{types[name]}. reshard changes the sharding in a value's type, which names "
                "Explicit axes only: use plax.lax.with_sharding_constraint for Auto axes.")


def _placed(sharding, x) -> NamedSharding:
    """A type sharding on the concrete mesh ``x`` lives on (or the context's)."""
    own = x.sharding if type(x) in CONCRETE else None
    mesh = own.mesh if isinstance(own, NamedSharding) else None
    return concrete_sharding(sharding, mesh)


def _reshard_impl(x, *, sharding):
    target = _placed(sharding, x)
    if type(x) not in CONCRETE:
        return dispatch.put_sharded(x, target)
    return dispatch.reshard(x, _keeping_auto_splits(x, target), committed=True)


def _keeping_auto_splits(x, target: NamedSharding) -> NamedSharding:
    """``target`` where it leaves a dimension to XLA (None, on a mesh with Auto axes) and
    ``x`` splits that dimension over Auto axes only: that split kept, as the compiled reshard
    leaves such a dimension unconstrained (explicit_axes' results keep their layout, their
    types dropping the axes)."""
    own = x.sharding
    mesh = target.mesh
    if mesh.explicit_axes == mesh.axis_names or not isinstance(own, NamedSharding) or \
            own.mesh.axis_names != mesh.axis_names:
        return target
    auto = set(mesh.auto_axes)
    theirs = tuple(target.spec._normalized_spec_for_aval(len(get_aval(x).shape)))
    kept = tuple(own.spec[d] if t is None and own.spec.axes_of(d) and
                 set(own.spec.axes_of(d)) <= auto else t for d, t in enumerate(theirs))
    return target if kept == theirs else target.with_spec(PartitionSpec(*kept))


def _reshard_lowering(ctx, x, *, sharding):
    if sharding.mesh.explicit_axes == sharding.mesh.axis_names:
        return constrain_sharding(ctx, x, ctx.avals_in[0], sharding)
    # Auto axes stay XLA's to choose: only the dimensions the type splits are pinned.
    open_spec = PartitionSpec(*(UNCONSTRAINED if e is None else e for e in sharding.spec))
    if all(e is UNCONSTRAINED for e in open_spec):
        return x
    return constrain_sharding(ctx, x, ctx.avals_in[0], sharding.with_spec(open_spec))


def _reshard_transpose(ct, x, *, sharding):
    back = x.aval.sharding if x.aval._sharding is not None else \
        NamedSharding(sharding.mesh, (None,) * len(x.aval.shape))
    return [reshard_p.bind(ct, sharding=back)]


def _reshard_batch(axis, vals, dims, *, sharding):
    (x,), (d,) = vals, dims
    entries = list(sharding.spec)
    entries.insert(d, spec_of(get_aval(x))[d])  # the batch dimension keeps its split
    return reshard_p.bind(x, sharding=NamedSharding(sharding.mesh, tuple(entries))), d


abstract_eval_rules[reshard_p] = lambda x, *, sharding: x
impl_rules[reshard_p] = _reshard_impl
register_lowering(reshard_p, _reshard_lowering)
deflinear(reshard_p)
transpose_rules[reshard_p] = _reshard_transpose
batch_rules[reshard_p] = _reshard_batch
param_printers[reshard_p] = lambda params: {}  # printed bare, as JAX prints it
sharding_rules[reshard_p] = lambda avals_in, avals_out, *, sharding: [
    like(sharding, sharding.spec)]


# --- auto_axes / explicit_axes: change how mesh axes are typed inside a function ------------------
def _axes_named(axes, mesh) -> tuple:
    if axes is None:
        return tuple(mesh.axis_names)
    return (axes,) if isinstance(axes, str) else tuple(axes)


def _sharding_given(given, kwargs: dict, name: str, api: str):
    """The decorator's ``name`` (out_sharding/in_sharding), else the call's keyword of that
    name (taken out of ``kwargs``), as JAX accepts either."""
    if given is not None:
        return given
    if name not in kwargs:
        raise TypeError(f"Missing required keyword argument: '{name}' ({api} takes it when "
                        "decorating or when calling).")
    return kwargs.pop(name)


def _context_mesh_for(api: str):
    mesh = get_abstract_mesh()
    if mesh.empty:
        raise ValueError(f"Context mesh cannot be empty: {api} changes the axis types of the "
                         "context mesh. Enter one with plax.set_mesh(mesh).")
    return mesh


def auto_axes(fun=None, *, axes=None, out_sharding=None):
    """``fun`` run with mesh ``axes`` (default: all) made Auto: inside, values are not split
    over them in types and XLA chooses their layouts; the results are resharded to
    ``out_sharding`` (given here or as a keyword of the call)."""
    if fun is None:
        return functools.partial(auto_axes, axes=axes, out_sharding=out_sharding)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        target = _sharding_given(out_sharding, kwargs, "out_sharding", "auto_axes")
        mesh = get_abstract_mesh()
        if mesh.empty:
            return fun(*args, **kwargs)
        names = _axes_named(axes, mesh)
        if set(names) <= set(mesh.auto_axes):
            return fun(*args, **kwargs)  # (already Auto: nothing to change)
        inner = mesh.update_axis_types({n: AxisType.Auto for n in names})
        args, kwargs = _untyped(names, inner, (args, kwargs))
        with use_abstract_mesh(_with_devices(inner)):
            out = fun(*args, **kwargs)
        return reshard(out, target)
    return wrapped


def explicit_axes(fun=None, *, axes=None, in_sharding=None):
    """``fun`` run with mesh ``axes`` (default: all) made Explicit: its arguments get the
    shardings ``in_sharding`` (given here or as a keyword of the call) in their types; its
    results leave them again."""
    if fun is None:
        return functools.partial(explicit_axes, axes=axes, in_sharding=in_sharding)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        shardings = _sharding_given(in_sharding, kwargs, "in_sharding", "explicit_axes")
        mesh = _context_mesh_for("explicit_axes")
        names = _axes_named(axes, mesh)
        inner = mesh.update_axis_types({n: AxisType.Explicit for n in names})
        with use_abstract_mesh(_with_devices(inner)):
            if args:
                args = reshard(args, shardings)
            out = fun(*args, **kwargs)
        return _untyped(names, mesh, out)
    return wrapped


def _untyped(names, mesh, tree):
    """The leaves of ``tree`` with the mesh axes ``names`` dropped from their types (resharded
    onto ``mesh``, where those axes are not Explicit); other leaves as they are."""
    def drop(x):
        s = getattr(getattr(x, "aval", None), "_sharding", None)
        if s is None:  # not an array, or not split in its type
            return x
        kept = [_without(e, names) for e in s.spec]
        return reshard_p.bind(x, sharding=NamedSharding(mesh, tuple(kept)))
    return tree_util.tree_map(drop, tree)


def with_out_sharding(compute, out_sharding, *operands):
    """``compute(*operands)`` laid out by ``out_sharding`` (a PartitionSpec or NamedSharding):
    on Explicit axes computed with them made Auto (XLA chooses the intermediates' layouts)
    and resharded into the result's type; on Auto axes, a sharding constraint."""
    context = context_mesh()
    mesh = out_sharding.mesh if isinstance(out_sharding, NamedSharding) else context
    if mesh is None or not mesh.explicit_axes:
        return with_sharding_constraint(compute(*operands), out_sharding)
    if context is not None and context.abstract_mesh == mesh.abstract_mesh:
        return auto_axes(compute, out_sharding=out_sharding)(*operands)
    with use_abstract_mesh(mesh):  # a NamedSharding's own mesh
        return auto_axes(compute, out_sharding=out_sharding)(*operands)


def takes_out_sharding(fn):
    """``fn`` gaining an ``out_sharding=`` keyword (see ``with_out_sharding``); its positional
    arguments are the operands."""
    @functools.wraps(fn)
    def wrapped(*args, out_sharding=None, **kwargs):
        if out_sharding is None:
            return fn(*args, **kwargs)
        return with_out_sharding(lambda *a: fn(*a, **kwargs), out_sharding, *args)
    pass_through_code.add(wrapped.__code__)  # errors name ``fn``, not the wrapper
    return wrapped


def _without(entry, names):
    axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
    kept = tuple(a for a in axes if a not in names)
    return None if not kept else kept[0] if len(kept) == 1 else kept


def _with_devices(abstract):
    """The context mesh with ``abstract``'s axis types, concrete when the context is."""
    mesh = context_mesh()
    if mesh is not None and getattr(mesh, "devices", None) is not None:
        return mesh.update_axis_types(dict(zip(abstract.axis_names, abstract.axis_types)))
    return abstract


# --- inspect_array_sharding: the layout XLA chose, handed to a callback -------------------------
inspect_sharding_p = Primitive("inspect_sharding", multiple_results=True)


def inspect_array_sharding(value, *, callback):
    """Call ``callback`` with the sharding of ``value``: at once for a concrete array; under
    jit, when the program is compiled, with the layout XLA's partitioner chose for it (for
    values of the jitted function itself; inside a nested jit, with the outer call's)."""
    if type(value) in CONCRETE:
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
