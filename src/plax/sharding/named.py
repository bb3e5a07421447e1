"""NamedSharding: an array laid out over a mesh by a PartitionSpec.

Dimension ``d`` of the array is split into ``prod(mesh.shape[a] for a in spec[d])``
blocks, the first named axis major; mesh axes the spec does not name replicate
the data. Everything about the layout (shard shapes, which device holds which
block, replica ids, XLA's HloSharding and the Shardy attribute) is computed
here from one description, ``_Layout``.
"""
from __future__ import annotations

import functools
import itertools
import math
import types

import numpy as np

from plax.core.avals import install_replicated_sharding
from plax.core.caches import BoundedCache, register_cache
from plax.runtime import xla
from plax.sharding.mesh import AbstractMesh, Mesh, context_mesh, get_abstract_mesh
from plax.sharding.partition_spec import UNCONSTRAINED, PartitionSpec
from plax.sharding.single import Sharding

__all__ = ["NamedSharding", "DuplicateSpecError", "IndivisibleError"]


class DuplicateSpecError(ValueError):
    pass


class IndivisibleError(ValueError):
    pass


def check_spec(mesh, spec: PartitionSpec) -> None:
    """JAX's errors for a spec that names an unknown mesh axis or one axis twice."""
    names = spec.mesh_axes()
    mesh._check_axes(names, repr(spec))
    seen = set()
    for n in names:
        if n in seen:
            raise DuplicateSpecError(
                "A single NamedSharding spec specification can map every mesh axis to at most "
                f"one positional dimension, but {spec!r} has duplicate entries for `{n}`")
        seen.add(n)
    for what, axes in (("Unreduced", spec.unreduced), ("Reduced", spec.reduced)):
        if not axes:
            continue
        missing = sorted((a for a in axes if a not in mesh.axis_names), key=str)
        if missing:
            raise ValueError(f"{what} axes {', '.join(map(str, missing))} is not found in "
                             f"mesh.axis_names={mesh.axis_names}. Got pspec={spec!r}")
        explicit = set(mesh.explicit_axes)
        if not axes <= explicit:
            raise ValueError(f"{what} axes can only refer to mesh axes that is of type "
                             f"`Explicit`. Got {what.lower()} axes: {axes!r} and mesh: {mesh}")


class _Layout:
    """The layout of an ``ndim``-dimensional array: blocks per dimension, and for every
    device (in mesh order) its block coordinates and replica id."""

    def __init__(self, mesh_shape: dict, spec: PartitionSpec, ndim: int):
        names = list(mesh_shape)
        self.tiles = tuple(math.prod(mesh_shape[a] for a in spec.axes_of(d)) for d in range(ndim))
        used = spec.mesh_axes()
        self.replicated_axes = tuple(a for a in names if a not in used)
        # (partial sums: laid out as copies, but not copies; XLA's tiling says which)
        self.unreduced_axes = tuple(a for a in self.replicated_axes if a in spec.unreduced)
        self.replication = math.prod(mesh_shape[a] for a in self.replicated_axes)
        sizes = [mesh_shape[a] for a in names]
        coords = np.indices(sizes).reshape(len(names), -1).T if names else np.zeros((1, 0), int)
        self.blocks, self.replica_ids = [], []
        for c in coords:
            pos = dict(zip(names, c))
            self.blocks.append(tuple(_mixed_radix([pos[a] for a in spec.axes_of(d)],
                                                  [mesh_shape[a] for a in spec.axes_of(d)])
                                     for d in range(ndim)))
            self.replica_ids.append(_mixed_radix([pos[a] for a in self.replicated_axes],
                                                 [mesh_shape[a] for a in self.replicated_axes]))
        # XLA's tile assignment: the mesh's device indices with the used axes first, in the
        # spec's order, then the replicating ones.
        self.mesh_sizes = sizes
        self.axis_order = [names.index(a) for a in used] + \
            [names.index(a) for a in self.replicated_axes]


