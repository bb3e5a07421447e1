"""plax.pmap, built on shard_map and jit as JAX 0.10 builds it.

``pmap(f)(x)`` maps ``f`` over the leading axis of ``x``, one slice per device: a
one-axis mesh over the devices, each mapped argument split over it along its
``in_axes`` (each device squeezes its slice of size 1), the results stacked along
their ``out_axes`` (each device's result expanded back), the whole a jit of a
``shard_map`` (not checked for replication, as pmap's own semantics).
"""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.api.jit import ShapeDtypeStruct, jit
from plax.api.shard_map import shard_mapped
from plax.api.stages import Lowered
from plax.core.caches import BoundedCache
from plax.experimental.multihost_utils import (global_array_to_host_local_array,
                                               host_local_array_to_global_array)
from plax.core.trace import EvalTrace, current_trace, get_aval
from plax.core.source_info import wraps
from plax.first_order import shapes as _shapes
from plax.runtime.array import CONCRETE
from plax.runtime import xla
from plax.sharding.mesh import Mesh
from plax.sharding.named import NamedSharding
from plax.sharding.partition_spec import PartitionSpec

__all__ = ["pmap"]

_DEFAULT_AXIS = "_internal_pmap_axis_name"
_inside = [0]  # pmaps being traced now (pmap of pmap is refused, as in JAX 0.10)


