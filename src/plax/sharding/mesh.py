"""Meshes: devices arranged in an n-dimensional grid with named axes, and the mesh context.

``Mesh(devices, axis_names, axis_types)`` holds real devices; ``AbstractMesh`` only the
axis names, sizes and types (what tracing needs). ``set_mesh(mesh)`` makes a mesh the
context one, against which bare ``PartitionSpec``s are resolved.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import math
import threading
import warnings

import numpy as np

from plax.core.avals import sharding_in_types
from plax.core.caches import BoundedCache
from plax.runtime import xla

__all__ = ["AxisType", "Mesh", "AbstractMesh", "make_mesh", "set_mesh",
           "use_mesh", "get_mesh", "get_abstract_mesh", "use_abstract_mesh", "context_mesh"]


class AxisType(enum.Enum):
    """How a mesh axis is treated: ``Auto`` (XLA's partitioner decides the layout of
    intermediates), ``Explicit`` (layouts are part of the types) or ``Manual`` (inside
    shard_map: code sees per-device shards)."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


def _axis_types(axis_types, names: tuple, default, what: str = "Mesh") -> tuple:
    """One AxisType per axis name (a lone AxisType is the type of a one-axis mesh)."""
    if axis_types is None:
        axis_types = (default,) * len(names)
    elif not isinstance(axis_types, (tuple, list)):
        axis_types = (axis_types,)
    axis_types = tuple(axis_types)
    if not all(isinstance(t, AxisType) for t in axis_types):
        raise TypeError(f"axis_types passed to {what} must be of type "
                        f"`jax.sharding.AxisType`. Got {axis_types} of type "
                        f"{tuple(type(t) for t in axis_types)}")
    if len(axis_types) != len(names):
        raise ValueError("Number of axis names should match the number of axis_types. Got "
                         f"axis_names={names} and axis_types={axis_types}")
    if AxisType.Explicit in axis_types:
        sharding_in_types[0] = True  # from now on primitives propagate shardings in types
    return axis_types


def _axis_names(axis_names) -> tuple:
    """The axis names as a tuple: any hashable names but None (as JAX, which names axes by
    strings in practice)."""
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if any(n is None for n in names):
        raise ValueError(f"Mesh axis names cannot be None. Got: {names!r}")
    for n in names:
        try:
            hash(n)
        except TypeError:
            raise TypeError(f"Mesh axis names must be hashable, got {n!r} in {names!r}.") \
                from None
    return names


# Whether any Mesh or AbstractMesh was ever made: until then no jaxpr holds a sharding or a
# shard_map, and runtime.spmd places jits without looking inside them.
meshes_made = [False]


class _MeshShape:
    """What Mesh and AbstractMesh share: axis names, sizes and types."""

    axis_names: tuple
    axis_sizes: tuple
    axis_types: tuple

    def __new__(cls, *args, **kwargs):  # (every way of making one: init, copy, unpickling)
        meshes_made[0] = True
        return super().__new__(cls)

    @property
    def shape(self) -> collections.OrderedDict:
        return collections.OrderedDict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes) if self.axis_names else 0

    @property
    def empty(self) -> bool:
        return not self.axis_names

    def _axes_text(self) -> str:
        axes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        types = ", ".join(t.name for t in self.axis_types)
        return f"{axes or '()'}, axis_types=({types}{',' if len(self.axis_types) == 1 else ''})"

    def _check_axes(self, names, what) -> None:
        missing = [n for n in names if n not in self.axis_names]
        if missing:
            raise ValueError(f"Resource axis: {missing[0]} of {what} is not found in mesh: "
                             f"{self.axis_names}.")

    @property
    def explicit_axes(self) -> tuple:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t is AxisType.Explicit)

    @property
    def auto_axes(self) -> tuple:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t is AxisType.Auto)

    @property
    def manual_axes(self) -> tuple:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t is AxisType.Manual)

    # Whether every axis has one type (False for a mesh without axes, as in JAX).
    @property
    def are_all_axes_explicit(self) -> bool:
        return bool(self.axis_types) and all(t is AxisType.Explicit for t in self.axis_types)

    @property
    def are_all_axes_auto(self) -> bool:
        return bool(self.axis_types) and all(t is AxisType.Auto for t in self.axis_types)

    @property
    def are_all_axes_manual(self) -> bool:
        return bool(self.axis_types) and all(t is AxisType.Manual for t in self.axis_types)


@dataclasses.dataclass(frozen=True)
class AbstractDevice:
    """The kind of device a mesh is made of (what an AbstractMesh keeps of its devices)."""

    device_kind: str
    num_cores: int | None
    platform: str

    def __repr__(self):
        return (f"AbstractDevice(device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform})")


