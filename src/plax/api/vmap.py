"""``plax.vmap``: vectorise a function over a mapped axis of its arguments.

The wrapper flattens the arguments, reads the batch size from the mapped
axes (with JAX's error messages when they disagree), runs the function under
a ``BatchTrace`` (transforms/vmap.py) and moves each output's batch
dimension to where ``out_axes`` asks.
"""
from __future__ import annotations


from plax import tree_util
from plax.core import dtypes
from plax.core.source_info import flat_arg_names, fun_name, wraps
from plax.core.trace import get_aval
from plax.runtime.array import ARRAY_TYPES
from plax.core.hi_types import MappingSpec, hi_type_of, hi_value_types
from plax.higher_order import ref_effects
from plax.transforms.vmap import AxisData, batch_flat
from plax.core.rules import not_mapped
from plax.interpreters import batching
from plax.api import vmappables
from plax.first_order.batch_util import move_batch_dim
from plax.runtime.dispatch import array_from_host
from plax.core.trace import transform_name_stack
from plax.core.tracebacks import api_boundary

_AXIS_TYPES = (int, type(None))


def _is_none(x) -> bool:
    return x is None


def _check_axes_spec(what: str, axes, positional: bool):
    """Check an in_axes/out_axes value when vmap is called (before any argument is seen)."""
    if any(isinstance(x, MappingSpec) for x in tree_util.tree_leaves(axes, is_leaf=_is_none)):
        raise NotImplementedError(
            f"vmap {what}: mapping a hi type by a MappingSpec ({axes}) is not provided by "
            "plax: it maps hi values through their lo values (give the lo values' axes).")
    if positional and not (axes is None or type(axes) in (int, tuple)
                           or type(axes) in batching.spec_types):
        raise TypeError(f"vmap {what} must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, but got {axes}.")
    leaves = tree_util.tree_leaves(axes, is_leaf=_is_none)
    if not all(type(leaf) in _AXIS_TYPES or type(leaf) in batching.spec_types
               for leaf in leaves):
        raise TypeError(f"vmap {what} must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {axes}.")


def _prefix_mismatch(what: str, treedef, axes):
    """The mismatch detail when ``axes`` is not a tree prefix of ``treedef`` (else None)."""
    try:
        tree_util.broadcast_prefix_to_treedef(axes, treedef, _is_none, name=what,
                                              which="the value")
    except ValueError as e:
        return str(e)
    return None


def flatten_axes(what: str, treedef, axes, *, kws: bool = False,
                 tupled_args: bool = False) -> list:
    """One axis (or None) per leaf of ``treedef``, broadcasting the prefix tree ``axes``.

    Raises JAX's "specification must be a tree prefix" error (with the first
    place where the trees differ) when ``axes`` does not fit. Works on the structure
    alone, as JAX does: no node of the value is rebuilt around the axis specs.
    With ``kws``, ``treedef`` is that of ``(args, kwargs)`` and ``axes`` a pair whose first
    entry is for ``args``: the error then describes the positional arguments alone. With
    ``tupled_args`` (``axes`` is one entry per positional argument) the error adds a hint.
    """
    try:
        return tree_util.broadcast_prefix_to_treedef(axes, treedef, _is_none, name=what,
                                                     which="the value")
    except ValueError as e:
        detail = str(e)
    if kws:
        treedef, axes = treedef.children()[0], axes[0]
        detail = _prefix_mismatch(what, treedef, axes) or detail
    hint = ""
    if tupled_args:
        hint = (f" Note that {what} that are non-trivial pytrees should always be wrapped in a "
                "tuple representing the argument list.")
        if len(treedef.children()) == 1 and _prefix_mismatch(what, treedef, (axes,)) is None:
            hint += (f" In particular, you're passing in a single argument which means that "
                     f"{what} might need to be wrapped in a singleton tuple.")
    raise ValueError(f"{what} specification must be a tree prefix of the corresponding "
                     f"value;{hint} \n  Mismatch details: {detail}") from None