def pmap(fun=None, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(), global_arg_shapes=None):
    """``fun`` mapped over the devices: argument slices along ``in_axes`` (ints, None, or a
    pytree prefix of them) go one to a device, results stack along ``out_axes``; collectives
    over ``axis_name`` communicate across the devices."""
    if fun is None:
        return lambda f: pmap(f, axis_name, in_axes=in_axes, out_axes=out_axes,
                              static_broadcasted_argnums=static_broadcasted_argnums,
                              devices=devices, backend=backend, axis_size=axis_size,
                              donate_argnums=donate_argnums, global_arg_shapes=global_arg_shapes)
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}: pmap's first argument is the "
                        "function to map.")
    if global_arg_shapes is not None:
        raise ValueError("pmap's global_arg_shapes is not supported (JAX removed it too): pass "
                         "the arguments as global arrays instead.")
    for what, axes in (("in_axes", in_axes), ("out_axes", out_axes)):
        leaves = tree_util.tree_leaves(axes)  # (None is an empty subtree: no leaf)
        if not all(type(a) is int for a in leaves):
            raise TypeError(f"pmap {what} must be an int, None, or (nested) container with "
                            f"those types as leaves, but got {axes!r}.")
    if devices is not None and not len(devices):
        raise ValueError("'devices' argument to pmap must be non-empty, or None: pass the "
                         "devices to map over (e.g. jax.devices()[:2]).")
    name = _DEFAULT_AXIS if axis_name is None else axis_name
    statics = _index_tuple(static_broadcasted_argnums)
    donated = _index_tuple(donate_argnums)
    if set(statics) & set(donated):
        raise ValueError(f"`static_argnums` {sorted(statics)} and `donate_argnums` "
                         f"{sorted(donated)} cannot intersect: a static broadcasted argument "
                         "is compiled in, so it has no buffer to donate.")
    devs = tuple(devices) if devices is not None else None
    cache: dict = {}  # (structure, statics, ranks), mapped size -> (jit, its box)
    axes_cache: dict = {}  # (structure, statics, ranks) -> each leaf's mapped axis

    def prepare(args, kwargs, spans=False):
        for i in statics:
            if i >= len(args):
                raise ValueError(f"pmapped function has static_broadcasted_argnums={statics} "
                                 f"but was called with only {len(args)} positional arguments. "
                                 "Pass every static broadcasted argument positionally.")
            try:
                hash(args[i])
            except TypeError:
                raise ValueError(
                    "Non-hashable static arguments are not supported, as this can lead to "
                    f"unexpected cache-misses. Static argument (index {i}) of type "
                    f"{type(args[i])} for function {getattr(fun, '__name__', fun)} is "
                    "non-hashable.") from None
        dyn_idx = [i for i in range(len(args)) if i not in statics]
        # Keyword arguments are mapped along their leading axis, as JAX maps them.
        dyn = (tuple(args[i] for i in dyn_idx), kwargs)
        leaves, tree = tree_util.tree_flatten(dyn)
        static_vals = tuple(args[i] for i in statics)
        # The axes depend on the structure and ranks only: found once per such call.
        shape_key = (tree, static_vals, tuple(np.ndim(x) if not hasattr(x, "ndim") else x.ndim
                                              for x in leaves))
        flat_axes = axes_cache.get(shape_key)
        if flat_axes is None:
            axes = in_axes
            if isinstance(in_axes, (tuple, list)) and len(in_axes) == len(args) and statics:
                axes = tuple(a for i, a in enumerate(in_axes) if i not in statics)
            if isinstance(axes, list):
                axes = tuple(axes)
            axes = (axes, 0)  # (the positional arguments, the keyword ones)
            flat_axes = axes_cache[shape_key] = tuple(
                _canonical(ax, leaf) for ax, leaf in zip(_flat_axes(axes, dyn, "in_axes"), leaves))
        size = _mapped_size(leaves, flat_axes, axis_size)
        key = (shape_key, size, spans)
        built = cache.get(key)
        if built is None:
            mesh = _mesh(size, devs, backend, name, spans)
            n_kw = len(leaves) - len(tree_util.tree_leaves(dyn[0]))
            donate = [i in donated for i in dyn_idx]
            flags = [d for i, d in zip(dyn_idx, donate) for _ in
                     tree_util.tree_leaves(args[i])] + [False] * n_kw
            built = cache[key] = _build(fun, len(args), dict(zip(statics, static_vals)), tree,
                                         list(flat_axes), mesh, name, out_axes, flags)
        return built, leaves

    @wraps(fun)
    def wrapped(*args, **kwargs):
        eager = isinstance(current_trace(), EvalTrace)
        # Called eagerly in a run of several processes, each maps over its own devices and
        # collectives span them all: one program over every process's devices, as in JAX.
        spans = eager and (_process_count(backend) > 1 if devs is None else
                           len({d.process_index for d in devs}) > 1)
        (plain, placed, box), leaves = prepare(args, kwargs, spans)
        if spans:
            return _run_across_processes(placed, box, leaves, name)
        # Called eagerly, the results are laid out as pmap promises (over the devices along
        # their out_axes, even on one device, where every layout is the same); under a
        # transformation the enclosing computation decides, as in JAX.
        jitted = placed if eager else plain
        # Host data, and device arrays not yet split along their mapped axis, go straight to
        # their devices, one slice each (rather than whole to every device, then sliced).
        placements = box["placements"]
        move = [i for i, x in enumerate(leaves) if isinstance(x, np.ndarray) or (
            placements[i] is not None and type(x) in CONCRETE and x.sharding != placements[i])]
        if move:
            placed = host_local_array_to_global_array(
                [leaves[i] for i in move], box["mesh"], [box["in_specs"][i] for i in move])
            for i, x in zip(move, placed):
                leaves[i] = x
        return jitted(*leaves)

    def lower(*args, **kwargs):
        (_, jitted, box), leaves = prepare(args, kwargs)
        # Each leaf is lowered with the placement a call gives it: mapped ones split over the
        # devices (as JAX's pmap lowers them), without moving any data.
        stand_ins = [x if where is None or getattr(x, "sharding", None) == where
                     else _stand_in(x, where)
                     for x, where in zip(leaves, box["placements"])]
        dyn = tuple(a for i, a in enumerate(args) if i not in statics)
        traced = jitted.trace(*stand_ins)
        # (compiled, it takes the arguments as pmap does: the dynamic ones, as a pytree)
        return Lowered(traced._wrapped, traced._entry, traced._leaves,
                       tree_util.tree_structure((dyn, kwargs)))

    wrapped.lower = lower
    return wrapped


def _process_count(backend) -> int:
    return len({d.process_index for d in xla.get_backend(backend).devices()})