@functools.lru_cache(maxsize=4096)
def common_devices_indices_map(sharding, global_shape: tuple) -> dict:
    """``{device: index}``: the part of an array of ``global_shape`` each device of
    ``sharding`` holds, computed once per sharding and shape (clear_caches empties it)."""
    compute = getattr(sharding, "_devices_indices_map", None)  # (other kinds: uncached there)
    return compute(global_shape) if compute is not None else \
        sharding.devices_indices_map(global_shape)


register_cache(types.SimpleNamespace(clear=common_devices_indices_map.cache_clear))


def _mixed_radix(digits, radices) -> int:
    n = 0
    for d, r in zip(digits, radices):
        n = n * r + int(d)
    return n



def check_divisible(sharding, global_shape: tuple, tiles) -> None:
    """JAX's IndivisibleError when a dimension of ``global_shape`` is not a multiple of the
    number of pieces ``sharding`` cuts it into (``tiles``, one per dimension)."""
    for d, (n, t) in enumerate(zip(global_shape, tiles)):
        if n % t:
            raise IndivisibleError(
                f"Sharding {sharding!r} implies that array axis {d} is partitioned {t} "
                f"times, but the dimension size is {n} (full shape: {global_shape}, "
                f"per-dimension tiling factors: {list(tiles)} should evenly divide the "
                "shape)")

# The memory kinds a sharding over an AbstractMesh may name (None: unspecified).
_MEMORY_KINDS = (None, "device", "pinned_host", "unpinned_host")


