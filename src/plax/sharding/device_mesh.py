"""Device grids for meshes (``jax.experimental.mesh_utils``, whose face is
``plax.experimental.mesh_utils``).

``create_device_mesh`` follows the devices' physical topology where they have one. TPU
devices report chip coordinates (``coords``) and a core index (``core_on_chip``); they are
arranged into the physical torus (``_get_physical_tpu_mesh``), whose axes are then given to
the logical axes, the last (most network-intensive) logical axis first, each taking whole
physical axes whose sizes multiply to its size (``_create_device_mesh_for_nd_torus``), or,
with ``allow_split_physical_axes``, factors of them. Small slices of some TPU generations
use fixed ring orders instead (``device_kind_handler_dict``, by ``device.device_kind``; a
program may register its own: ``handler(mesh_shape, devices, **options) -> array | None``,
None meaning "use the general rule"). GPU devices are laid out by id, others in their order.
"""
from __future__ import annotations

import collections
import itertools
import math

import numpy as np

from plax.runtime import xla

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]

# device_kind strings of the TPU generations (as devices report them)
_TPU_V2 = "TPU v2"
_TPU_V3 = "TPU v3"
_TPU_V4 = "TPU v4"
_TPU_V4_LITE = "TPU v4 lite"
_TPU_V5_LITE = "TPU v5 lite"
_TPU_V5E = "TPU v5e"
_TPU_V5P = "TPU v5p"
_TPU_V6_LITE = "TPU v6 lite"
_TPU_7X = "TPU7x"
_TPU_7 = "TPU7"
_TPU_8I = "TPU8i"

# Physical topologies where each process's devices can be made a contiguous block of the
# mesh: the mesh shape (its axes of size 1 left out) -> the transpose of the physical mesh
# that does it.
_TRANSPOSE_TRICKS: dict = {
    (2, 2, 1): {(2, 2): (0, 1, 2)},
    (2, 2, 4): {(4, 4): (0, 1, 2)},
    (4, 4, 4): {(16, 4): (0, 2, 1)},
    (4, 8, 8): {(64, 4): (0, 2, 1), (4, 64): (0, 2, 1)},
    (8, 8, 8): {(64, 8): (0, 2, 1)},
    (8, 16, 16): {(256, 8): (0, 2, 1), (8, 256): (0, 2, 1)},
}

# Orders of a small slice's devices (positions in the order the handler sorts them) that
# walk a ring over the chips' links.
_RING_8_TRAY = (0, 1, 2, 3, 6, 7, 4, 5)         # v2/v3: 4 chips x 2 cores; also 7x 2x2x2
_RING_2X2 = (0, 1, 3, 2)
_RING_4X4 = (0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4)
_RING_V5E_4X2 = (0, 1, 2, 3, 7, 6, 5, 4)
_ORDER_V5E_2X2X2 = (0, 4, 2, 6, 1, 5, 3, 7)
_ORDER_V5P_2X2X2 = (0, 1, 3, 2, 6, 7, 5, 4)


def _in_order(devices, order, mesh_shape) -> np.ndarray:
    """``devices`` taken in ``order`` (positions), as an array of ``mesh_shape``."""
    out = np.empty(len(order), dtype=object)
    out[:] = [devices[i] for i in order]
    return out.reshape(mesh_shape)


def _object_array(devices, shape) -> np.ndarray:
    out = np.empty(len(devices), dtype=object)
    out[:] = list(devices)
    return out.reshape(shape)


def _by_position(devices) -> list:
    """The devices sorted by chip position, x varying fastest."""
    return sorted(devices, key=lambda d: tuple(getattr(d, "coords", (0, 0, 0)))[::-1])


def _extent(devices) -> tuple:
    """How many chips the devices span along x, y and z (counted from 0)."""
    return tuple(1 + max(tuple(getattr(d, "coords", (0, 0, 0)))[i] for d in devices)
                 for i in range(3))