class AbstractMesh(_MeshShape):
    """A mesh without devices: axis sizes, names and types (and, from a concrete mesh, the
    kind of its devices: ``abstract_device``)."""

    def __init__(self, axis_sizes, axis_names, axis_types=None, *, abstract_device=None,
                 device_kind=None, num_cores=None, platform=None):
        if abstract_device is not None:
            device_kind = abstract_device.device_kind
            num_cores, platform = abstract_device.num_cores, abstract_device.platform
        self.device_kind, self.num_cores, self.platform = device_kind, num_cores, platform
        self.axis_sizes = tuple(int(s) for s in axis_sizes)
        self.axis_names = _axis_names(axis_names)
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh needs one size per axis name, got sizes "
                             f"{self.axis_sizes} for names {self.axis_names}.")
        self.axis_types = _axis_types(axis_types, self.axis_names, AxisType.Auto,
                                      "AbstractMesh")

    def update_axis_types(self, types: dict) -> "AbstractMesh":
        new = tuple(types.get(n, t) for n, t in zip(self.axis_names, self.axis_types))
        return AbstractMesh(self.axis_sizes, self.axis_names, new, device_kind=self.device_kind,
                            num_cores=self.num_cores, platform=self.platform)

    @property
    def abstract_mesh(self) -> "AbstractMesh":
        return self

    @property
    def abstract_device(self) -> AbstractDevice | None:
        if self.device_kind is None:
            return None
        return AbstractDevice(self.device_kind, self.num_cores, self.platform)

    def _key(self):
        return (self.axis_sizes, self.axis_names, self.axis_types)

    def __eq__(self, other):
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self):
        return hash(("AbstractMesh", self._key()))

    def __repr__(self):
        devices = "" if self.device_kind is None else (
            f", device_kind={self.device_kind}, num_cores={self.num_cores}, "
            f"platform={self.platform}")
        return f"AbstractMesh({self._axes_text()}{devices})"


class Mesh(_MeshShape):
    """Devices in a grid with named axes: ``Mesh(np.array(devices).reshape(2, 4), ('a', 'b'))``.

    Usable as ``with plax.set_mesh(mesh):`` (or, as before, ``with mesh:``) to make it
    the mesh that bare PartitionSpecs refer to.
    """

    def __new__(cls, devices=None, axis_names=None, axis_types=None):
        if devices is None:  # (unpickling, copying)
            return super().__new__(cls)
        return _cached_mesh(devices, axis_names, axis_types)

    def __init__(self, *args, **kwargs):
        pass  # (made by __new__: identical meshes are one object, as in JAX)

    def _setup(self, devices, axis_names, axis_types) -> None:
        self.axis_names = axis_names
        self.devices = devices
        self.axis_sizes = tuple(devices.shape) if axis_names else ()
        self.axis_types = axis_types
        self._flat = tuple(devices.flat) if axis_names else ()
        # The devices themselves, not their ids: after clear_backends() a mesh over the old
        # client's devices must not equal (and share compiled programs with) one over the new.
        self._identity = (self._flat, self.axis_sizes, self.axis_names, self.axis_types)
        self._hash = hash(("Mesh", self._identity))
        self._abstract = None

    @property
    def _flat_devices_tuple(self) -> tuple:
        return self._flat

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices) if self.devices.size \
            else np.zeros(self.devices.shape, int)

    @property
    def local_devices(self) -> list:
        return [d for d in self._flat if d.process_index == d.client.process_index()]

    @property
    def is_multi_process(self) -> bool:
        return len({d.process_index for d in self._flat}) > 1

    @property
    def local_mesh(self) -> "Mesh":
        """The part of this mesh on this process's devices, with the same axes (the whole
        mesh in a single process); they must form a sub-grid of it."""
        if not self.is_multi_process:
            return self
        return self._process_part(self._flat[0].client.process_index(), contiguous=False)

    def _local_mesh(self, process_index) -> "Mesh":
        """The part of this mesh on process ``process_index``'s devices, which must be a
        contiguous block of it (ValueError otherwise)."""
        return self._process_part(process_index, contiguous=True)

    def _process_part(self, process_index, contiguous: bool) -> "Mesh":
        local = np.vectorize(lambda d: d.process_index == process_index,
                             otypes=[bool])(self.devices)
        ndim = local.ndim
        rows = [np.flatnonzero(local.any(axis=tuple(j for j in range(ndim) if j != i)))
                for i in range(ndim)]
        if contiguous:
            rows = [np.arange(r.min(), r.max() + 1) if r.size else r for r in rows]
        sub = local[np.ix_(*rows)]
        if not sub.all() or not sub.size:
            block = "a contiguous subcube" if contiguous else "a sub-grid"
            raise ValueError(f"The devices of process {process_index} must form {block} of "
                             f"the global device mesh {self}: it has no local mesh. Order the "
                             "mesh's devices so that each process's devices are a block of it "
                             "(e.g. by process along the first axis).")
        return Mesh(self.devices[np.ix_(*rows)], self.axis_names, self.axis_types)

    @property
    def abstract_mesh(self) -> AbstractMesh:
        if self._abstract is None:
            first = self._flat[0] if self._flat else None
            self._abstract = AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types,
                                          device_kind=getattr(first, "device_kind", None),
                                          num_cores=getattr(first, "num_cores", None),
                                          platform=getattr(first, "platform", None))
        return self._abstract

    def update_axis_types(self, types: dict, cached: bool = True) -> "Mesh":
        new = tuple(types.get(n, t) for n, t in zip(self.axis_names, self.axis_types))
        if cached:
            return Mesh(self.devices, self.axis_names, new)
        mesh = super().__new__(Mesh)
        mesh._setup(self.devices, self.axis_names, new)
        return mesh

    def __eq__(self, other):
        return self is other or (isinstance(other, Mesh) and self._hash == other._hash
                                 and self._identity == other._identity)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        if not self.axis_names:
            return "Mesh(axis_sizes=(), axis_names=())"
        types = ", ".join(t.name for t in self.axis_types)
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
                f"axis_types=({types}{',' if len(self.axis_types) == 1 else ''}))")

    def __str__(self):
        return f"Mesh({self._axes_text()})"

    # The old way to name the context mesh (JAX deprecates it in favour of set_mesh).
    def __enter__(self):
        warnings.warn("`with mesh:` context manager has been deprecated. Please use `with "
                      "jax.set_mesh(mesh):` instead.", DeprecationWarning, stacklevel=2)
        _push(self, places=False)  # (names the mesh of PartitionSpecs; computations stay put)
        return self

    def __exit__(self, *exc):
        _pop()
        return False