class NamedSharding(xla.GSPMDShardingBase):
    """An array over ``mesh`` with its dimensions split as ``spec`` says.

    ``NamedSharding(mesh, P('data', None))`` splits dimension 0 over the mesh axis
    ``data`` and replicates over the other axes.
    """

    def __init__(self, mesh, spec=PartitionSpec(), *, memory_kind=None):
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"NamedSharding's mesh must be a Mesh, got {type(mesh).__name__}.")
        if not isinstance(spec, PartitionSpec):
            if spec is None:
                spec = PartitionSpec()
            elif isinstance(spec, (tuple, list)):
                spec = PartitionSpec(*spec)
            else:
                raise TypeError(f"NamedSharding's spec must be a PartitionSpec, got {spec!r}.")
        check_spec(mesh, spec)
        if isinstance(mesh, AbstractMesh) and memory_kind not in _MEMORY_KINDS:
            raise ValueError(f"Got invalid memory kind: {memory_kind}. Valid memory kinds are: "
                             f"{', '.join(k for k in _MEMORY_KINDS if k)}")
        self.mesh, self.spec = mesh, spec
        self._given_kind = memory_kind
        self._kind = None if memory_kind == "device" else memory_kind  # ("device": the default)
        self._layouts = {}
        self._hash = hash(("NamedSharding", self._key()))
        self._mesh_devices = tuple(mesh.devices.flat) if isinstance(mesh, Mesh) else ()
        if self._mesh_devices:
            xla.GSPMDShardingBase.__init__(self, xla.device_list(self._mesh_devices),
                                           self._hlo_sharding(len(spec)), memory_kind)

    # --- the layout ---
    def _layout(self, ndim: int) -> _Layout:
        layout = self._layouts.get(ndim)
        if layout is None:
            layout = self._layouts[ndim] = _Layout(dict(self.mesh.shape), self.spec, ndim)
        return layout

    def _check_rank(self, ndim: int) -> None:
        if len(self.spec) > ndim:
            scalar = " For scalars the PartitionSpec should be P()." if ndim == 0 else ""
            raise ValueError(f"Sharding {self!r} is only valid for values of rank at least "
                             f"{len(self.spec)}, but was applied to a value of rank {ndim}."
                             f"{scalar}")

    def check_compatible_aval(self, aval_shape) -> None:
        """JAX's error for a shape of lower rank than the spec has entries."""
        self._check_rank(len(tuple(aval_shape)))

    def check_shape(self, global_shape, what: str = "", divisible: bool = True) -> None:
        """JAX's errors for a shape this sharding cannot lay out (``what`` prefixes the rank
        error, e.g. "One of device_put args is incompatible with ...: "). With ``divisible``
        False only the rank is checked: a constraint inside a program may split a dimension
        unevenly (XLA pads the last shards), though an array cannot be stored that way."""
        global_shape = tuple(global_shape)
        try:
            self._check_rank(len(global_shape))
        except ValueError as e:
            raise ValueError(f"{what}{e}") from None
        if not divisible:
            return
        check_divisible(self, global_shape, self._layout(len(global_shape)).tiles)

    def shard_shape(self, global_shape) -> tuple:
        global_shape = tuple(global_shape)
        self.check_shape(global_shape)
        tiles = self._layout(len(global_shape)).tiles
        return tuple(n // t for n, t in zip(global_shape, tiles))

    def devices_indices_map(self, global_shape) -> dict:
        return dict(common_devices_indices_map(self, tuple(global_shape)))

    def _devices_indices_map(self, global_shape: tuple) -> dict:
        if self.spec.unreduced:
            raise NotImplementedError("devices_indices_map doesn't work with unreduced axes "
                                      f"(sharding {self!r}).")
        shard = self.shard_shape(global_shape)
        layout = self._layout(len(global_shape))
        out = {}
        for dev, blocks in zip(self._mesh_devices, layout.blocks):
            out[dev] = tuple(slice(b * s, (b + 1) * s) if t > 1 else slice(None)
                             for b, s, t in zip(blocks, shard, layout.tiles))
        return out

    def replica_ids(self, global_shape) -> dict:
        layout = self._layout(len(tuple(global_shape)))
        return dict(zip(self._mesh_devices, layout.replica_ids))

    # --- the Sharding protocol ---
    @property
    def device_set(self) -> set:
        return set(self._mesh_devices)

    @property
    def _device_assignment(self) -> tuple:
        return self._mesh_devices

    @property
    def memory_kind(self):
        if isinstance(self.mesh, AbstractMesh):  # no devices to default to
            return self._given_kind
        return self._kind if self._kind is not None else "device"

    def with_memory_kind(self, kind) -> "NamedSharding":
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def with_spec(self, spec) -> "NamedSharding":
        return NamedSharding(self.mesh, spec, memory_kind=self._kind)

    def update(self, **changes) -> "NamedSharding":
        """A copy with some of ``mesh=``, ``spec=`` and ``memory_kind=`` replaced."""
        unknown = sorted(set(changes) - {"mesh", "spec", "memory_kind"})
        if unknown:
            raise TypeError(f"NamedSharding.update got unexpected keyword argument(s) "
                            f"{unknown}; it takes mesh=, spec= and memory_kind=.")
        return NamedSharding(changes.get("mesh", self.mesh), changes.get("spec", self.spec),
                             memory_kind=changes.get("memory_kind", self._kind))

    @property
    def is_fully_replicated(self) -> bool:
        if self.spec.unreduced:
            return False
        return all(s == 1 for s in (self.mesh.shape[a] for a in self.spec.mesh_axes()))

    @property
    def num_devices(self) -> int:
        return len(self._mesh_devices)

    # --- what XLA reads ---
    def _hlo_sharding(self, ndim: int):
        layout = self._layout(ndim)
        if layout.unreduced_axes:
            names, sizes = self.mesh.axis_names, dict(self.mesh.shape)
            rest = [a for a in layout.replicated_axes if a not in layout.unreduced_axes]
            order = [names.index(a) for a in self.spec.mesh_axes() + list(layout.unreduced_axes)
                     + rest]
            return xla.hlo_sharding_tiled(list(layout.tiles), layout.mesh_sizes, order,
                                          math.prod(sizes[a] for a in rest),
                                          math.prod(sizes[a] for a in layout.unreduced_axes))
        if all(t == 1 for t in layout.tiles):
            return xla.hlo_sharding_replicated()
        return xla.hlo_sharding_tiled(list(layout.tiles), layout.mesh_sizes, layout.axis_order,
                                      layout.replication)

    def _to_xla_hlo_sharding(self, num_dimensions: int):
        return self._hlo_sharding(num_dimensions)

    def shardy_attribute(self, ndim: int, mesh_name: str = "mesh") -> str:
        """``#sdy.sharding<@mesh, [{"a"}, {}]>`` for an ``ndim``-dimensional value."""
        return self._shardy(ndim, f"@{mesh_name}")

    def _to_sdy_sharding(self, num_dimensions: int) -> str:
        """The Shardy attribute with the mesh written inline, as a lone constraint takes it:
        ``#sdy.sharding<mesh<["a"=2]>, [{"a"}, {}]>``."""
        axes = ", ".join(f'"{n}"={size}' for n, size in self.mesh.shape.items())
        return self._shardy(num_dimensions, f"mesh<[{axes}]>")

    def _shardy(self, ndim: int, mesh_ref: str) -> str:
        if self.spec.unreduced:
            raise NotImplementedError(f"plax cannot lower the unreduced sharding {self!r} yet.")
        dims = []
        for d in range(ndim):
            entry = self.spec[d] if d < len(self.spec) else None
            if entry is UNCONSTRAINED:
                dims.append("{?}")
            else:
                dims.append("{" + ", ".join(f'"{a}"' for a in self.spec.axes_of(d)) + "}")
        return f"#sdy.sharding<{mesh_ref}, [{', '.join(dims)}]>"

    # --- identity ---
    def _key(self):
        return (self.mesh, self.spec, self._kind)

    def __eq__(self, other):
        return self is other or (isinstance(other, NamedSharding) and self._hash == other._hash
                                 and self._key() == other._key())

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (_rebuild, (self.mesh, self.spec, self._kind))

    def __repr__(self):
        if isinstance(self.mesh, AbstractMesh):  # a type's sharding
            return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r})"
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}, memory_kind={self.memory_kind})"