def _v2_v3_layout(mesh_shape, devices, **_):
    if len(devices) == 8:
        return _in_order(devices, _RING_8_TRAY, mesh_shape)
    grid = _object_array(devices, mesh_shape)
    if mesh_shape and mesh_shape[-1] == 8:
        return grid[..., list(_RING_8_TRAY)]
    return grid


def _2x2_ring_layout(mesh_shape, devices, **_):
    return _in_order(devices, _RING_2X2, mesh_shape) if len(devices) == 4 else None


def _v5e_v6e_layout(mesh_shape, devices, **_):
    extent, n = _extent(devices), len(devices)
    ordered = _by_position(devices)
    if extent == (2, 2, 1) and n == 4:
        return _in_order(ordered, _RING_2X2, mesh_shape)
    if n == 8:
        order = _ORDER_V5E_2X2X2 if extent == (2, 2, 2) else _RING_V5E_4X2
        return _in_order(ordered, order, mesh_shape)
    if extent == (4, 4, 1) and n == 16 and max(mesh_shape) == 16:
        return _in_order(ordered, _RING_4X4, mesh_shape)
    return None


def _v5p_layout(mesh_shape, devices, **_):
    if _extent(devices) == (2, 2, 2) and len(devices) == 8:
        return _in_order(_by_position(devices), _ORDER_V5P_2X2X2, mesh_shape)
    return None


def _7x_layout(mesh_shape, devices, **_):
    # Up to four trays of 2x2 chips (2 cores each): a ring through each tray in turn.
    if len(devices) % 8 or len(devices) > 32:
        return None
    shape = _get_physical_tpu_mesh(devices).shape
    if shape[0] > 2 or shape[1] > 2:
        return None
    order = [start + i for start in range(0, len(devices), 8) for i in _RING_8_TRAY]
    return _in_order(devices, order, mesh_shape)


device_kind_handler_dict: dict = {
    _TPU_V2: _v2_v3_layout, _TPU_V3: _v2_v3_layout,
    _TPU_V4_LITE: _2x2_ring_layout, _TPU_8I: _2x2_ring_layout,
    _TPU_V5_LITE: _v5e_v6e_layout, _TPU_V6_LITE: _v5e_v6e_layout,
    _TPU_V5P: _v5p_layout,
    _TPU_7X: _7x_layout, _TPU_7: _7x_layout,
}


# --- the physical mesh ------------------------------------------------------------------
def _get_physical_tpu_mesh(jax_devices) -> np.ndarray:
    """TPU devices arranged by chip coordinates into an array of shape (x, y, z) (offsets
    from the smallest coordinates); for kinds with several cores per chip a last axis of
    cores is added (v2/v3 have no z: their third axis is the core). The coordinates must
    fill a cuboid: AssertionError otherwise."""
    devices = list(jax_devices)
    kind = devices[0].device_kind
    coords = np.array([tuple(d.coords) for d in devices], dtype=np.int64)
    if coords.ndim != 2 or coords.shape[1] != 3:
        raise AssertionError(f"TPU devices have 3 chip coordinates, got {coords.shape[1:]}")
    low = coords.min(axis=0)
    dims = tuple(int(s) for s in coords.max(axis=0) - low + 1)
    cores = np.array([d.core_on_chip for d in devices], dtype=np.int64)
    ncores = int(cores.max() - cores.min() + 1)
    if len(devices) != math.prod(dims) * ncores:
        raise AssertionError(f"{len(devices)} devices cannot fill a cuboid of chips {dims} "
                             f"with {ncores} core(s) per chip: {devices}")
    rel, core = coords - low, cores - cores.min()
    if kind in (_TPU_V2, _TPU_V3):
        if rel[:, 2].any():
            raise AssertionError(f"{kind} devices have z coordinate 0: {devices}")
        shape, index = dims[:2] + (ncores,), np.column_stack([rel[:, :2], core])
    elif kind in (_TPU_7X, _TPU_7, _TPU_8I) or (kind == _TPU_V5P and ncores == 2):
        shape, index = dims + (ncores,), np.column_stack([rel, core])
    else:
        if cores.any():
            bad = devices[int(np.flatnonzero(cores)[0])]
            raise AssertionError(
                f"Creating meshes for TPU >v3 requires one device per chip (\"megacore\" "
                f"mode): {bad} of kind {kind} is core {bad.core_on_chip} of its chip.")
        shape, index = dims, rel
    out = np.full(shape, None, dtype=object)
    for d, where in zip(devices, index):
        out[tuple(where)] = d
    if any(x is None for x in out.flat):
        raise AssertionError(f"Constructed mesh contains a \"hole\": the coordinates of the "
                             f"devices are not a contiguous cuboid: {devices}")
    return out