_meshes = BoundedCache("meshes", 256)


def _cached_mesh(devices, axis_names, axis_types) -> "Mesh":
    devices = np.asarray(devices, dtype=object) if not isinstance(devices, np.ndarray) \
        else devices
    names = _axis_names(axis_names)
    if devices.ndim != len(names):
        raise ValueError(
            "Mesh requires the ndim of its first argument (`devices`) to equal the length "
            f"of its second argument (`axis_names`), but got devices.ndim == {devices.ndim} "
            f"and len(axis_names) == {len(names)}.")
    types = _axis_types(axis_types, names, AxisType.Auto)
    flat = tuple(devices.flat) if names else ()  # (no axes: no devices)
    key = (flat, devices.shape, names, types)
    mesh = _meshes.get(key)
    if mesh is None:
        ids = [d.id for d in flat]
        if len(set(ids)) != len(ids):
            raise ValueError(f"Mesh devices must be distinct, got device ids {ids}.")
        mesh = _MeshShape.__new__(Mesh)
        mesh._setup(devices.copy() if devices.flags.writeable else devices, names, types)
        _meshes.put(key, mesh)
    return mesh


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None) -> Mesh:
    """A mesh of ``axis_shapes`` over the first of ``devices`` (all devices by default), laid
    out as ``mesh_utils.create_device_mesh`` does; its axes are Explicit unless
    ``axis_types`` says otherwise, as in JAX 0.10."""
    from plax.sharding import device_mesh as mesh_utils
    try:
        axis_shapes = tuple(int(s) for s in axis_shapes)
    except (TypeError, ValueError):
        raise ValueError("`axis_shapes` passed to `make_mesh` should be a sequence of ints. "
                         f"Got {axis_shapes}") from None
    names = _axis_names(axis_names)
    if len(axis_shapes) != len(names):
        raise ValueError(f"make_mesh needs one axis name per axis size, got {axis_shapes} and "
                         f"{names}.")
    devices = list(xla.get_backend().devices() if devices is None else devices)
    need = math.prod(axis_shapes)
    if need > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of "
                         f"mesh_shape {axis_shapes}")
    devices = devices[:need]
    # As JAX: only v5e slices may have physical axes split between logical ones.
    split = getattr(devices[0], "device_kind", None) in (mesh_utils._TPU_V5_LITE,
                                                         mesh_utils._TPU_V5E)
    grid = mesh_utils.create_device_mesh(axis_shapes, devices,
                                         allow_split_physical_axes=split)
    if len({getattr(d, "slice_index", 0) for d in grid.flat}) > 1:
        raise ValueError("`jax.make_mesh` does not support multi-slice topologies. Please use "
                         "jax.experimental.mesh_utils.create_hybrid_device_mesh")
    return Mesh(grid, names, _axis_types(axis_types, names, AxisType.Explicit))


