"""GSPMDSharding: an array laid out by one of XLA's HloShardings over a list of devices.

The HloSharding's device numbers index the device list. Where plax's programs need a mesh
(jit, sharding constraints), the sharding is read as the NamedSharding over a mesh of the
same devices in the same order that XLA lays out alike (``named_view``).
"""
from __future__ import annotations

import numpy as np

from plax.runtime import xla
from plax.sharding.mesh import Mesh
from plax.sharding.named import (NamedSharding, check_divisible, named_sharding_of,
                                 register_sharding)
from plax.sharding.partition_spec import PartitionSpec
from plax.sharding.single import (Sharding, are_hlo_shardings_equal,  # noqa: F401
                                  is_hlo_sharding_replicated)

__all__ = ["GSPMDSharding", "is_hlo_sharding_replicated", "are_hlo_shardings_equal",
           "num_ways_dim_sharded", "as_mesh_sharding"]

_REPLICATED = xla.hlo_sharding_replicated()


def num_ways_dim_sharded(hlo) -> tuple[list, int]:
    """How many blocks each dimension is split into, and how many copies each block has."""
    if hlo.is_replicated() or hlo.is_unreduced():
        return [], 1
    if hlo.is_manual() or hlo.is_maximal() or hlo.tuple_elements():
        raise NotImplementedError(f"plax lays arrays out only by tiled or replicated "
                                  f"HloShardings, not {hlo}.")
    dims = list(hlo.tile_assignment_dimensions())
    groups = list(hlo.subgroup_types())
    replicated = xla.xla_client.OpSharding.Type.REPLICATED
    if hlo.replicate_on_last_tile_dim() or groups == [replicated]:
        return dims[:-1], dims[-1]
    if groups:
        raise NotImplementedError(f"plax lays arrays out only by tiled or replicated "
                                  f"HloShardings, not {hlo}.")
    return dims, 1


def _hlo_of(op_sharding):
    hc = xla.xla_client
    if isinstance(op_sharding, hc.OpSharding):
        op_sharding = hc.HloSharding.from_proto(op_sharding)
    if not isinstance(op_sharding, hc.HloSharding):
        raise TypeError("GSPMDSharding takes an OpSharding or an HloSharding, got "
                        f"{type(op_sharding).__name__}.")
    # (a V3 sharding, given by mesh axes, is read as the tiled form XLA reports results in)
    return hc.HloSharding.v3_to_v2_sharding(op_sharding)