def resolve_spec(spec, what: str) -> NamedSharding:
    """A PartitionSpec as a NamedSharding over the context mesh (``set_mesh``); ``what``
    names who was given the spec, for the error when no mesh is set."""
    mesh = context_mesh()
    if mesh is None:
        raise ValueError(f"{what} was given the PartitionSpec {spec!r} but no mesh is set: use "
                         "plax.set_mesh(mesh), or pass NamedSharding(mesh, spec).")
    return NamedSharding(mesh, spec)


# --- results: XLA's HloSharding back to a NamedSharding -----------------------------------------
_specs = BoundedCache("output shardings", 1024)


def named_sharding_of(hlo, mesh, ndim: int) -> NamedSharding:
    """The NamedSharding on ``mesh`` that lays ``ndim``-dimensional values out as ``hlo``."""
    key = (str(hlo), mesh, ndim)
    hit = _specs.get(key)
    if hit is None:
        hit = _specs.put(key, _search_spec(hlo, mesh, ndim))
    return hit


def _search_spec(hlo, mesh, ndim: int) -> NamedSharding:
    """Try the ways of splitting the array's dimensions over the mesh's axes until one has
    XLA's layout ``hlo``."""
    if hlo.is_replicated():
        return NamedSharding(mesh, PartitionSpec())
    tiles = list(hlo.tile_assignment_dimensions())[:ndim]
    names, sizes = mesh.axis_names, mesh.shape
    for dims_of_axes in itertools.product(range(-1, ndim), repeat=len(names)):
        groups = [[n for n, d in zip(names, dims_of_axes) if d == dim] for dim in range(ndim)]
        if [math.prod(sizes[n] for n in g) for g in groups] != tiles:
            continue
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            entries = [None if not o else (o[0] if len(o) == 1 else tuple(o)) for o in orders]
            while entries and entries[-1] is None:
                entries.pop()
            candidate = NamedSharding(mesh, PartitionSpec(*entries))
            if candidate._to_xla_hlo_sharding(ndim) == hlo:
                return candidate
    raise NotImplementedError(f"XLA laid a result out as {hlo}, which no PartitionSpec over "
                              f"mesh {mesh} describes (plax cannot represent it yet).")


# --- shardings in types (Explicit axes) ---------------------------------------------------------
def _explicit_entry(entry, explicit):
    axes = tuple(a for a in PartitionSpec(entry).axes_of(0) if a in explicit) \
        if entry is not None and entry is not UNCONSTRAINED else ()
    return None if not axes else axes[0] if len(axes) == 1 else axes


