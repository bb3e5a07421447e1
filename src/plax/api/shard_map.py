"""plax.shard_map: write the program each device runs on its block of the arguments.

``shard_map(f, mesh=..., in_specs=..., out_specs=...)`` splits each argument over the
mesh as its PartitionSpec says, runs ``f`` on every device's block (collectives such as
``lax.psum(x, 'x')`` talk across the mesh axes), and puts the results' blocks together as
``out_specs`` say. Everything is checked before the body is traced, with JAX's messages;
after tracing, outputs whose spec claims replication over an axis they vary over are
refused (``check_vma=False`` opts out). The primitive and its rules are in
``plax/lax/shard_map.py``.
"""
from __future__ import annotations

import functools
import inspect
import math

from plax import tree_util
from plax.core.avals import abstractify
from plax.core.hi_types import hi_value_types
from plax.core.jaxpr import ClosedJaxpr, consts_as_inputs
from plax.core.source_info import fun_name, wraps
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax import lax
from plax.core.replication import vma
from plax.higher_order import ref_effects
from plax.higher_order.shard_map import body_context, check_out_replication, local_aval, shard_map_p
from plax.sharding.mesh import (AbstractMesh, AxisType, Mesh, base_mesh, context_mesh,
                                get_abstract_mesh, same_mesh)
from plax.sharding.named import DuplicateSpecError, check_spec
from plax.sharding.partition_spec import Infer, PartitionSpec

__all__ = ["shard_map", "Infer"]


def _as_value(x):
    """An output leaf as an array value (Python scalars and NumPy values become constants)."""
    return x if hasattr(x, "aval") else lax.convert_element_type(x, abstractify(x).dtype)


