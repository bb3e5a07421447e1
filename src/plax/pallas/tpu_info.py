"""What a TPU generation has, per TensorCore: lanes, sublanes, MXUs, memory sizes and speeds.

``get_tpu_info()`` describes the default device's chip (a ValueError naming the device
kind on anything that is not a TPU, as JAX's); ``get_tpu_info_for_chip(version, cores)``
any chip. The figures are the published per-chip ones divided among the chip's
TensorCores where they are shared.
"""
from __future__ import annotations

import dataclasses
import enum

from plax.core import dtypes
from plax.runtime.dispatch import default_device

__all__ = ["ChipVersion", "TpuInfo", "SparseCoreInfo", "Tiling", "get_tpu_info",
           "get_tpu_info_for_chip", "is_tpu_device", "chip_version_from_device_kind"]


class ChipVersionBase:
    """What every chip version enum derives from."""


class ChipVersion(ChipVersionBase, enum.Enum):
    """A TPU chip generation."""

    TPU_V2 = "v2"
    TPU_V3 = "v3"
    TPU_V4I = "v4i"
    TPU_V4 = "v4"
    TPU_V5E = "v5e"
    TPU_V5P = "v5p"
    TPU_V6E = "v6e"
    TPU_7 = "7"
    TPU_7X = "7x"
    TPU_8I = "8i"

    def __str__(self) -> str:
        return self.value

    @property
    def num_physical_tensor_cores_per_chip(self) -> int:
        return 1 if self.is_lite else 2

    @property
    def is_lite(self) -> bool:
        return self in (ChipVersion.TPU_V4I, ChipVersion.TPU_V5E, ChipVersion.TPU_V6E)

    @property
    def supports_megacore(self) -> bool:
        return self in (ChipVersion.TPU_V4, ChipVersion.TPU_V5P)


_DEVICE_KINDS = {
    "TPU v2": ChipVersion.TPU_V2, "TPU v3": ChipVersion.TPU_V3, "TPU v4": ChipVersion.TPU_V4,
    "TPU v4 lite": ChipVersion.TPU_V4I, "TPU v5e": ChipVersion.TPU_V5E,
    "TPU v5 lite": ChipVersion.TPU_V5E, "TPU v5": ChipVersion.TPU_V5P,
    "TPU v5p": ChipVersion.TPU_V5P, "TPU v6e": ChipVersion.TPU_V6E,
    "TPU v6 lite": ChipVersion.TPU_V6E, "TPU7": ChipVersion.TPU_7, "TPU7x": ChipVersion.TPU_7X,
    "TPU8i": ChipVersion.TPU_8I,
}


