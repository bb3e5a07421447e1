"""Dot algorithms: ``DotAlgorithm`` and ``DotAlgorithmPreset``, a contraction's ``precision=``
given as the types its operands are rounded to and its accumulator (StableHLO's
``dot_algorithm`` attribute), and how ``dot_general`` lowers one.

XLA's CPU compiler ignores the attribute, so, as JAX does, the lowering converts the operands
and the accumulator to the algorithm's types itself, and refuses on CPU the presets whose
arithmetic it would not honour.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from plax.core import dtypes
from plax.lowering.stablehlo import element_type

__all__ = ["DotAlgorithm", "DotAlgorithmPreset"]

# Types by name: bfloat16 and the float8s are ml_dtypes', imported when first needed.
_F16, _F32, _F64, _BF16 = "float16", "float32", "float64", "bfloat16"
_FP8 = ("float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
        "float8_e5m2fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu")


def _dtypes_named(names):
    return None if names is None else tuple(dtypes.np_dtype(n) for n in names)


class DotAlgorithm(NamedTuple):
    """How a dot product is computed: the types its operands are rounded to
    (``lhs_precision_type``, ``rhs_precision_type``), the accumulator's type, how many
    components each operand is split into and how many products are summed
    (``num_primitive_operations``, for algorithms emulating a wider type), and whether a
    lower-precision accumulation is allowed for some steps. Pass it as ``precision=``; the
    result's dtype is then the accumulation type unless ``preferred_element_type`` says
    otherwise. Support is per platform (XLA CPU honours only some presets)."""
    lhs_precision_type: object
    rhs_precision_type: object
    accumulation_type: object
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """Named dot algorithms, ``LHS_RHS_ACCUMULATOR`` (``_X3``/``_X6``/``_X9``: that many
    products emulate a wider type; ``ANY_F8``: any float8 operands; ``FAST_ACCUM``: a faster,
    less accurate accumulation). ``precision=`` takes a member or its name."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"DotAlgorithmPreset.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def supported_lhs_types(self):
        """The operand types the algorithm computes in (None: any); an operand of another
        type is converted to the first."""
        return _dtypes_named(_OPERAND_TYPES.get(self.name, (_F32,)))

    @property
    def supported_rhs_types(self):
        return self.supported_lhs_types

    @property
    def accumulation_type(self):
        """The accumulator's type (None: the result type decides)."""
        acc = _ACCUMULATOR.get(self.name, _F32)
        return None if acc is None else dtypes.np_dtype(acc)

    def supported_output_types(self, lhs_dtype, rhs_dtype):
        """The result types the algorithm can produce for these operand types (None: any)."""
        name = self.name
        if name.startswith("ANY_F8_ANY_F8_F32"):
            return _dtypes_named((_F32, _F16, _BF16) + _FP8)
        narrow = {"F16_F16_F32": _F16, "BF16_BF16_F32": _BF16}.get(name)
        if narrow is not None:
            both = dtypes.result_type(dtypes.np_dtype(lhs_dtype), dtypes.np_dtype(rhs_dtype))
            return _dtypes_named((_F32, narrow) if both.name == narrow else (_F32,))
        acc = self.accumulation_type
        return None if acc is None else (acc,)


_OPERAND_TYPES = {
    "DEFAULT": None, "ANY_F8_ANY_F8_F32": None, "ANY_F8_ANY_F8_F32_FAST_ACCUM": None,
    "ANY_F8_ANY_F8_ANY": None, "ANY_F8_ANY_F8_ANY_FAST_ACCUM": None,
    "F16_F16_F16": (_F16,), "F16_F16_F32": (_F16,),
    # bf16 algorithms take f32 storage too (rounding as they go).
    "BF16_BF16_BF16": (_BF16, _F32), "BF16_BF16_F32": (_BF16, _F32),
    "F64_F64_F64": (_F64,),
}
_ACCUMULATOR = {"DEFAULT": None, "ANY_F8_ANY_F8_ANY": None, "ANY_F8_ANY_F8_ANY_FAST_ACCUM": None,
                "F16_F16_F16": _F16, "BF16_BF16_BF16": _BF16, "F64_F64_F64": _F64}