def _run_across_processes(jitted, box, leaves, name):
    """A pmap over every process's devices: this process's arguments (mapped over its own
    devices) made parts of global arrays, and the results' parts on its devices returned."""
    mesh = box["mesh"]
    outs = jitted(*host_local_array_to_global_array(list(leaves), mesh, list(box["in_specs"])))
    flat, tree = tree_util.tree_flatten(outs)
    local = global_array_to_host_local_array(flat, mesh, [_spec(ax, name) for ax in box["axes"]])
    return tree_util.tree_unflatten(tree, local)


def _build(fun, n_args, static_vals, tree, flat_axes, mesh, name, out_axes, donated):
    """Two jits of the shard_map computing ``fun`` over ``mesh`` for these arguments (leaves
    in, ``fun``'s results out): one leaving the results' layout to the enclosing computation,
    one laying them out along ``out_axes``; and the box of what tracing found. ``donated``
    has one flag per leaf."""
    in_specs = tuple(_spec(ax, name) for ax in flat_axes)
    box = {"mesh": mesh, "in_specs": in_specs,
           "placements": [None if ax is None else NamedSharding(mesh, spec)
                          for ax, spec in zip(flat_axes, in_specs)]}

    def body(*leaves):
        leaves = [leaf if ax is None else _shapes.squeeze(leaf, (ax,))
                  for leaf, ax in zip(leaves, flat_axes)]
        positional, kwargs = tree_util.tree_unflatten(tree, leaves)
        dyn = iter(positional)
        full = [static_vals[i] if i in static_vals else next(dyn) for i in range(n_args)]
        _inside[0] += 1
        try:
            out = fun(*full, **kwargs)
        finally:
            _inside[0] -= 1
        outs, box["tree"] = tree_util.tree_flatten(out)
        box["axes"] = [_canonical(ax, o, out=True) for ax, o in zip(_flat_axes(out_axes, out, "out_axes"),
                                                                     outs)]
        return [o if ax is None else _shapes.expand_dims(o, (ax,))
                for o, ax in zip(outs, box["axes"])]

    mapped = shard_mapped(body, mesh, in_specs, lambda: [_spec(ax, name) for ax in box["axes"]],
                          False, frozenset())
    def _fun(*leaves):  # (the name jaxprs show for pmap's jit, as JAX's)
        outs = mapped(*leaves)  # (tracing the body sets box["tree"])
        return tree_util.tree_unflatten(box["tree"], outs)

    donate = tuple(i for i, d in enumerate(donated) if d)
    # One function for both, so they share its traces.
    placed = _out_shardings(out_axes, mesh, name)
    return (jit(_fun, donate_argnums=donate),
            jit(_fun, donate_argnums=donate, out_shardings=placed), box)


def _out_shardings(out_axes, mesh, name):
    """jit's out_shardings for pmap's results (a prefix of them, as ``out_axes`` is): split
    over ``mesh`` along each result's mapped axis, replicated where it is None; a negative
    axis is left to XLA (its position depends on the result's rank)."""
    def sharding(ax):
        if ax is not None and ax < 0:
            return None
        return NamedSharding(mesh, _spec(ax, name))
    return tree_util.tree_map(sharding, out_axes, is_leaf=lambda a: a is None)


def _stand_in(x, sharding) -> ShapeDtypeStruct:
    """``x``'s type laid out by ``sharding``, for lowering without moving ``x``."""
    aval = get_aval(x)
    return ShapeDtypeStruct(aval.shape, aval.dtype, sharding, weak_type=aval.weak_type)


def _index_tuple(nums) -> tuple:
    if isinstance(nums, int):
        return (nums,)
    return tuple(int(i) for i in nums)


def _flat_axes(axes, tree, what: str) -> list:
    """One axis (an int or None) per leaf of ``tree``: ``axes`` (pmap's ``what``, checked
    to hold ints and None) is a pytree prefix of it."""
    is_leaf = lambda a: a is None or isinstance(a, int)  # noqa: E731
    if is_leaf(axes):
        return [axes] * len(tree_util.tree_leaves(tree))
    whole = "the arguments' tree" if what == "in_axes" else "the results' tree"
    try:
        return tree_util.broadcast_prefix(axes, tree, is_leaf=is_leaf, name=f"pmap {what}",
                                          which=whole)
    except ValueError as e:
        if what == "out_axes":
            raise
        raise ValueError(f"{e}\n\npmap's in_axes must be a tree prefix of the tuple of "
                         "arguments passed positionally (arguments passed by keyword are mapped "
                         "along their axis 0 and are not compared with it).") from None