def chip_version_from_device_kind(device_kind: str) -> ChipVersion | None:
    """The chip version a device's ``device_kind`` names (None: not a TPU plax knows)."""
    return _DEVICE_KINDS.get(device_kind)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SparseCoreInfo:
    """A chip's SparseCores."""

    num_cores: int
    num_subcores: int
    num_lanes: int
    vmem_capacity_bytes: int
    dma_granule_size_bytes: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class TpuInfo:
    """One TensorCore of a TPU chip (multiply by ``num_cores`` for the logical device)."""

    chip_version: ChipVersionBase
    generation: int
    num_cores: int
    num_lanes: int
    num_sublanes: int
    mxu_column_size: int
    num_mxus: int
    num_accumulators: int
    vmem_capacity_bytes: int
    cmem_capacity_bytes: int
    smem_capacity_bytes: int
    hbm_capacity_bytes: int
    mem_bw_bytes_per_second: int
    bf16_ops_per_second: int
    int8_ops_per_second: int
    fp8_ops_per_second: int
    int4_ops_per_second: int
    sparse_core: SparseCoreInfo | None = None

    @property
    def is_lite(self) -> bool:
        return self.chip_version.is_lite

    @property
    def is_split_chip(self) -> bool:
        """A chip of two TensorCores used as two devices."""
        return self.num_cores == 1 and self.chip_version.num_physical_tensor_cores_per_chip > 1

    @property
    def is_megacore(self) -> bool:
        """Two TensorCores combined into one device."""
        return self.num_cores > 1

    def is_matmul_supported(self, lhs_dtype, rhs_dtype) -> bool:
        """Whether the MXU multiplies these operand dtypes without converting them."""
        lhs, rhs = dtypes.dtype(lhs_dtype).name, dtypes.dtype(rhs_dtype).name
        floats = {"float32", "bfloat16"}
        if self.generation <= 3:
            return lhs == rhs == "float32"
        if self.generation == 4:
            return lhs in floats and rhs in floats | {"int8"}
        if self.generation in (5, 6):
            f8 = floats | {"float8_e5m2", "float8_e4m3b11fnuz"}
            return any(lhs in group and rhs in group for group in (
                f8, {"int8", "uint8"}, {"int4", "uint4"}))
        if self.generation in (7, 8):
            f8 = {"float8_e5m2", "float8_e4m3fn"}
            return (lhs in floats and rhs in floats) or (lhs in floats | f8 and rhs in f8)
        return False

    def get_sublane_tiling(self, dtype) -> int:
        """The sublane tiling XLA uses for ``dtype`` by default."""
        bits = dtypes.itemsize_bits(dtypes.dtype(dtype))
        if self.generation < 7:
            return self.num_sublanes if bits in (16, 32) else self.num_sublanes * (32 // bits)
        if self.generation == 7:
            return self.num_sublanes * (32 // bits)
        raise NotImplementedError("TPU generation is not supported")


# Per chip: generation, MXU columns, MXUs, accumulators, VMEM MiB per core, CMEM bytes per
# chip, SMEM KiB per core, HBM bytes, HBM bytes/s, bf16/int8/fp8/int4 ops/s (0: none),
# SparseCores (cores, subcores, lanes, VMEM KiB, DMA granule) or None. Chip-wide figures.
_CHIPS: dict[ChipVersion, tuple] = {
    ChipVersion.TPU_V2: (2, 128, 1, 0, 16, 0, 16, 16.0e9, 7.16e11, 4.6e13, 0, 0, 0, None),
    ChipVersion.TPU_V3: (3, 128, 2, 0, 16, 0, 16, 34.4e9, 8.25e11, 1.40e14, 0, 0, 0, None),
    ChipVersion.TPU_V4I: (4, 128, 4, 0, 16, 134e6, 1024, 8.59e9, 6.14e11, 1.37e14, 0, 0, 0,
                          None),
    ChipVersion.TPU_V4: (4, 128, 4, 0, 16, 134e6, 1024, 34.4e9, 1.23e12, 2.75e14, 0, 0, 0,
                         None),
    ChipVersion.TPU_V5E: (5, 128, 4, 0, 128, 0, 1024, 17.2e9, 8.20e11, 1.97e14, 3.94e14, 0,
                          7.88e14, None),
    ChipVersion.TPU_V5P: (5, 128, 4, 0, 64, 0, 1024, 103e9, 2.46e12, 4.59e14, 9.18e14, 0,
                          1.84e15, (4, 16, 8, 512, 32)),
    ChipVersion.TPU_V6E: (6, 256, 2, 0, 128, 0, 1024, 34.4e9, 1.64e12, 9.20e14, 1.84e15,
                          9.20e14, 3.68e15, (2, 16, 8, 256, 32)),
    ChipVersion.TPU_7: (7, 256, 2, 128, 64, 0, 1024, 206e9, 7.40e12, 2.31e15, 0, 4.60e15, 0,
                        (2, 16, 16, 512, 32)),
    ChipVersion.TPU_8I: (8, 256, 2, 256, 192, 0, 1024, 309e9, 8.60e12, 1.101e15, 0,
                         8.808e15, 0, (1, 4, 16, 512, 64)),
}
_CHIPS[ChipVersion.TPU_7X] = _CHIPS[ChipVersion.TPU_7]


def _info(chip: ChipVersion, num_cores: int) -> TpuInfo:
    (gen, mxu_cols, mxus, accs, vmem_mib, cmem, smem_kib, hbm, bw, bf16, int8, fp8, int4,
     sparse) = _CHIPS[chip]
    share = 1 if chip.is_lite else chip.num_physical_tensor_cores_per_chip

    def per_core(x):
        return int(x // share)
    return TpuInfo(
        chip_version=chip, generation=gen, num_cores=num_cores, num_lanes=128,
        num_sublanes=8, mxu_column_size=mxu_cols, num_mxus=mxus, num_accumulators=accs,
        vmem_capacity_bytes=vmem_mib << 20, cmem_capacity_bytes=per_core(cmem),
        smem_capacity_bytes=smem_kib << 10, hbm_capacity_bytes=per_core(hbm),
        mem_bw_bytes_per_second=per_core(bw), bf16_ops_per_second=per_core(bf16),
        int8_ops_per_second=per_core(int8), fp8_ops_per_second=per_core(fp8),
        int4_ops_per_second=per_core(int4),
        sparse_core=None if sparse is None else SparseCoreInfo(
            num_cores=sparse[0], num_subcores=sparse[1], num_lanes=sparse[2],
            vmem_capacity_bytes=sparse[3] << 10, dma_granule_size_bytes=sparse[4]))


def is_tpu_device() -> bool:
    """Whether the default device is a TPU."""
    return chip_version_from_device_kind(default_device().device_kind) is not None


def get_tpu_info() -> TpuInfo:
    """The default device's TPU, per TensorCore."""
    device = default_device()
    chip = chip_version_from_device_kind(device.device_kind)
    if chip is None:
        raise ValueError(f"Unsupported TPU device kind: {device.device_kind}")
    return _info(chip, int(getattr(device, "num_cores", 1) or 1))


def get_tpu_info_for_chip(chip_version: ChipVersion,
                          num_tensor_cores_per_logical_device: int) -> TpuInfo:
    """Chip ``chip_version`` with that many TensorCores per logical device (2 only for a
    megacore chip, v4 or v5p, used as one device)."""
    if not chip_version.supports_megacore and num_tensor_cores_per_logical_device != 1:
        raise ValueError("Lite chips and dual-core chips that do not support Megacore must "
                         "have num_tensor_cores_per_logical_device=1, but got "
                         f"{num_tensor_cores_per_logical_device}.")
    return _info(chip_version, num_tensor_cores_per_logical_device)


class Tiling(enum.Enum):
    """A memory tiling: COMPACT (8, 128) tiles, or SPARSE_CORE (8,) ones."""

    COMPACT = enum.auto()
    SPARSE_CORE = enum.auto()

    @property
    def shape(self) -> tuple:
        return (8, 128) if self is Tiling.COMPACT else (8,)

