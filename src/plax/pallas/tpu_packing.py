"""TPU element packing and rounding: ``pack_elementwise``, ``unpack_elementwise`` and
``stochastic_round``; and the reference helpers ``load``/``store`` (masked) and ``touch``.

The value operations are primitives (for a TPU lowering: ``tpu.pack_elementwise``,
``tpu.unpack_elementwise``, ``tpu.stochastic_convert``) computed with lax ops by every other
rule (``tpu_ops._computed_by``). ``touch_p`` (printed ``add_dependency``) only carries a
read and a write effect on its reference: discharged, it changes nothing.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.effects import ReadEffect, WriteEffect
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, discharge_rules
from plax.core.trace import get_aval
from plax.core.tree_core import tree_flatten
from plax.first_order import arithmetic, bitwise, comparison, conversion
from plax.first_order.state import TransformedRef, ref_get, ref_set
from plax.pallas.tpu_ops import _computed_by

__all__ = ["pack_elementwise_p", "unpack_elementwise_p", "stochastic_round_p", "touch_p",
           "pack_elementwise", "unpack_elementwise", "stochastic_round", "touch", "load",
           "store"]

pack_elementwise_p = Primitive("pack_elementwise")
unpack_elementwise_p = Primitive("unpack_elementwise")
stochastic_round_p = Primitive("stochastic_round")
touch_p = Primitive("add_dependency", multiple_results=True)


def _uint(bits: int):
    return np.dtype(f"uint{bits}")


def _factor(unpacked, packed) -> int:
    wide, narrow = dtypes.itemsize_bits(unpacked), dtypes.itemsize_bits(packed)
    if wide % narrow:
        raise ValueError(f"Unpacked bitwidth must be a multiple of packed bitwidth, got {wide} "
                         f"and {narrow}")
    return wide // narrow


# --- pack_elementwise ---------------------------------------------------------------------
def pack_elementwise(xs, *, packed_dtype):
    """``xs`` (as many arrays as ``packed_dtype`` elements fit in one of theirs) packed
    element by element into one unsigned array of their width, ``xs[0]`` in the lowest
    bits; integers are truncated, float32 rounds to bfloat16."""
    return pack_elementwise_p.bind(*xs, packed_dtype=dtypes.dtype(packed_dtype))


def _pack_abstract(*xs, packed_dtype):
    if not xs:
        raise ValueError("At least one source is required")
    first = xs[0]
    if any(x.shape != first.shape for x in xs):
        raise ValueError("All sources must have the same shape")
    if any(x.dtype != first.dtype for x in xs):
        raise ValueError("All sources must have the same dtype")
    floats = first.dtype == np.float32 and packed_dtype == dtypes.dtype("bfloat16")
    ints = dtypes.issubdtype(first.dtype, np.integer) and \
        dtypes.issubdtype(packed_dtype, np.integer)
    if not (floats or ints):
        raise ValueError(f"Only f32 -> bf16 and int -> int are supported. Got {first.dtype} "
                         f"and {packed_dtype}")
    factor = _factor(first.dtype, packed_dtype)
    if len(xs) != factor:
        raise ValueError(f"The number of sources must match the packing factor ({factor}), "
                         f"got {len(xs)}")
    return ShapedArray(first.shape, _uint(dtypes.itemsize_bits(first.dtype)))


def _lax_pack(*xs, packed_dtype):
    wide = dtypes.itemsize_bits(get_aval(xs[0]).dtype)
    narrow = dtypes.itemsize_bits(packed_dtype)
    out = None
    for i, x in enumerate(xs):
        if dtypes.issubdtype(get_aval(x).dtype, np.floating):
            x = conversion.bitcast_convert_type(
                conversion.convert_element_type(x, packed_dtype), _uint(narrow))
            x = conversion.convert_element_type(x, _uint(wide))
        else:
            x = conversion.bitcast_convert_type(x, _uint(wide))
            x = bitwise.bitwise_and(x, np.array((1 << narrow) - 1, _uint(wide)))
        x = bitwise.shift_left(x, np.array(i * narrow, _uint(wide)))
        out = x if out is None else bitwise.bitwise_or(out, x)
    return out


abstract_eval_rules[pack_elementwise_p] = _pack_abstract
_computed_by(pack_elementwise_p, _lax_pack)


# --- unpack_elementwise -------------------------------------------------------------------
def unpack_elementwise(x, *, index, packed_dtype, unpacked_dtype):
    """Element ``index`` of each word of ``x`` (packed as ``pack_elementwise`` packs them),
    widened to ``unpacked_dtype`` (integers sign-extended as ``packed_dtype`` says)."""
    return unpack_elementwise_p.bind(x, index=int(index),
                                     packed_dtype=dtypes.dtype(packed_dtype),
                                     unpacked_dtype=dtypes.dtype(unpacked_dtype))


def _unpack_abstract(x, *, index, packed_dtype, unpacked_dtype):
    if dtypes.itemsize_bits(x.dtype) != dtypes.itemsize_bits(unpacked_dtype):
        raise ValueError("The bitwidth of `x` must match the bitwidth of `unpacked_dtype` for "
                         f"unpack_elementwise, but got {x.dtype} and {unpacked_dtype}")
    factor = _factor(unpacked_dtype, packed_dtype)
    if index < 0 or index >= factor:
        raise ValueError(f"Index {index} is out of bounds for packing factor {factor}")
    return ShapedArray(x.shape, unpacked_dtype)


def _lax_unpack(x, *, index, packed_dtype, unpacked_dtype):
    wide = dtypes.itemsize_bits(unpacked_dtype)
    narrow = dtypes.itemsize_bits(packed_dtype)
    bits = conversion.bitcast_convert_type(x, _uint(wide))
    # the element moved to the top bits, then back down (arithmetically for signed ones)
    top = bitwise.shift_left(bits, np.array(wide - (index + 1) * narrow, _uint(wide)))
    if dtypes.issubdtype(packed_dtype, np.floating):
        word = bitwise.shift_right_logical(top, np.array(wide - narrow, _uint(wide)))
        element = conversion.bitcast_convert_type(
            conversion.convert_element_type(word, _uint(narrow)), packed_dtype)
        return conversion.convert_element_type(element, unpacked_dtype)
    signed = dtypes.issubdtype(packed_dtype, np.signedinteger)
    word_dtype = np.dtype(f"int{wide}") if signed else _uint(wide)
    word = conversion.bitcast_convert_type(top, word_dtype)
    shift_down = bitwise.shift_right_arithmetic if signed else bitwise.shift_right_logical
    word = shift_down(word, np.array(wide - narrow, word_dtype))
    return conversion.convert_element_type(word, unpacked_dtype)


abstract_eval_rules[unpack_elementwise_p] = _unpack_abstract
_computed_by(unpack_elementwise_p, _lax_unpack)


# --- stochastic_round ---------------------------------------------------------------------
def stochastic_round(x, random_bits, *, target_dtype):
    """float32 ``x`` rounded to ``target_dtype`` (bfloat16) up or down at random: up with
    probability the fraction of the way to the next value (``random_bits``: uint32, one
    per element)."""
    return stochastic_round_p.bind(x, random_bits, target_dtype=dtypes.dtype(target_dtype))


def _round_abstract(x, random_bits, *, target_dtype):
    if random_bits.shape != x.shape:
        raise ValueError("The shape of `random_bits` must match the shape of `x` for "
                         f"stochastic_round, but got {random_bits.shape} and {x.shape}")
    if random_bits.dtype != np.uint32:
        raise ValueError("The dtype of `random_bits` must be uint32 for stochastic_round, "
                         f"but got {random_bits.dtype}")
    if x.dtype != np.float32 or target_dtype != dtypes.dtype("bfloat16"):
        raise NotImplementedError(f"stochastic_round from {x.dtype} to {target_dtype}: plax "
                                  "rounds float32 to bfloat16 only.")
    return ShapedArray(x.shape, target_dtype)


def _lax_round(x, random_bits, *, target_dtype):
    bits = conversion.bitcast_convert_type(x, np.uint32)
    noise = bitwise.shift_right_logical(random_bits, np.uint32(16))
    summed = bitwise.bitwise_and(arithmetic.add(bits, noise), np.uint32(0xFFFF0000))
    finite = comparison.lt(bitwise.bitwise_and(bits, np.uint32(0x7F800000)),
                           np.uint32(0x7F800000))
    rounded = conversion.bitcast_convert_type(comparison.select_n(finite, bits, summed),
                                              np.float32)
    return conversion.convert_element_type(rounded, target_dtype)


abstract_eval_rules[stochastic_round_p] = _round_abstract
_computed_by(stochastic_round_p, _lax_round)


# --- references ---------------------------------------------------------------------------
def touch(ref) -> None:
    """A read and a write of each reference of ``ref`` (a pytree of references or views)
    that change nothing: an ordering dependency."""
    leaves, _ = tree_flatten(ref, is_leaf=lambda x: type(x) is TransformedRef)
    for leaf in leaves:
        touch_p.bind(leaf.ref if type(leaf) is TransformedRef else leaf)


touch_p.def_effectful_abstract_eval(lambda ref: ([], {ReadEffect(0), WriteEffect(0)}))
discharge_rules[touch_p] = lambda which, in_avals, out_avals, ref: ([None], [])
batch_rules[touch_p] = lambda axis, vals, dims: (touch_p.bind(*vals), [])


def _check_mask(mask, shape, what: str):
    aval = get_aval(mask)
    if aval.dtype != np.bool_ or tuple(aval.shape) != tuple(shape):
        raise ValueError(f"{what}: the mask must be a boolean array of the reference's shape "
                         f"{tuple(shape)}, got {aval.str_short()}.")


def load(ref, *, mask=None):
    """The value ``ref`` (a reference or view) holds; where ``mask`` is False the element is
    unspecified on the chip (interpret mode reads it anyway)."""
    value = ref_get(ref, ())
    if mask is not None:
        _check_mask(mask, get_aval(value).shape, "load")
    return value


def store(ref, val, *, mask=None) -> None:
    """Write ``val`` into ``ref``, only where ``mask`` is True when it is given."""
    if mask is not None:
        old = ref_get(ref, ())
        _check_mask(mask, get_aval(old).shape, "store")
        val = comparison.select_n(mask, old, val)
    ref_set(ref, (), val)
