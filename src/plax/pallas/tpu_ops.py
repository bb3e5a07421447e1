"""TPU kernel operations on values: ``roll`` (a lane/sublane rotation), ``bitcast`` (a
reinterpretation that packs or unpacks along the second-minor axis) and ``trace_value`` (a
scalar sent to the profiler's trace: ``tpu.trace_value`` on a TPU, nothing elsewhere).

Each is a primitive (so that a TPU lowering can emit ``tpu.dynamic_rotate`` / ``tpu.bitcast``)
whose every other rule computes it with lax ops (``_lax_roll``, ``packing_bitcast``)::

    roll_p.bind(x, shift, axis=a, stride=s, stride_axis=sa)
    bitcast_p.bind(x, ty=dtype)
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.effects import Effect
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, impl_rules, jvp_rules, \
    register_lowering
from plax.core.trace import get_aval
from plax.first_order import arithmetic, conversion, shapes, slicing
from plax.first_order.state import packing_bitcast
from plax.lowering.inline import lower_fun
from plax.transforms.jvp import jvp_flat
from plax.transforms.vmap import batch_flat

__all__ = ["roll_p", "bitcast_p", "trace_value_p", "delay_p", "delay", "roll", "bitcast",
           "trace_value",
           "packing_bitcast"]

roll_p = Primitive("roll")
bitcast_p = Primitive("bitcast")


def _computed_by(prim, fn) -> None:
    """Every rule of ``prim`` but abstract evaluation computes ``fn(*operands, **params)``
    (eagerly too after the abstract evaluation's checks)."""
    def impl(*args, **params):
        abstract_eval_rules[prim](*[get_aval(a) for a in args], **params)
        return fn(*args, **params)
    impl_rules[prim] = impl
    register_lowering(prim, lower_fun(fn))
    jvp_rules[prim] = lambda primals, tangents, **params: _single(jvp_flat(
        lambda *xs: [fn(*xs, **params)], list(primals), list(tangents), prim.name))
    batch_rules[prim] = lambda axis, vals, dims, **params: _single(batch_flat(
        lambda *xs: [fn(*xs, **params)], list(vals), list(dims), axis, prim.name))


def _single(pair):
    outs, extra = pair
    return outs[0], extra[0]


# --- roll ---------------------------------------------------------------------------------
def roll(x, shift, axis: int, *, stride: int | None = None, stride_axis: int | None = None):
    """``x`` rotated by ``shift`` along ``axis`` (as ``jnp.roll``); with ``stride`` and
    ``stride_axis``, slice ``i`` along ``stride_axis`` is rotated by ``shift + i * stride``."""
    ndim = len(get_aval(x).shape)
    if isinstance(shift, (int, np.integer)) and shift < 0:
        raise ValueError("shift must be non-negative.")
    if not isinstance(axis, (int, np.integer)) or axis < 0 or axis >= ndim:
        raise ValueError("axis is out of range.")
    if (stride is None) != (stride_axis is None):
        raise ValueError("stride and stride_axis must be both specified or not.")
    if stride is not None:
        if stride < 0:
            raise ValueError("stride must be non-negative.")
        if stride_axis < 0 or stride_axis >= ndim:
            raise ValueError("stride_axis is out of range")
        if axis == stride_axis:
            raise ValueError("expected axis and stride_axis are different.")
    if isinstance(shift, (int, np.integer)):
        shift = np.int32(shift)
    return roll_p.bind(x, shift, axis=int(axis), stride=stride, stride_axis=stride_axis)


def _rotate(x, shift, axis: int):
    n = get_aval(x).shape[axis]
    if n == 0:
        return x
    shift = conversion.convert_element_type(shift, np.int32)
    start = arithmetic.rem(np.int32(n) - arithmetic.rem(shift, np.int32(n)), np.int32(n))
    doubled = shapes.concatenate([x, x], axis)
    return slicing.dynamic_slice_in_dim(doubled, start, n, axis)


def _lax_roll(x, shift, *, axis, stride, stride_axis):
    if stride is None:
        return _rotate(x, shift, axis)
    shape = get_aval(x).shape
    parts = []
    for i in range(shape[stride_axis]):
        part = slicing.slice_in_dim(x, i, i + 1, axis=stride_axis)
        parts.append(_rotate(part, arithmetic.add(shift, np.int32(i * stride)), axis))
    return shapes.concatenate(parts, stride_axis)


def _roll_abstract(x, shift, **_):
    if shift.shape != () or not dtypes.issubdtype(shift.dtype, np.integer):
        raise ValueError(f"roll: shift must be an integer scalar, got {shift.str_short()}.")
    return x


abstract_eval_rules[roll_p] = _roll_abstract
_computed_by(roll_p, _lax_roll)


# --- bitcast ------------------------------------------------------------------------------
def bitcast(x, ty):
    """``x``'s bits as dtype ``ty``: elements of another width pack into (or unpack from)
    the second-minor axis, whose size scales by the ratio of the widths."""
    ty = dtypes.dtype(ty)
    aval = get_aval(x)
    if len(aval.shape) < 2:
        raise ValueError("Not implemented: bitcast 1D")
    if aval.shape[-2] * dtypes.itemsize_bits(aval.dtype) % dtypes.itemsize_bits(ty):
        raise ValueError("Not implemented: the 2nd minor dim can not be perfectly packed or "
                         "unpacked")
    return bitcast_p.bind(x, ty=ty)


def _bitcast_abstract(x, *, ty):
    shape = list(x.shape)
    shape[-2] = shape[-2] * dtypes.itemsize_bits(x.dtype) // dtypes.itemsize_bits(ty)
    return ShapedArray(tuple(shape), ty)


abstract_eval_rules[bitcast_p] = _bitcast_abstract
_computed_by(bitcast_p, packing_bitcast)
# As JAX batches it: the batched array is bitcast whole, its batch dimension kept where it
# is (one among the last two axes is packed or unpacked with them).
batch_rules[bitcast_p] = lambda axis, vals, dims, *, ty: (bitcast(vals[0], ty), dims[0])


# --- trace_value --------------------------------------------------------------------------
trace_value_p = Primitive("trace_value", multiple_results=True)


class TraceEffect(Effect):
    """Sending a value to the profiler's trace (kept however its kernel's results are used)."""


trace_effect = TraceEffect()


def trace_value(label: str, value) -> None:
    """Send ``value`` (an int32 or float32 scalar) to the xprof trace region the kernel runs
    in, under ``label``."""
    trace_value_p.bind(value, label=label)


def _trace_value_abstract(value, *, label):
    if value.shape:
        raise ValueError(f"trace_value requires a scalar value, got shape {value.shape}")
    if value.dtype not in (np.dtype(np.int32), np.dtype(np.float32)):
        raise ValueError(f"trace_value requires i32 or f32, got {value.dtype}")
    return [], {trace_effect}


trace_value_p.def_effectful_abstract_eval(_trace_value_abstract)
# (off a TPU, there is no trace to send to)
impl_rules[trace_value_p] = lambda value, *, label: []
register_lowering(trace_value_p, lambda ctx, value, *, label: [])
batch_rules[trace_value_p] = lambda axis, vals, dims, *, label: ([], [])


# --- delay --------------------------------------------------------------------------------
delay_p = Primitive("delay", multiple_results=True)


class DelayEffect(Effect):
    """A kernel's pause (kept however its kernel's results are used)."""


delay_effect = DelayEffect()


def delay(nanos) -> None:
    """Pause the kernel for ``nanos`` nanoseconds (an int32 scalar; a no-op off a TPU)."""
    delay_p.bind(nanos)


def _delay_abstract(nanos):
    if nanos.shape or not np.issubdtype(nanos.dtype, np.integer):
        raise ValueError(f"delay takes an integer scalar of nanoseconds, got "
                         f"{nanos.str_short()}")
    return [], {delay_effect}


delay_p.def_effectful_abstract_eval(_delay_abstract)
impl_rules[delay_p] = lambda nanos: []
register_lowering(delay_p, lambda ctx, nanos: [])
batch_rules[delay_p] = lambda axis, vals, dims: ([], [])