# (lhs type, rhs type, accumulator, products) of the attribute each preset lowers to; "in"
# stands for the operand's own (float8) type.
_ATTRIBUTES = {
    "ANY_F8_ANY_F8_F32": ("in", "in", "f32", 1),
    "ANY_F8_ANY_F8_F32_FAST_ACCUM": ("in", "in", "f32", 1),
    "ANY_F8_ANY_F8_ANY": ("in", "in", "f32", 1),
    "ANY_F8_ANY_F8_ANY_FAST_ACCUM": ("in", "in", "f32", 1),
    "F16_F16_F16": ("f16", "f16", "f16", 1), "F16_F16_F32": ("f16", "f16", "f32", 1),
    "BF16_BF16_BF16": ("bf16", "bf16", "bf16", 1), "BF16_BF16_F32": ("bf16", "bf16", "f32", 1),
    "BF16_BF16_F32_X3": ("bf16", "bf16", "f32", 3), "BF16_BF16_F32_X6": ("bf16", "bf16", "f32", 6),
    "BF16_BF16_F32_X9": ("bf16", "bf16", "f32", 9), "TF32_TF32_F32": ("tf32", "tf32", "f32", 1),
    "TF32_TF32_F32_X3": ("tf32", "tf32", "f32", 3), "F32_F32_F32": ("f32", "f32", "f32", 1),
    "F64_F64_F64": ("f64", "f64", "f64", 1),
}

# What XLA's CPU compiler computes as asked (it ignores the attribute, so only presets whose
# arithmetic the conversions around the dot reproduce are accepted there).
_CPU_PRESETS = frozenset({"DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64",
                          "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"})


def is_algorithm(precision) -> bool:
    return isinstance(precision, (DotAlgorithm, DotAlgorithmPreset))


def preset_named(name: str):
    """The preset called ``name`` (as ``precision="BF16_BF16_F32"``), or None."""
    return DotAlgorithmPreset.__members__.get(name)


def _pick(dtype, allowed):
    if allowed is None or np.dtype(dtype) in allowed:
        return np.dtype(dtype)
    return allowed[0]


def compute_types(algorithm, lhs_dtype, rhs_dtype, out_dtype):
    """(lhs, rhs, accumulator) dtypes the contraction runs in under ``algorithm``."""
    if isinstance(algorithm, DotAlgorithm):
        return tuple(dtypes.canonicalize_user_dtype(t, "DotAlgorithm") for t in (
            algorithm.lhs_precision_type, algorithm.rhs_precision_type,
            algorithm.accumulation_type))
    lhs = _pick(lhs_dtype, algorithm.supported_lhs_types)
    rhs = _pick(rhs_dtype, algorithm.supported_rhs_types)
    return lhs, rhs, _pick(out_dtype, algorithm.supported_output_types(lhs, rhs))


def check_platform(algorithm, platform: str) -> None:
    if platform == "cpu" and not (isinstance(algorithm, DotAlgorithmPreset)
                                  and algorithm.name in _CPU_PRESETS):
        raise ValueError(f"The precision '{algorithm}' is not supported by dot_general on CPU "
                         f"(XLA CPU honours only the presets {sorted(_CPU_PRESETS)}).")


def attribute(algorithm, lhs_type: str, rhs_type: str) -> str:
    """The ``algorithm = #stablehlo.dot_algorithm<...>`` property ('' for DEFAULT).
    ``lhs_type``/``rhs_type`` are the operands' MLIR element types."""
    if algorithm is DotAlgorithmPreset.DEFAULT:
        return ""
    if isinstance(algorithm, DotAlgorithm):
        lt, rt, acc = (element_type(dtypes.canonicalize_user_dtype(t, "DotAlgorithm")) for t in (
            algorithm.lhs_precision_type, algorithm.rhs_precision_type,
            algorithm.accumulation_type))
        counts = (algorithm.lhs_component_count, algorithm.rhs_component_count,
                  algorithm.num_primitive_operations)
        imprecise = algorithm.allow_imprecise_accumulation
    else:
        lt, rt, acc, ops = _ATTRIBUTES[algorithm.name]
        if lt == "in":
            lt, rt = lhs_type, rhs_type
        counts, imprecise = (1, 1, ops), algorithm.name.endswith("FAST_ACCUM")
    return (f"algorithm = #stablehlo.dot_algorithm<lhs_precision_type = {lt}, "
            f"rhs_precision_type = {rt}, accumulation_type = {acc}, "
            f"lhs_component_count = {counts[0]}, rhs_component_count = {counts[1]}, "
            f"num_primitive_operations = {counts[2]}, "
            f"allow_imprecise_accumulation = {'true' if imprecise else 'false'}>")