def shard_map(f=None, /, *, out_specs, in_specs=Infer, mesh=None, axis_names=frozenset(),
              check_vma: bool = True):
    """``f`` run on every device's block of its arguments over ``mesh`` (default: the context
    mesh), the arguments split by ``in_specs`` and the results joined by ``out_specs``
    (pytree prefixes of PartitionSpecs). ``axis_names`` limits the manual axes (default:
    all of the mesh's)."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    return shard_mapped(f, mesh, in_specs, out_specs, check_vma, axis_names)


def shard_mapped(f, mesh, in_specs, out_specs, check_vma, axis_names):
    """What ``shard_map(f, ...)`` returns, every option given (pmap and
    experimental.shard_map build on it too)."""
    if not callable(f):
        raise TypeError(f"shard_map requires a callable for its first argument, but got {f} of "
                        f"type {type(f).__name__}.")
    if mesh is not None:  # checked now; a context mesh is read (and checked) when called
        _checked_mesh(mesh, in_specs, out_specs, axis_names)
    plain = _shard_mapped_plain(f, mesh, in_specs, out_specs, check_vma, axis_names)

    def plain_of(fun, i_specs, o_specs):
        return _shard_mapped_plain(fun, mesh, i_specs, o_specs, check_vma, axis_names)

    @wraps(f)
    def wrapped(*args):
        if not hi_value_types or callable(out_specs):
            return plain(*args)
        return _carrying_refs(plain, plain_of, f, args, in_specs, out_specs)
    return wrapped


def _carrying_refs(plain, plain_of, f, args, in_specs, out_specs):
    """A shard_map call whose function is given references (or views of them) or closes
    over references: as a loop body's, each is carried in and out replicated (its value an
    extra argument, its final value an extra result written back)."""
    passed = ref_effects.refs_passed_in(args)
    if passed is None:
        kept, fun, specs = args, f, in_specs
    else:
        kept, put_back = passed
        fun = lambda *xs: f(*put_back(xs))  # noqa: E731
        specs = in_specs
        if in_specs is not Infer:
            flat = _prefix_leaves("in_specs", in_specs, args)
            specs = tuple(sp for sp, x in zip(flat, tree_util.tree_leaves(args))
                          if not (ref_effects.is_reference(x)
                                  or ref_effects.is_reference_view(x)))

    def threaded(refs):
        k = len(refs)

        def body(held, *xs):
            with ref_effects.bound(refs, held):
                return fun(*xs), tuple(ref_effects.final_values(refs))
        held_specs = Infer if specs is Infer else ((PartitionSpec(),) * k, *specs)
        out, held = plain_of(body, held_specs, (out_specs, (PartitionSpec(),) * k))(
            tuple(ref_effects.read_all(refs)), *kept)
        ref_effects.write_all(refs, held)
        return out
    run = plain if passed is None else plain_of(fun, specs, out_specs)
    return ref_effects.with_closed_refs(lambda: run(*kept), threaded)


def _shard_mapped_plain(f, mesh, in_specs, out_specs, check_vma, axis_names):
    """``shard_mapped`` for arguments and a function holding no references."""
    name = fun_name(f)
    resolved = []  # the mesh, the axes made manual, those already manual: fixed by the 1st call

    @wraps(f)
    def wrapped(*args):
        if resolved:
            given, manual, outer = resolved[0]
            _check_context(given)
        else:
            given, manual, outer = _resolve(mesh, in_specs, out_specs, axis_names)
            resolved.append((given, manual, outer))
        mesh_ = base_mesh(given)
        leaves, in_tree = tree_util.tree_flatten(args)
        if in_specs is Infer:
            specs = _infer_specs(leaves, mesh_)
        else:
            specs = _prefix_leaves("in_specs", in_specs, args)
            _check_explicit_specs(leaves, specs, mesh_, manual | outer)
            _check_not_split_again(specs, outer)
        avals = [abstractify(x) if not hasattr(x, "aval") else get_aval(x) for x in leaves]
        paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(args)[0]]
        for path, aval, spec in zip(paths, avals, specs):
            _check_arg(name, f, path, aval, spec, mesh_, manual)
        local = [local_aval(a, mesh_, s, manual, check_vma) for a, s in zip(avals, specs)]
        box = []

        def body(*xs):
            out = f(*tree_util.tree_unflatten(in_tree, list(xs)))
            out_leaves, out_tree = tree_util.tree_flatten(out)
            o_specs = _prefix_leaves("out_specs", out_specs() if callable(out_specs) else
                                     out_specs, out)
            out_leaves = [_as_value(v) for v in out_leaves]
            out_avals = [get_aval(v) for v in out_leaves]
            for aval, spec in zip(out_avals, o_specs):
                _check_out_rank(name, aval, spec)
            if check_vma:
                check_out_replication(name, out_avals, o_specs, mesh_, manual)
                # Outputs split over axes they do not vary over: each device's copy is a block.
                out_leaves = [lax.pvary(v, tuple(a for a in mesh_.axis_names if a in manual and
                                                 a in s.mesh_axes() and a not in vma(av)))
                              for v, s, av in zip(out_leaves, o_specs, out_avals)]
            box.append((out_tree, o_specs))
            return out_leaves

        with body_context(mesh_, manual, check_vma):
            jaxpr, consts = trace_to_jaxpr(body, local, description=f"shard_map({name})")
        out_tree, o_specs = box[0]
        callee, consts = consts_as_inputs(ClosedJaxpr(jaxpr, consts))
        all_in = (PartitionSpec(),) * len(consts) + tuple(specs)  # constants: replicated
        outs = shard_map_p.bind(*consts, *leaves, jaxpr=callee, mesh=mesh_,
                                in_specs=all_in, out_specs=tuple(o_specs), manual_axes=manual,
                                check_vma=bool(check_vma))
        return tree_util.tree_unflatten(out_tree, outs)
    return wrapped


# --- checks, with JAX's messages ---------------------------------------------------------------
def _checked_mesh(mesh, in_specs, out_specs, axis_names) -> frozenset:
    """The axes a shard_map over ``mesh`` makes manual, after checking its arguments."""
    if not isinstance(mesh, (Mesh, AbstractMesh)):
        raise TypeError(f"shard_map requires a `plax.sharding.Mesh` instance for its mesh "
                        f"argument, but got {mesh} of type {type(mesh).__name__}.")
    if mesh.empty:
        raise ValueError(f"shard_map requires a non-empty mesh. Got {mesh}")
    if not isinstance(axis_names, (frozenset, set)):
        raise TypeError("`axis_names` argument of shard_map should be of type `frozenset` or "
                        f"`set`. Got type: {type(axis_names).__name__}")
    manual = frozenset(mesh.axis_names) if not axis_names else frozenset(axis_names)
    unknown = [a for a in manual if a not in mesh.axis_names]
    if unknown:
        raise ValueError(f"shard_map axis_names {sorted(unknown)} are not axes of the mesh "
                         f"{mesh.axis_names}.")
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    if in_specs is Infer and not all(types[a] is AxisType.Explicit for a in manual):
        shown = ", ".join(str(types[a]) for a in sorted(manual))
        raise TypeError("shard_map in_specs argument must be a pytree of "
                        "`plax.sharding.PartitionSpec` instances, but it was `None` when "
                        f"axis_names={set(manual)} are of type {shown}: in_specs can be left out "
                        "only when every manual axis is Explicit (the arguments' types then "
                        "say how they are split).")
    if in_specs is not Infer:
        _check_specs("in_specs", in_specs, manual)
    if not callable(out_specs):
        _check_specs("out_specs", out_specs, manual)
    return manual


def _resolve(mesh, in_specs, out_specs, axis_names):
    """At the first call: the mesh (the context's when none was given), the axes this
    shard_map makes manual, and those an enclosing shard_map already made manual."""
    if mesh is None:
        mesh = context_mesh()
        if mesh is None or mesh.empty:
            raise ValueError("The context mesh cannot be empty. Use `plax.set_mesh(mesh)` to "
                             "enter into a mesh context, or pass mesh= to shard_map.")
    else:
        _check_context(mesh)
    ctx = context_mesh()
    outer = frozenset(ctx.manual_axes) if ctx is not None and same_mesh(ctx, mesh) else \
        frozenset()
    manual = _checked_mesh(mesh, in_specs, out_specs, axis_names) - outer
    return mesh, manual, outer


def _check_context(mesh) -> None:
    """A mesh given to shard_map must be the context mesh, if one is set (inside a shard_map
    over the same mesh: with the enclosing one's manual axes)."""
    ctx = get_abstract_mesh()
    if ctx.empty:
        return
    given = mesh.abstract_mesh
    if given != ctx and given.update_axis_types(
            {a: AxisType.Manual for a in ctx.manual_axes}) != ctx:
        raise ValueError(f"The context mesh {ctx} should match the mesh passed to shard_map "
                         f"{mesh}")


def _check_explicit_specs(leaves, specs, mesh, manual) -> None:
    """Over a mesh whose axes are all manual and Explicit, an argument's in_specs entry must
    be the split its type already has (reshard it first)."""
    if manual != frozenset(mesh.axis_names) or mesh.explicit_axes != mesh.axis_names:
        return
    for x, spec in zip(leaves, specs):
        aval = abstractify(x) if not hasattr(x, "aval") else get_aval(x)
        want = tuple(spec) + (None,) * (aval.ndim - len(spec))
        have = tuple(aval.sharding.spec) if aval._sharding is not None else (None,) * aval.ndim
        if len(want) == aval.ndim and _entries(want) != _entries(have):
            raise ValueError(
                f"in_specs passed to shard_map: {PartitionSpec(*want)} does not match the "
                f"specs of the input: {PartitionSpec(*have)} for arg: {aval.str_short(False)}. "
                "Over Explicit mesh axes an argument's type already says how it is split: "
                "leave in_specs out to take those splits, or plax.reshard the argument to "
                "the split you want before calling the shard_map.")


def _check_not_split_again(specs, outer) -> None:
    """Inside a shard_map, a nested one cannot split a value again over an axis the
    enclosing one has made manual (each device already holds its block along it)."""
    for spec in specs:
        again = [a for a in spec.mesh_axes() if a in outer]
        if again:
            raise DuplicateSpecError(
                f"The nested shard_map's in_specs entry {spec} splits over mesh axis "
                f"`{again[0]}`, which the enclosing shard_map has already split its values "
                f"over: with the enclosing split it has duplicate entries for `{again[0]}`. "
                "Split over the other mesh axes only (axis_names=...).")


def _entries(spec) -> tuple:
    return tuple(None if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec)


def _is_spec(s) -> bool:
    return isinstance(s, PartitionSpec)


def _check_specs(which: str, specs, manual) -> None:
    for s in tree_util.tree_leaves(specs, is_leaf=lambda x: x is None or _is_spec(x)):
        if s is None:
            continue
        if not _is_spec(s):
            raise TypeError(f"shard_map {which} argument must be a pytree of "
                            "`plax.sharding.PartitionSpec` instances, but:\n\n"
                            f"  {which} is {s} of type {type(s).__name__}, \n\n"
                            f"Check the {which} values passed to shard_map.")
        for a in s.mesh_axes():
            if a not in manual:
                raise ValueError(f"shard_map {which} argument must refer to an axis marked as "
                                 f"manual ({set(manual)}), but:\n\n  {which} refers to {a!r}\n\n"
                                 f"Check the {which} values passed to shard_map.")
        check_spec(_AxesOnly(manual), s)


class _AxesOnly:
    """What ``check_spec`` needs of a mesh to check a spec for repeated axes."""

    def __init__(self, names):
        self.axis_names = tuple(names)

    def _check_axes(self, names, what):
        pass


def _prefix_leaves(which: str, specs, value) -> list:
    """One spec per leaf of ``value``: ``specs`` is a pytree prefix of it (None leaves count as
    specs meaning replicated)."""
    is_leaf = lambda x: x is None or _is_spec(x)  # noqa: E731
    out = tree_util.broadcast_prefix(specs, value, is_leaf=is_leaf, name=f"shard_map {which}")
    return [PartitionSpec() if s is None else s for s in out]


def _infer_specs(leaves, mesh) -> list:
    specs = []
    for x in leaves:
        s = getattr(getattr(x, "aval", None), "_sharding", None)
        specs.append(PartitionSpec(*s.spec) if s is not None else PartitionSpec())
    return specs


def _bound_to(f, path: str) -> str:
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return ""
    index = path[1:path.index("]")] if path.startswith("[") else ""
    if index.isdigit() and int(index) < len(params):
        return f", where args{path} is bound to {getattr(f, '__name__', f)}'s parameter " \
               f"'{params[int(index)]}'"
    return ""


def _check_arg(name, f, path, aval, spec, mesh, manual) -> None:
    shown = aval.str_short(short_dtypes=False)
    bound = _bound_to(f, path)
    where = f"the passed args{path} of shape {shown}{bound}"
    if len(spec) > len(aval.shape):
        raise ValueError(
            f"shard_map applied to the function '{name}' was given an in_specs entry which is "
            "too long to be compatible with the corresponding input value from the function:\n\n"
            f"in_specs is {spec} which has length {len(spec)}, but the passed args{path}{bound}, "
            f"has shape {shown}, which has rank {len(aval.shape)} (and {len(aval.shape)} < "
            f"{len(spec)})\n\n"
            "Entries in in_specs must be of length no greater than the number of axes in the "
            "corresponding input value.\n\nEither revise the spec to be shorter, or modify "
            f"'{name}' so that its inputs have sufficient rank.")
    for d in range(len(aval.shape)):
        axes = [a for a in spec.axes_of(d) if a in manual]
        size = math.prod(mesh.shape[a] for a in axes)
        if axes and aval.shape[d] % size:
            over = (f"mesh axis {axes[0]!r} (of size {size})" if len(axes) == 1 else
                    f"mesh axes {tuple(axes)} (of total size {size})")
            raise ValueError(
                f"shard_map applied to the function '{name}' was given argument arrays with "
                "axis sizes that are not evenly divisible by the corresponding mesh axis "
                f"sizes:\n\nThe mesh given has shape {tuple(mesh.axis_sizes)} with "
                f"corresponding axis names {tuple(mesh.axis_names)}.\n\n{where}, corresponds to "
                f"in_specs of value {spec}, which maps array axis {d} (of size {aval.shape[d]}) "
                f"to {over}, but {size} does not evenly divide {aval.shape[d]}\n\n"
                "Array arguments' axis sizes must be evenly divisible by the mesh axis or axes "
                "indicated by the corresponding elements of the argument's in_specs entry. "
                "Consider checking that in_specs are correct, and if so consider changing the "
                f"mesh axis sizes or else padding the input and adapting '{name}' "
                "appropriately.")


def _check_out_rank(name, aval, spec) -> None:
    if len(spec) > len(aval.shape):
        raise ValueError(
            f"shard_map applied to the function '{name}' was given an out_specs entry which is "
            "too long to be compatible with the corresponding output value from the "
            f"function:\n\nout_specs is {spec} which has length {len(spec)}, but {name}(*args) "
            f"has shape {aval.str_short(short_dtypes=False)}, which has rank {len(aval.shape)} "
            f"(and {len(aval.shape)} < {len(spec)})\n\nEntries in out_specs must be of length "
            "no greater than the number of axes in the corresponding output value.\n\nEither "
            f"revise the spec to be shorter, or modify '{name}' so that its outputs have "
            "sufficient rank.\n\nFor scalar values (rank 0), consider using an out_specs entry "
            "of `P()`, where `P = plax.sharding.PartitionSpec`. In particular, for rank 0 "
            "outputs which are not constant over the mesh, add at least one (singleton) axis to "
            "them so that they can be concatenated using out_specs.")