# --- giving physical axes to logical axes ------------------------------------------------
def _logical_from_whole_axes(physical_mesh, mesh_shape, groups) -> np.ndarray:
    """The physical mesh with, for each logical axis in turn, the physical axes of its group
    (``groups[i]``), reshaped to ``mesh_shape``; unclaimed physical axes have size 1."""
    order = [p for group in groups for p in group]
    order += [p for p in range(physical_mesh.ndim) if p not in order]
    return physical_mesh.transpose(order).reshape(tuple(mesh_shape))


def _create_device_mesh_for_nd_torus(physical_mesh, mesh_shape, *,
                                     allow_split_physical_axes: bool = False):
    """``(logical_mesh, assignment)``: each logical axis, the last first, takes the largest
    set of unclaimed whole physical axes whose sizes multiply to its size (among sets of one
    size, the first in index order). ``assignment[p, l]`` is the part of physical axis ``p``
    that logical axis ``l`` takes. Where some axis finds no such set: NotImplementedError,
    or, with ``allow_split_physical_axes``, the assignment that splits physical axes."""
    sizes = list(physical_mesh.shape)
    free = list(range(len(sizes)))
    groups = [()] * len(mesh_shape)
    for axis in reversed(range(len(mesh_shape))):
        want = mesh_shape[axis]
        found = next((c for k in range(len(free), 0, -1)
                      for c in itertools.combinations(free, k)
                      if math.prod(sizes[p] for p in c) == want), None)
        if found is not None:
            groups[axis] = found
            free = [p for p in free if p not in found]
        elif want > 1:
            if allow_split_physical_axes:
                return _create_device_mesh_for_nd_torus_splitting_axes(physical_mesh,
                                                                       mesh_shape)
            left = [sizes[p] if p in free else 0 for p in range(len(sizes))]
            raise NotImplementedError(
                f"Failed to find assignment for logical_axis_index {axis} of size {want} "
                f"with remaining assignable mesh {left}. Each logical axis size must be the "
                "product of some of the unclaimed physical axis sizes (logical (4, 16) fits "
                "physical 4x4x4: 4 = 4 and 16 = 4x4); allow_split_physical_axes=True lets "
                "physical axes be split.")
    assignment = np.ones((len(sizes), len(mesh_shape)), dtype=np.int64)
    for axis, group in enumerate(groups):
        for p in group:
            assignment[p, axis] = sizes[p]
    return _logical_from_whole_axes(physical_mesh, mesh_shape, groups), assignment


def _get_prime_factors(x: int) -> list:
    """The prime factors of ``x`` >= 1, smallest first, with repetition ([] for 1)."""
    if x < 1:
        raise ValueError(f"_get_prime_factors needs a positive integer, got {x}")
    out, p = [], 2
    while p * p <= x:
        while x % p == 0:
            out.append(p)
            x //= p
        p += 1
    return out + [x] if x > 1 else out