def type_sharding(sharding, ndim: int, keep_replicated: bool = False):
    """The part of ``sharding`` an aval carries: a NamedSharding over its AbstractMesh with one
    entry per dimension naming Explicit axes only; None when no dimension is split over one
    (``keep_replicated``: the all-None sharding instead, for ``out_sharding`` parameters)."""
    if not isinstance(sharding, NamedSharding):
        return None
    mesh = sharding.mesh.abstract_mesh
    explicit = mesh.explicit_axes
    if not explicit and not keep_replicated:
        return None
    spec = sharding.spec
    entries = [_explicit_entry(spec[d] if d < len(spec) else None, explicit)
               for d in range(ndim)]
    if not keep_replicated and all(e is None for e in entries) and not (
            spec.unreduced or spec.reduced):
        return None
    return NamedSharding(mesh, PartitionSpec(*entries, unreduced=spec.unreduced,
                                             reduced=spec.reduced))


def typed_aval(aval, sharding):
    """``aval`` carrying the type sharding of ``sharding`` (see ``type_sharding``)."""
    s = type_sharding(sharding, len(aval.shape))
    return aval if aval._sharding == s else aval.update(sharding=s)


def out_sharding_param(out_sharding, ndim: int, what: str):
    """An ``out_sharding=`` argument (a PartitionSpec over the context mesh, or a
    NamedSharding) as the type sharding a primitive's parameter holds (None stays None)."""
    if out_sharding is None:
        return None
    if isinstance(out_sharding, PartitionSpec):
        mesh = context_mesh()
        if mesh is None or mesh.empty:
            raise ValueError(f"{what} was given out_sharding={out_sharding!r} but no mesh is "
                             "set: use plax.set_mesh(mesh), or pass NamedSharding(mesh, spec).")
        out_sharding = NamedSharding(mesh, out_sharding)
    elif not isinstance(out_sharding, NamedSharding):
        raise TypeError(f"{what}: out_sharding must be a PartitionSpec or a NamedSharding, got "
                        f"{type(out_sharding).__name__}.")
    out_sharding._check_rank(ndim)
    return type_sharding(out_sharding, ndim, keep_replicated=True)


def concrete_sharding(sharding, mesh=None) -> NamedSharding:
    """A type sharding (over an AbstractMesh) on the concrete ``mesh`` (default: the context
    mesh), for lowering and placing data."""
    if isinstance(sharding.mesh, Mesh):
        return sharding
    if mesh is None or not isinstance(mesh, Mesh):
        mesh = context_mesh()
    want = sharding.mesh
    if isinstance(mesh, Mesh) and mesh.axis_types != want.axis_types and \
            mesh.shape_tuple == want.shape_tuple:  # the same devices, the axes typed otherwise
        mesh = mesh.update_axis_types(dict(zip(want.axis_names, want.axis_types)))
    if not isinstance(mesh, Mesh) or mesh.abstract_mesh != want:
        raise ValueError(
            f"A value is typed as sharded over {sharding.mesh}, but no concrete mesh of that "
            f"shape is known here (the context mesh is {mesh}): call it under "
            "plax.set_mesh(mesh) with the mesh its inputs are on.")
    return NamedSharding(mesh, sharding.spec)


def _rebuild(mesh, spec, memory_kind):
    return NamedSharding(mesh, spec, memory_kind=memory_kind)


def register_sharding(cls) -> None:
    """Make jaxlib's sharding class ``cls`` a plax Sharding, with the methods every Sharding
    shares."""
    Sharding.register(cls)
    for name in ("addressable_devices", "is_fully_addressable",
                 "addressable_devices_indices_map", "is_equivalent_to",
                 "_addressable_device_assignment"):
        setattr(cls, name, getattr(Sharding, name))


register_sharding(NamedSharding)


def _replicated_on_context_mesh(ndim: int) -> NamedSharding:
    return NamedSharding(get_abstract_mesh(), (None,) * ndim)


# ShapedArray.sharding's default, and how a sharding given to a ShapedArray is read
install_replicated_sharding(_replicated_on_context_mesh, type_sharding)
