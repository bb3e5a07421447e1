"""plax.experimental.pallas.tpu_sc, as ``jax.experimental.pallas.tpu_sc`` (``plsc``): kernels
for a TPU's SparseCores.

plax builds no SparseCore kernels. The names are here so that code importing them loads;
``get_sparse_core_info`` answers from ``pltpu.get_tpu_info()``, and building a subcore mesh
on a chip without SparseCores (a v5e, or no TPU) raises JAX's error, as do the operations.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

from plax import tree_util
from plax.pallas import tpu_info

__all__ = ["Indices", "PackFormat", "ScalarSubcoreMesh", "VectorSubcoreMesh", "addupdate",
           "addupdate_compressed", "addupdate_scatter", "all_reduce_ffs",
           "all_reduce_population_count", "bitcast", "cummax", "cumsum", "fetch_and_add",
           "get_sparse_core_info", "load_expanded", "load_gather", "pack", "parallel_loop",
           "scan_count", "sort_key_val", "store_compressed", "store_scatter",
           "subcore_barrier", "unpack"]


def get_sparse_core_info():
    """The SparseCores of the current TPU (``pltpu.TpuInfo.sparse_core``); a RuntimeError
    where it has none."""
    info = tpu_info.get_tpu_info().sparse_core
    if info is None:
        raise RuntimeError("The current TPU does not have SparseCores")
    return info


def _check_cores(num_cores: int, num_subcores: int | None = None) -> None:
    info = get_sparse_core_info()
    if num_cores > info.num_cores:
        raise ValueError(f"Mesh has {num_cores} cores, but the current TPU chip has only "
                         f"{info.num_cores} SparseCores")
    if num_subcores is not None and num_subcores > info.num_subcores:
        raise ValueError(f"Mesh has {num_subcores} subcores, but the current TPU chip has "
                         f"only {info.num_subcores} subcores")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScalarSubcoreMesh:
    """The scalar subcores of the SparseCores, along ``axis_name``."""

    axis_name: str
    num_cores: int = dataclasses.field(default_factory=lambda: get_sparse_core_info().num_cores)

    def __post_init__(self):
        _check_cores(self.num_cores)

    @property
    def shape(self) -> dict:
        return {self.axis_name: self.num_cores}


@dataclasses.dataclass(frozen=True, kw_only=True)
class VectorSubcoreMesh:
    """The vector subcores of the SparseCores, along a core axis and a subcore axis."""

    core_axis_name: str
    subcore_axis_name: str
    num_cores: int = dataclasses.field(default_factory=lambda: get_sparse_core_info().num_cores)
    num_subcores: int = dataclasses.field(
        default_factory=lambda: get_sparse_core_info().num_subcores)

    def __post_init__(self):
        _check_cores(self.num_cores, self.num_subcores)

    @property
    def shape(self) -> dict:
        return {self.core_axis_name: self.num_cores, self.subcore_axis_name: self.num_subcores}


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Indices:
    """Indices of a SparseCore gather or scatter (``ignored_value``: an index to skip)."""

    values: Any
    ignored_value: int | None = dataclasses.field(default=None, metadata=dict(static=True))


class PackFormat(enum.Enum):
    """How ``pack`` lays out two vectors: one after the other, or interleaved."""

    COMPRESSED = "compressed"
    INTERLEAVED = "interleaved"


def _sparse_core_only(name: str):
    def op(*args, **kwargs):
        get_sparse_core_info()  # (JAX's error where there are no SparseCores)
        raise NotImplementedError(f"plsc.{name}: plax builds no SparseCore kernels.")
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"JAX's ``plsc.{name}`` (a SparseCore kernel operation; not built in plax)."
    return op


for _name in __all__[4:]:
    if _name != "get_sparse_core_info":
        globals()[_name] = _sparse_core_only(_name)
del _name