def _describe_arg(names, i) -> str:
    return f"argument {names[i]}" if names and i < len(names) else f"argument {i}"


def mapped_axis_size(leaves, axes, arg_names, axis_size):
    """The batch size shared by the mapped axes (checking each is in range)."""
    sizes = []
    for i, (x, ax) in enumerate(zip(leaves, axes)):
        if ax is None:
            continue
        shape = get_aval(x).shape
        if not -len(shape) <= ax < len(shape):
            raise ValueError(f"vmap was requested to map its argument along axis {ax}, which "
                             f"implies that its rank should be at least "
                             f"{ax + 1 if ax >= 0 else -ax}, but is only {len(shape)} (its shape "
                             f"is {shape})")
        sizes.append((shape[ax % len(shape)], ax, i))
    distinct = {s for s, _, _ in sizes}
    if axis_size is not None:
        distinct.add(axis_size)
    if len(distinct) == 1:
        return distinct.pop()
    if not sizes:
        raise ValueError("vmap must have at least one non-None value in in_axes or axis_size "
                         "must be specified")
    lines = []
    if axis_size is not None:
        lines.append(f"the `axis_size` argument was {axis_size}")
    by_size: dict = {}
    for s, ax, i in sizes:
        by_size.setdefault(s, []).append((ax, i))
    for s, hits in by_size.items():
        ax, i = hits[0]
        what = (f"axis {ax} of {_describe_arg(arg_names, i)} of type "
                f"{get_aval(leaves[i]).str_short()}")
        if len(hits) == 1:
            lines.append(f"one axis had size {s}: {what}")
        else:
            lines.append(f"some axes ({len(hits)} of them) had size {s}, e.g. {what}")
    raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                     + ";\n".join(f"  * {line}" for line in lines))


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """Vectorise ``fun`` over a mapped axis of its arguments.

    ``in_axes`` (an int, None, or a tuple prefix of the positional arguments)
    says which axis of each argument is mapped (None: not mapped); keyword
    arguments are always mapped over axis 0. ``out_axes`` says where the
    mapped axis goes in each output. ``axis_name`` names the mapped axis for
    collectives such as ``lax.psum``; ``axis_size`` gives the size when no
    argument is mapped.
    """
    if not callable(fun):
        raise TypeError(f"vmap expects a callable as its first argument, got {fun!r}.")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)  # a list of per-argument axes reads as the tuple it means
    _check_axes_spec("in_axes", in_axes, positional=True)
    _check_axes_spec("out_axes", out_axes, positional=False)
    if axis_size is not None and (not isinstance(axis_size, int) or axis_size < 0):
        raise TypeError(f"vmap axis_size must be a non-negative int, got {axis_size!r}.")
    if spmd_axis_name is not None and not isinstance(spmd_axis_name, (str, tuple)):
        raise TypeError(f"vmap spmd_axis_name must be a mesh axis name or a tuple of them, got "
                        f"{spmd_axis_name!r}.")
    name = fun_name(fun)

    @wraps(fun)
    @api_boundary
    def vmapped(*args, **kwargs):
        if batching.vmappables and not getattr(fun, "plax_flat_vmap", False):
            # Containers registered with register_vmappable may be among the arguments or
            # results: mapped through their handlers (api/vmappables.py).
            return vmappables.call(vmap, fun, in_axes, out_axes, dict(
                axis_name=axis_name, axis_size=axis_size, spmd_axis_name=spmd_axis_name),
                args, kwargs)
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                             "corresponding to the positional arguments passed to the function, "
                             f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if not leaves and axis_size is None:
            raise ValueError("vmap wrapped function must be passed at least one argument "
                             "containing an array or axis_size must be specified, got empty "
                             f"*args={args} and **kwargs={kwargs}")
        axes = flatten_axes("vmap in_axes", in_tree, (in_axes, 0))
        refs_in = {}  # position -> reference mapped over: its contents are batched
        if hi_value_types:
            def names():  # (only an error needs them)
                return flat_arg_names(fun, args, kwargs)
            for j, x in enumerate(leaves):
                if ref_effects.is_reference_view(x):
                    raise TypeError(f"When tracing {name} for vmap, TransformedRefs are not "
                                    "allowed, but got a TransformedRef with name "
                                    f"{ref_effects.leaf_name(names(), j)}.")
            ref_effects.refuse_aliased_references(leaves, names, name, "vmap")
            refs_in = {i: x for i, (x, ax) in enumerate(zip(leaves, axes))
                       if ax is not None and ref_effects.is_reference(x)}
            leaves = [ref_effects.read(refs_in[i]) if i in refs_in else x
                      for i, x in enumerate(leaves)]
        size = mapped_axis_size(leaves, axes, flat_arg_names(fun, args, kwargs), axis_size)
        dims = [None if ax is None else ax % get_aval(x).ndim for x, ax in zip(leaves, axes)]
        out_tree_box = []

        def flat_fun(*flat):
            flat = list(flat)
            inner_refs = []
            for i in refs_in:  # each mapped reference is one reference per example inside
                flat[i] = hi_type_of(refs_in[i]).new_from_loval(None, flat[i])
                inner_refs.append(flat[i])
            a, kw = tree_util.tree_unflatten(in_tree, flat)
            with transform_name_stack("vmap"):
                out = fun(*a, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            if hi_value_types:  # a reference made inside comes out holding the batch
                out_leaves = [_ref_contents(x, refs_out, i) for i, x in enumerate(out_leaves)]
            return out_leaves + [ref_effects.read(r) for r in inner_refs]

        refs_out = {}
        axis = AxisData(axis_name, size, spmd_axis_name)
        outs, out_dims = batch_flat(flat_fun, leaves, dims, axis, description=f"vmap({name})")
        if refs_in:  # the mapped references' final contents, written back on their axes
            k = len(outs) - len(refs_in)
            for (i, ref), o, d in zip(refs_in.items(), outs[k:], out_dims[k:]):
                ref_effects.write(ref, _to_out_axis(o, d, dims[i], size), written_back=True)
            outs, out_dims = outs[:k], out_dims[:k]
        out_tree = out_tree_box[0]
        dst = flatten_axes("vmap out_axes", out_tree, out_axes)
        for i, (d, a) in enumerate(zip(out_dims, dst)):
            if a is None and d is not not_mapped:
                paths = [p for p, _ in tree_util.tree_flatten_with_path(
                    tree_util.tree_unflatten(out_tree, list(range(len(outs)))))[0]]
                raise ValueError(f"at vmap out_axes{tree_util.keystr(paths[i])}, got axis spec "
                                 f"None but output was batched on axis {d}")
        moved = [_to_out_axis(o, d, a, size) for o, d, a in zip(outs, out_dims, dst)]
        for i, ty in refs_out.items():
            moved[i] = ty.new_from_loval(None, moved[i])
        return tree_util.tree_unflatten(out_tree, moved)

    return vmapped


def _ref_contents(x, refs_out, i):
    if type(x) in hi_value_types and hi_type_of(x).has_qdd:
        ty = refs_out[i] = hi_type_of(x)
        (x,) = ty.read_loval(None, x)
    return x


def _to_out_axis(x, src, dst, size):
    if dst is None:  # (a batched output here was refused by the caller)
        out = x
    else:
        ndim = get_aval(x).ndim + (1 if src is not_mapped else 0)
        if not -ndim <= dst < ndim:
            raise ValueError(f"axis {dst} is out of bounds for array of dimension {ndim}")
        out = move_batch_dim(x, src, dst % ndim, size)
    if not isinstance(out, ARRAY_TYPES) and getattr(out, "dtype", None) != dtypes.float0:
        out = array_from_host(out)  # a host value passed straight through: still an Array
    return out