class GSPMDSharding(xla.GSPMDShardingBase):
    """An array laid out over ``devices`` as the HloSharding (or OpSharding proto)
    ``op_sharding`` says; its device numbers index ``devices``."""

    def __init__(self, devices, op_sharding, *, memory_kind=None):
        if not isinstance(devices, xla.DeviceList):
            devices = xla.device_list(devices)
        hlo = _hlo_of(op_sharding)
        # (jaxlib's base checks and canonicalizes the memory kind: None is the default one)
        xla.GSPMDShardingBase.__init__(self, devices, hlo, memory_kind)
        self._hash = None
        self._view = None

    @classmethod
    def get_replicated(cls, device_assignment, *, memory_kind=None) -> "GSPMDSharding":
        """The sharding that gives each of ``device_assignment`` the whole array."""
        return cls(device_assignment, _REPLICATED, memory_kind=memory_kind)

    # --- the Sharding protocol ---
    @property
    def device_set(self) -> set:
        return set(self._devices)

    @property
    def _device_assignment(self) -> tuple:
        return tuple(self._devices)

    @property
    def num_devices(self) -> int:
        return len(self._devices)

    @property
    def memory_kind(self):
        return self._memory_kind

    def with_memory_kind(self, kind) -> "GSPMDSharding":
        return GSPMDSharding(self._devices, self._hlo_sharding, memory_kind=kind)

    @property
    def is_fully_replicated(self) -> bool:
        return is_hlo_sharding_replicated(self._hlo_sharding)

    def _to_xla_hlo_sharding(self, num_dimensions: int):
        return self._hlo_sharding

    def _tiling(self, ndim: int) -> tuple[list, int]:
        """The blocks per dimension of an ``ndim``-dimensional array, and the copies of each."""
        if self.is_fully_replicated:
            return [1] * ndim, len(self._devices)
        tiles, copies = num_ways_dim_sharded(self._hlo_sharding)
        if len(tiles) != ndim:
            raise ValueError(f"Sharding {self} is only valid for values of rank "
                             f"{len(tiles)}, but was applied to a value of rank {ndim}")
        return tiles, copies

    def check_compatible_aval(self, aval_shape) -> None:
        """JAX's error for a shape of lower rank than the sharding splits."""
        if self.is_fully_replicated:
            return
        tiles, _ = num_ways_dim_sharded(self._hlo_sharding)
        if len(aval_shape) < len(tiles):
            raise ValueError(f"Sharding {self} is only valid for values of rank at least "
                             f"{len(tiles)}, but was applied to a value of rank "
                             f"{len(aval_shape)}")

    def check_shape(self, global_shape, what: str = "", divisible: bool = True) -> None:
        """Raise if this sharding cannot lay out an array of ``global_shape`` (see
        NamedSharding.check_shape)."""
        global_shape = tuple(global_shape)
        try:
            tiles, _ = self._tiling(len(global_shape))
        except ValueError as e:
            raise ValueError(f"{what}{e}") from None
        if not divisible:
            return
        check_divisible(self, global_shape, tiles)

    def shard_shape(self, global_shape) -> tuple:
        global_shape = tuple(global_shape)
        self.check_shape(global_shape)
        tiles, _ = self._tiling(len(global_shape))
        return tuple(n // t for n, t in zip(global_shape, tiles))

    def _check_devices(self) -> None:
        """The HloSharding's device numbers must index the device list (as far as it is
        used: a sharding is made without this check, as JAX's is)."""
        hlo = self._hlo_sharding
        if not self.is_fully_replicated and hlo.num_devices() != len(self._devices):
            raise ValueError(f"GSPMDSharding: the sharding {hlo} lays an array out over "
                             f"{hlo.num_devices()} devices, but {len(self._devices)} were "
                             "given.")

    def _blocks(self, ndim: int) -> list:
        """Per device (in device-list order): its block coordinates and replica id."""
        devices = len(self._devices)
        if self.is_fully_replicated:
            return [((0,) * ndim, i) for i in range(devices)]
        self._check_devices()
        tiles, copies = self._tiling(ndim)
        out = [None] * devices
        for n, dev in enumerate(self._hlo_sharding.tile_assignment_devices()):
            block, replica = divmod(n, copies)
            out[dev] = (tuple(int(i) for i in np.unravel_index(block, tiles)), replica)
        return out

    def devices_indices_map(self, global_shape) -> dict:
        global_shape = tuple(global_shape)
        shard = self.shard_shape(global_shape)
        tiles, _ = self._tiling(len(global_shape))
        return {dev: tuple(slice(b * s, (b + 1) * s) if t > 1 else slice(None)
                           for b, s, t in zip(blocks, shard, tiles))
                for dev, (blocks, _) in zip(self._devices, self._blocks(len(global_shape)))}

    def replica_ids(self, global_shape) -> dict:
        blocks = self._blocks(len(tuple(global_shape)))
        return {dev: replica for dev, (_, replica) in zip(self._devices, blocks)}

    # --- as a mesh sharding ---
    @property
    def named_view(self) -> NamedSharding:
        """The NamedSharding laying arrays out as this does, over a mesh of this sharding's
        devices in this order (axes ``_axis_0``, ``_axis_1``, ...)."""
        if self._view is None:
            self._view = self._make_view()
        return self._view

    def _make_view(self) -> NamedSharding:
        devices = np.array(self._device_assignment, dtype=object)
        kind = self._memory_kind
        if self.is_fully_replicated:
            return NamedSharding(Mesh(devices, ("_axis_0",)), PartitionSpec(), memory_kind=kind)
        self._check_devices()
        hlo = self._hlo_sharding
        ndim = len(num_ways_dim_sharded(hlo)[0])
        if not hlo.is_tile_assignment_iota():
            # An explicit assignment: a mesh of its tiles, the devices as it orders them (so
            # in another order than this sharding's: arrays are moved to run on it).
            sizes = [int(s) for s in hlo.tile_assignment_dimensions()]
            mesh = Mesh(devices[list(hlo.tile_assignment_devices())].reshape(sizes),
                        tuple(f"_axis_{i}" for i in range(len(sizes))))
            return NamedSharding(mesh, mesh.axis_names[:ndim], memory_kind=kind)
        # The devices in this order, split into the axes XLA's iota assignment names.
        sizes = [int(s) for s in hlo.get_axis_sizes()]
        mesh = Mesh(devices.reshape(sizes), tuple(f"_axis_{i}" for i in range(len(sizes))))
        try:
            named = named_sharding_of(hlo, mesh, ndim)
        except NotImplementedError:
            raise NotImplementedError(f"plax cannot run a program over the GSPMDSharding "
                                      f"{self}: no mesh axes describe it.") from None
        return NamedSharding(named.mesh, named.spec, memory_kind=kind)

    def _to_sdy_sharding(self, num_dimensions: int) -> str:
        """The Shardy attribute of the view, its mesh written inline (see NamedSharding's);
        a TypeError for a sharding no mesh describes in this device order."""
        hlo = self._hlo_sharding
        if not self.is_fully_replicated and not hlo.is_tile_assignment_iota():
            raise TypeError(f"Cannot convert GSPMDSharding {hlo} into SdyArray: its devices "
                            "are not in the order of any mesh's.")
        return self.named_view._to_sdy_sharding(num_dimensions)

    # --- identity ---
    def __eq__(self, other):
        if self is other:
            return True
        return (isinstance(other, GSPMDSharding)
                and are_hlo_shardings_equal(self._hlo_sharding, other._hlo_sharding)
                and self._memory_kind == other._memory_kind
                and self._internal_device_list == other._internal_device_list)

    def __hash__(self):
        if self._hash is None:
            hlo = _REPLICATED if self.is_fully_replicated else self._hlo_sharding
            self._hash = hash((self._internal_device_list, hlo, self._memory_kind))
        return self._hash

    def __reduce__(self):
        return (_rebuild, (tuple(self._devices), self._hlo_sharding.to_proto(),
                           self._memory_kind))

    def __repr__(self):
        kind = "" if self._memory_kind is None else f", memory_kind={self._memory_kind}"
        return f"GSPMDSharding({self._hlo_sharding!r}{kind})"


def _rebuild(devices, op_sharding, memory_kind):
    return GSPMDSharding(devices, op_sharding, memory_kind=memory_kind)


register_sharding(GSPMDSharding)


def as_mesh_sharding(sharding, mesh=None):
    """``sharding`` as plax's programs take it: a GSPMDSharding as the NamedSharding over
    ``mesh`` (when that has its devices in its order and some spec lays arrays out alike),
    else as its own view; any other sharding as it is."""
    if not isinstance(sharding, GSPMDSharding):
        return sharding
    view = sharding.named_view
    if not isinstance(mesh, Mesh) or mesh is view.mesh or \
            mesh._flat != view._device_assignment:
        return view
    ndim = len(view.spec)
    try:
        named = named_sharding_of(view._to_xla_hlo_sharding(ndim), mesh, ndim)
    except NotImplementedError:
        return view
    return NamedSharding(mesh, named.spec, memory_kind=sharding.memory_kind)