# --- the context mesh -------------------------------------------------------------------------
class _Context(threading.local):
    def __init__(self):
        self.stack = []
        self.places = []  # per entry: whether computations run over it (not `with mesh:`)


_context = _Context()
_global_mesh = [None]
# Which mesh computations run over is part of the C++ jit cache's key.
_computation_mesh_key = xla.jit_key_setting("plax_computation_mesh", None)


def _push(mesh, places: bool = True) -> None:
    _context.stack.append(mesh)
    _context.places.append(places)
    _computation_mesh_changed()


def _pop() -> None:
    _context.stack.pop()
    _context.places.pop()
    _computation_mesh_changed()


def _computation_mesh_changed() -> None:
    if _context.stack:  # (this thread's own, None included)
        _computation_mesh_key.set_local(("mesh", computation_mesh()))
    else:
        xla.set_local_jit_setting(_computation_mesh_key, None)  # the global one holds


def _set_global_mesh(mesh) -> None:
    _global_mesh[0] = mesh
    _computation_mesh_key.set_global(("mesh", _placing(mesh)))


def context_mesh():
    """The context mesh (set by set_mesh), or None: what plax itself reads."""
    if _context.stack:
        return _context.stack[-1]
    return _global_mesh[0]


def computation_mesh():
    """The concrete mesh that eager operations and jitted calls run over when none of their
    arguments places them (replicated), as in JAX: the mesh of ``set_mesh``/``use_mesh``
    (not of ``with mesh:``), or None."""
    stack = _context.stack
    if stack:
        for mesh, places in zip(reversed(stack), reversed(_context.places)):
            if places:
                return _placing(mesh)
    mesh = _global_mesh[0]
    return None if mesh is None else _placing(mesh)


def _placing(mesh):
    return mesh if isinstance(mesh, Mesh) and mesh.axis_names else None


def _empty_mesh() -> "Mesh":
    return Mesh(np.empty((), dtype=object), ())


_EMPTY = []


def get_mesh():
    """The context mesh (set by set_mesh); an empty Mesh when none is set, as in JAX."""
    mesh = context_mesh()
    if mesh is None:
        if not _EMPTY:
            _EMPTY.append(_empty_mesh())
        return _EMPTY[0]
    return mesh


_manual_variants = BoundedCache("manual meshes", 256)


def manual_mesh(mesh, manual):
    """``mesh`` with the axes ``manual`` (and those already Manual) typed Manual: the context
    mesh inside a shard_map body. ``base_mesh`` of it gives ``mesh`` back."""
    base = base_mesh(mesh)
    manual = frozenset(manual) | frozenset(mesh.manual_axes)
    key = (base, manual)
    out = _manual_variants.get(key)
    if out is None:
        new = {a: AxisType.Manual for a in manual}
        # (not the cached Mesh of these types: _base_mesh marks this copy only)
        out = base.update_axis_types(new, cached=False) if isinstance(base, Mesh) else \
            base.update_axis_types(new)
        out._base_mesh = base
        _manual_variants.put(key, out)
    return out


def base_mesh(mesh):
    """The mesh a shard_map body's context mesh (``manual_mesh``) was made from (``mesh``
    itself for any other mesh)."""
    return getattr(mesh, "_base_mesh", mesh)


def same_mesh(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same mesh whatever their axis types (the same axes and,
    when both have devices, the same devices)."""
    if a.shape_tuple != b.shape_tuple:
        return False
    da, db = getattr(a, "_flat", None), getattr(b, "_flat", None)
    return da is None or db is None or da == db


def get_abstract_mesh() -> AbstractMesh:
    """The context mesh's AbstractMesh (an empty one when there is none)."""
    mesh = context_mesh()
    return AbstractMesh((), ()) if mesh is None else mesh.abstract_mesh


class _SetMesh:
    """``set_mesh(mesh)``: sets the mesh for the rest of the program, or, used as a context
    manager, for the ``with`` block only."""

    def __init__(self, mesh):
        if mesh is not None and not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"set_mesh takes a Mesh, got {type(mesh).__name__}.")
        self.mesh, self.previous = mesh, _global_mesh[0]
        _set_global_mesh(mesh)
        self._entered = False

    def __enter__(self):
        _set_global_mesh(self.previous)  # the block scopes it instead
        _push(self.mesh)
        self._entered = True
        return self.mesh

    def __exit__(self, *exc):
        _pop()
        return False


def set_mesh(mesh):
    """Make ``mesh`` the context mesh (for PartitionSpecs given without a mesh)."""
    return _SetMesh(mesh)


@contextlib.contextmanager
def use_mesh(mesh):
    """Context manager form of ``set_mesh``."""
    _push(mesh)
    try:
        yield mesh
    finally:
        _pop()


use_abstract_mesh = use_mesh