def _canonical(ax, leaf, out: bool = False):
    if ax is None:
        return None
    ndim = len(get_aval(leaf).shape) if hasattr(leaf, "aval") else np.ndim(leaf)
    rank = ndim + 1 if out else ndim
    if not -rank <= ax < rank:
        if not out and ndim == 0:
            raise ValueError(f"pmap was requested to map its argument along axis {ax}, which "
                             f"implies that its rank should be at least {ax + 1 if ax >= 0 else -ax}"
                             f", but is only 0 (its shape is ())")
        raise ValueError(f"axis {ax} is out of bounds for array of dimension {rank if out else ndim}")
    return ax % rank


def _mapped_size(leaves, axes, axis_size) -> int:
    sizes = {i: np.shape(leaf)[ax] if not hasattr(leaf, "shape") else leaf.shape[ax]
             for i, (leaf, ax) in enumerate(zip(leaves, axes)) if ax is not None}
    if not sizes:  # (axis_size does not stand in for one, as in JAX)
        raise ValueError("pmap requires at least one argument with a mapped axis: every in_axes "
                         "entry is None (or there are no arguments). Map an argument along one "
                         "of its axes, e.g. in_axes=0.")
    distinct = set(sizes.values())
    if len(distinct) > 1:
        listing = ", ".join(f"argument {i} has size {s} along axis {axes[i]}"
                            for i, s in sizes.items())
        raise ValueError(f"pmap got inconsistent sizes for array axes to be mapped:\n{listing}")
    size = distinct.pop()
    if axis_size is not None and axis_size != size:
        raise ValueError(f"Specified axis_size {axis_size} doesn't match received axis_size "
                         f"{size}: the mapped arguments have size {size} along their in_axes.")
    return size


# (size, devices, backend, name) -> Mesh: built once, not per call. A registered cache, so
# clear_backends() drops meshes of the old clients' devices.
_meshes = BoundedCache("pmap meshes", 256)


def _mesh(size: int, devices, backend, name, spans: bool = False) -> Mesh:
    key = (size, devices, backend, name, spans)
    mesh = _meshes.get(key) if not _inside[0] else None
    if mesh is None:
        mesh = _meshes.put(key, _new_mesh(size, devices, backend, name, spans))
    return mesh


def _new_mesh(size: int, devices, backend, name, spans: bool = False) -> Mesh:
    """The one-axis mesh of a pmap over ``size`` devices (``devices``, else this process's);
    ``spans``: over the first ``size`` devices of every process (of ``devices``, else of all
    devices), process by process."""
    if _inside[0]:
        raise ValueError(
            "pmap of pmap is not supported: plax builds pmap on shard_map, as JAX 0.10 does, and "
            "the inner pmap's mesh should match the mesh passed to shard_map. Use one pmap over "
            "a flattened axis, or shard_map over a 2-D mesh.")
    client = xla.get_backend(backend)
    available = list(devices) if devices is not None else \
        [d for d in client.devices() if d.process_index == client.process_index()]
    if spans:
        by_process: dict = {}
        for d in (devices if devices is not None else client.devices()):
            by_process.setdefault(d.process_index, []).append(d)
        available = by_process.get(client.process_index(), [])
    if size > len(available):
        raise ValueError(
            f"compiling computation that requires {size} logical devices, but only "
            f"{len(available)} XLA devices are available (num_replicas={size})")
    if spans:
        if any(len(ds) < size for ds in by_process.values()):
            raise ValueError(f"pmap over {size} devices per process needs that many on every "
                             "process; some process has fewer.")
        chosen = [d for p in sorted(by_process) for d in by_process[p][:size]]
        return Mesh(np.array(chosen, dtype=object), (name,))
    return Mesh(np.array(available[:size], dtype=object), (name,))


def _spec(ax, name) -> PartitionSpec:
    return PartitionSpec() if ax is None else PartitionSpec(*([None] * ax), name)