def _divisor_vectors(limits, size):
    """All integer vectors ``z`` with ``z[i]`` dividing ``limits[i]`` and product ``size``."""
    if not limits:
        if size == 1:
            yield ()
        return
    first, rest = limits[0], limits[1:]
    for d in range(1, first + 1):
        if first % d == 0 and size % d == 0:
            for tail in _divisor_vectors(rest, size // d):
                yield (d,) + tail


def _enumerate_feasible_logical_axis_assignments(physical_mesh_shape, assignment,
                                                 logical_axis_size):
    """The ways one more logical axis of ``logical_axis_size`` can take parts of the physical
    axes left over by ``assignment`` ([physical, logical] sizes so far): vectors ``z`` with
    product ``logical_axis_size`` whose ``z[i]`` divides what is left of axis ``i``; yielded
    as int64 arrays, greatest first (lexicographically)."""
    left = [int(s) // int(used) for s, used in
            zip(physical_mesh_shape, np.prod(np.asarray(assignment), axis=-1))]
    for z in sorted(_divisor_vectors(left, int(logical_axis_size)), reverse=True):
        yield np.array(z, dtype=np.int64)


def _assignment_rank(z, physical_mesh_shape, assignment) -> tuple:
    """How good the logical axis assignment ``z`` is (greater is better): the product of the
    whole physical axes it takes, how many whole axes (of size > 1) it takes, the product
    of its parts on axes already partly taken, then ``z`` itself."""
    whole = [int(s) for s, full in zip(z, physical_mesh_shape) if s == full]
    taken = np.prod(np.asarray(assignment), axis=-1)
    shared = [int(s) for s, t in zip(z, taken) if t > 1]
    return (math.prod(whole), sum(1 for s in whole if s > 1), math.prod(shared),
            tuple(int(s) for s in z))


def _prefer_first_logical_axis_assignment(x, y, *, physical_mesh_shape, assignment) -> bool:
    """Whether logical axis assignment ``x`` ranks above ``y`` (see ``_assignment_rank``)."""
    return (_assignment_rank(x, physical_mesh_shape, assignment)
            > _assignment_rank(y, physical_mesh_shape, assignment))


def _create_device_mesh_for_nd_torus_splitting_axes(physical_mesh, mesh_shape):
    """``(logical_mesh, assignment)`` like ``_create_device_mesh_for_nd_torus``, where a
    logical axis may take a factor of a physical axis: each logical axis, the last first,
    takes the best-ranked feasible part of what is left."""
    physical_shape = tuple(physical_mesh.shape)
    mesh_shape = tuple(int(s) for s in mesh_shape)
    if math.prod(physical_shape) != math.prod(mesh_shape):
        raise ValueError(f"The number of devices in physical mesh {physical_shape} does not "
                         f"match the number of devices in logical mesh {mesh_shape}.")
    assignment = np.ones((len(physical_shape), len(mesh_shape)), dtype=np.int64)
    for axis in reversed(range(len(mesh_shape))):
        options = list(_enumerate_feasible_logical_axis_assignments(
            physical_shape, assignment, mesh_shape[axis]))
        if not options:
            raise ValueError(f"No part of physical mesh {physical_shape} is left for logical "
                             f"axis {axis} of size {mesh_shape[axis]} of {mesh_shape}.")
        assignment[:, axis] = max(
            options, key=lambda z: _assignment_rank(z, physical_shape, assignment))
    return _generate_logical_mesh(physical_mesh, mesh_shape, assignment), assignment


def _generate_logical_mesh(physical_mesh, logical_mesh_shape, assignment) -> np.ndarray:
    """The logical mesh ``assignment`` ([physical, logical] sizes) describes: each physical
    axis split into its logical parts (earlier logical axes major), then the parts gathered
    per logical axis in physical axis order."""
    assignment = np.asarray(assignment)
    nphys, nlog = assignment.shape
    split = np.reshape(physical_mesh, [int(s) for s in assignment.flat])
    gathered = split.transpose([p * nlog + axis for axis in range(nlog) for p in range(nphys)])
    return gathered.reshape(tuple(logical_mesh_shape))


def _transpose_trick(physical_mesh, mesh_shape) -> np.ndarray:
    """The physical mesh transposed so that each process's devices become a contiguous block
    of the logical mesh (only for the topologies and shapes of ``_TRANSPOSE_TRICKS``)."""
    topology = tuple(physical_mesh.shape)
    shapes = _TRANSPOSE_TRICKS.get(topology)
    if shapes is None:
        raise ValueError("create_device_mesh cannot create contiguous submeshes for physical "
                         f"mesh topology {topology}")
    key = tuple(s for s in mesh_shape if s != 1)
    if key not in shapes:
        raise ValueError("create_device_mesh cannot create contiguous submeshes for "
                         f"mesh_shape {tuple(mesh_shape)} and physical mesh topology "
                         f"{topology}. Available mesh_shapes: {list(shapes)}")
    return physical_mesh.transpose(shapes[key])


# --- the public functions ---------------------------------------------------------------
def _all_devices():
    return xla.get_backend().devices()


def _int_shape(mesh_shape):
    try:
        return tuple(int(s) for s in mesh_shape)
    except (TypeError, ValueError):
        raise ValueError("`mesh_shape` passed to `create_device_mesh` should be a sequence of "
                         f"ints. Got {mesh_shape}") from None


def create_device_mesh(mesh_shape, devices=None, *, contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False):
    """An array of ``devices`` (all devices by default) of shape ``mesh_shape`` (axes ordered
    by increasing network intensity) laid out along the devices' physical links: by the
    handler for their kind, else (TPU) by physical axes, else in device order (GPU: by id).
    ``contiguous_submeshes`` makes each process's devices a block (on the TPU topologies
    that allow it; ValueError otherwise)."""
    devices = list(_all_devices() if devices is None else devices)
    shape = _int_shape(mesh_shape)
    if math.prod(shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of "
                         f"mesh_shape {shape}")
    last = devices[-1]
    handler = device_kind_handler_dict.get(getattr(last, "device_kind", None))
    if handler is not None:
        mesh = handler(shape, devices, contiguous_submeshes=contiguous_submeshes)
        if mesh is not None:
            return mesh
    platform = getattr(last, "platform", None)
    if platform == "tpu":
        physical = _get_physical_tpu_mesh(devices)
        if contiguous_submeshes:
            physical = _transpose_trick(physical, shape)
        return _create_device_mesh_for_nd_torus(
            physical, shape, allow_split_physical_axes=allow_split_physical_axes)[0]
    if platform == "gpu":
        devices = sorted(devices, key=lambda d: d.id)
    return _object_array(devices, shape)


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *,
                              process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False):
    """A device mesh for two networks: the devices are grouped into granules (slices, or
    processes with ``process_is_granule``), each granule laid out as ``mesh_shape`` and the
    granules as ``dcn_mesh_shape``; the result has shape ``mesh_shape * dcn_mesh_shape``
    (elementwise), each granule one block of it."""
    devices = list(_all_devices() if devices is None else devices)
    if len(mesh_shape) != len(dcn_mesh_shape):
        raise ValueError(f"create_hybrid_device_mesh: mesh_shape {list(mesh_shape)} and "
                         f"dcn_mesh_shape {list(dcn_mesh_shape)} must have the same length")
    attr = "process_index" if process_is_granule else "slice_index"
    if not devices or not hasattr(devices[0], attr):
        raise ValueError(f"Device {devices[0] if devices else None} does not have attribute "
                         f"{attr}. See `process_is_granule` option.")
    by_key = collections.defaultdict(list)
    for d in devices:
        by_key[getattr(d, attr)].append(d)
    granules = [by_key[k] for k in sorted(by_key)] if should_sort_granules_by_key \
        else list(by_key.values())
    if math.prod(dcn_mesh_shape) != len(granules):
        raise ValueError(f"Number of slices {len(granules)} must equal the product of "
                         f"dcn_mesh_shape {list(dcn_mesh_shape)}")
    blocks = [create_device_mesh(mesh_shape, g,
                                 allow_split_physical_axes=allow_split_physical_axes)
              for g in granules]
    grid = np.empty(len(blocks), dtype=object)
    grid[:] = blocks
    grid = grid.reshape(tuple(dcn_mesh_shape))
    return np.block(grid.tolist()) if grid.ndim else blocks[0]
