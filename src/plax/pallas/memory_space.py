"""Arrays typed with the memory space a kernel should find them in
(``pltpu.with_memory_space_constraint``).

``with_memory_space_constraint_p.bind(x, memory_space=pltpu.VMEM)`` is ``x`` typed as a
``ShapedArrayWithMemorySpace`` (printed ``f32<vmem>[8,128]``): a ``pallas_call`` lowered for
TPU reads the memory space of its operands' types and asks XLA to place them there
(``input_memory_space_colors``, ``plax.pallas.mosaic_call``). Everywhere else the value is
``x``; other operations give plain arrays again. As in JAX it has no eager form and no
derivative or batching rule.
"""
from __future__ import annotations

from plax.core.avals import ShapedArray, unchecked_shaped_array
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, impl_rules, register_lowering

__all__ = ["ShapedArrayWithMemorySpace", "with_memory_space_constraint_p", "memory_space_of"]

with_memory_space_constraint_p = Primitive("with_memory_space_constraint")


class ShapedArrayWithMemorySpace(ShapedArray):
    """A ShapedArray that names the memory space the value should be placed in."""

    __slots__ = ("memory_space",)

    def __eq__(self, other):
        return (type(other) is ShapedArrayWithMemorySpace
                and self.memory_space == other.memory_space
                and self.shape == other.shape and self.dtype == other.dtype
                and self.weak_type == other.weak_type and self._sharding == other._sharding
                and self.manual_axis_type == other.manual_axis_type)

    def __hash__(self):
        return hash((self._hash, self.memory_space))

    def str_short(self, short_dtypes: bool = True) -> str:
        text = super().str_short(short_dtypes)
        at = text.index("[")
        return f"{text[:at]}<{self.memory_space}>{text[at:]}"


def with_memory_space(aval: ShapedArray, memory_space) -> ShapedArrayWithMemorySpace:
    """``aval`` naming ``memory_space``."""
    out = unchecked_shaped_array(aval.shape, aval.dtype, aval.weak_type, aval._sharding,
                                 aval.manual_axis_type)
    new = ShapedArrayWithMemorySpace.__new__(ShapedArrayWithMemorySpace)
    for name in ("shape", "dtype", "weak_type", "_sharding", "manual_axis_type", "_hash"):
        setattr(new, name, getattr(out, name))
    new.memory_space = memory_space
    return new


def memory_space_of(aval):
    """The memory space ``aval`` names (a ShapedArrayWithMemorySpace), else None."""
    return aval.memory_space if type(aval) is ShapedArrayWithMemorySpace else None


def _abstract(x, *, memory_space):
    if not isinstance(x, ShapedArray):
        raise NotImplementedError("with_memory_space_constraint only supports arrays.")
    return with_memory_space(x, memory_space)


def _impl(x, *, memory_space):
    raise ValueError("Cannot eagerly run with_memory_space_constraint.")


abstract_eval_rules[with_memory_space_constraint_p] = _abstract
impl_rules[with_memory_space_constraint_p] = _impl
register_lowering(with_memory_space_constraint_p, lambda ctx, x, *, memory_space: [x])
