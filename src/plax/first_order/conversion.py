"""Conversions between dtypes (convert_element_type, bitcast_convert_type), and
stop_gradient, the identity whose derivative is zero."""
from __future__ import annotations

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, jvp_rules, param_printers,
                             register_lowering, tangent_aval, transpose_rules)
from plax.core.trace import get_aval
from plax.first_order.ad_util import defzero
from plax.first_order.batch_util import moveaxis, vectorized
from plax.first_order.common import real_dtype

__all__ = ["convert_element_type", "bitcast_convert_type", "stop_gradient"]


# --- convert_element_type ---------------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")


def _convert_abstract(x, *, new_dtype, weak_type, sharding=None):
    if (dtypes.is_extended(x.dtype) or dtypes.is_extended(new_dtype)) and x.dtype != new_dtype:
        return ShapedArray(_extended_conversion_shape(x, new_dtype), new_dtype, False)
    return ShapedArray(x.shape, new_dtype, weak_type)


def _extended_conversion_shape(x, new_dtype) -> tuple:
    """The shape of ``x`` converted to or from an extended dtype whose ``_rules`` allow it
    (to: trailing dimensions of the physical element dropped; from: added), or the error."""
    edt, other = (new_dtype, x.dtype) if dtypes.is_extended(new_dtype) else (x.dtype, new_dtype)
    if dtypes.is_extended(other):
        raise ValueError(f"cannot directly convert between extended dtypes: from {x.dtype} to "
                         f"{new_dtype}. Convert to and from their representation dtypes "
                         "instead.")
    rules = getattr(edt, "_rules", None)
    if rules is None:
        raise TypeError(f"convert_element_type cannot convert {x.dtype} to {new_dtype}: PRNG keys "
                        "are not numbers. Use jax.random.key_data(keys) for their uint32 data and "
                        "jax.random.wrap_key_data(data) for keys from data.")
    ask = getattr(rules, "convert_to" if edt is new_dtype else "convert_from", None)
    allowed = ask(other, edt) if edt is new_dtype and ask else ask(edt, other) if ask else \
        getattr(rules, "allow_conversion", False)
    if not allowed:
        raise ValueError(f"Cannot convert_element_type from {x.dtype} to {new_dtype}: the "
                         f"rules of {edt} do not allow it.")
    if other != edt.physical_dtype:
        way = "to extended dtype from" if edt is new_dtype else "from extended dtype to"
        raise ValueError(f"Cannot convert_element_type from {x.dtype} to {new_dtype}: one can "
                         f"only convert {way} its representation dtype, which for {edt} is "
                         f"{edt.physical_dtype}.")
    element = edt.physical_shape
    if edt is x.dtype:
        return x.shape + element
    n = len(x.shape) - len(element)
    if n < 0 or x.shape[n:] != element:
        raise ValueError(f"Cannot convert_element_type from {x.str_short()} to {new_dtype}: one "
                         "can only convert to an extended dtype from an array whose trailing "
                         f"dimensions are its element shape {element}.")
    return x.shape[:n]


def _convert_lowering(ctx, x, *, new_dtype, weak_type, sharding=None):
    return lower_conversion(ctx, x, ctx.avals_in[0], ctx.avals_out[0])


def lower_conversion(ctx, x, ain, aout):
    """``x`` of type ``ain`` converted to ``aout``'s dtype in the lowering, by NumPy's rules
    (complex to real keeps the real part; to bool is ``!= 0``)."""
    if dtypes.is_complex(ain.dtype) and not dtypes.is_complex(aout.dtype):
        real_aval = ain.update(dtype=real_dtype(ain.dtype))
        x = ctx.op1("stablehlo.real", [x], [ain], real_aval)
        ain = real_aval
    if aout.dtype == np.bool_ and ain.dtype != np.bool_:
        zero = ctx.broadcast(ctx.constant(0, ShapedArray((), ain.dtype)), ShapedArray((), ain.dtype), ain)
        return ctx.compare("NE", x, zero, ain)
    if ain.dtype == aout.dtype or dtypes.is_extended(ain.dtype) or \
            dtypes.is_extended(aout.dtype):  # (an extended dtype's representation: no change)
        return x
    if dtypes.is_complex(aout.dtype) and not dtypes.is_complex(ain.dtype) and \
            ctx.platform == "tpu" and aout.dtype == np.complex128:
        # (libtpu stops the whole process on any real -> c128 conversion, JAX's too.)
        raise NotImplementedError(
            f"convert_element_type from {ain.dtype.name} to complex128 is not supported on TPU: "
            "the TPU compiler cannot make complex128 values from real ones. Use complex64, or "
            "run this part on the CPU (plax.default_device(plax.devices('cpu')[0])).")
    if dtypes.is_complex(aout.dtype) and not dtypes.is_complex(ain.dtype) and \
            ain.dtype != real_dtype(aout.dtype):
        # To complex through its real type (s32 -> f32 -> c64): the two steps give the same
        # value everywhere, and libtpu has no direct conversions of that kind.
        real_aval = ain.update(dtype=real_dtype(aout.dtype))
        x, ain = ctx.op1("stablehlo.convert", [x], [ain], real_aval), real_aval
    return ctx.op1("stablehlo.convert", [x], [ain], aout)


def _convert_jvp(primals, tangents, *, new_dtype, weak_type, sharding=None):
    (x,), (t,) = primals, tangents
    ans = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type, sharding=sharding)
    out_t = tangent_aval(get_aval(ans))
    if type(t) is Zero or out_t.dtype == dtypes.float0 or \
            tangent_aval(get_aval(x)).dtype == dtypes.float0:
        return ans, Zero(out_t)
    # (Tangents convert between the tangent dtypes: an extended dtype's may be its own.)
    return ans, convert_element_type_p.bind(t, new_dtype=out_t.dtype, weak_type=weak_type,
                                            sharding=sharding)


def _convert_transpose(ct, x, *, new_dtype, weak_type, sharding=None):
    return [convert_element_type_p.bind(ct, new_dtype=tangent_aval(x.aval).dtype,
                                        weak_type=x.aval.weak_type, sharding=None)]


abstract_eval_rules[convert_element_type_p] = _convert_abstract
register_lowering(convert_element_type_p, _convert_lowering)
param_printers[convert_element_type_p] = lambda p: {
    k: v for k, v in sorted(p.items()) if not (k == "sharding" and v is None)}
jvp_rules[convert_element_type_p] = _convert_jvp
transpose_rules[convert_element_type_p] = _convert_transpose
vectorized(convert_element_type_p)


def convert_element_type(operand, new_dtype):
    """Cast ``operand`` elementwise to ``new_dtype`` (as numpy's astype)."""
    new_dtype = dtypes.canonicalize_user_dtype(new_dtype, "new_dtype")
    aval = get_aval(operand)
    if new_dtype == dtypes.float0:  # no data to convert: a host array of float0s, as in JAX
        return np.zeros(aval.shape, dtypes.float0)
    host = (np.ndarray, np.generic, int, float, complex)
    if aval.dtype == new_dtype and not aval.weak_type and not isinstance(operand, host):
        return operand  # an Array or tracer that already has the dtype; host values become Arrays
    return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=False, sharding=None)


def convert_with_weak_type(operand, new_dtype, weak_type: bool):
    """Internal: a conversion that can keep the weak type (used by plax.numpy promotion)."""
    return convert_element_type_p.bind(operand, new_dtype=np.dtype(new_dtype), weak_type=weak_type,
                                       sharding=None)


# --- bitcast_convert_type ---------------------------------------------------------------
bitcast_convert_type_p = Primitive("bitcast_convert_type")


def _bitcast_abstract(x, *, new_dtype):
    if dtypes.is_extended(x.dtype) or dtypes.is_extended(new_dtype):
        raise TypeError(f"bitcast_convert_type does not accept dtype "
                        f"{x.dtype if dtypes.is_extended(x.dtype) else new_dtype}: use "
                        "jax.random.key_data(keys) for the uint32 data of PRNG keys.")
    old_bits, new_bits = dtypes.itemsize_bits(x.dtype), dtypes.itemsize_bits(new_dtype)
    special = [d for d in (x.dtype, new_dtype) if d == np.bool_ or dtypes.is_complex(d)]
    if special and x.dtype != new_dtype:
        raise TypeError(f"bitcast_convert_type does not convert to or from {special[0].name} "
                        f"(got {x.dtype.name} to {new_dtype.name}); bool and complex values can "
                        "only be bitcast to their own dtype.")
    if old_bits == new_bits:
        return ShapedArray(x.shape, new_dtype)
    if old_bits > new_bits:
        if old_bits % new_bits:
            raise ValueError(f"bitcast_convert_type cannot split {x.dtype.name} into {new_dtype.name}.")
        return ShapedArray(x.shape + (old_bits // new_bits,), new_dtype)
    ratio = new_bits // old_bits
    if not x.shape or x.shape[-1] != ratio:
        raise ValueError(f"bitcast_convert_type from {x.dtype.name} to {new_dtype.name} needs a "
                        f"last dimension of size {ratio}, got shape {x.shape}.")
    return ShapedArray(x.shape[:-1], new_dtype)


def _bitcast_batch(axis, vals, dims, *, new_dtype):
    (x,), (d,) = vals, dims
    aval = get_aval(x)
    if dtypes.itemsize_bits(new_dtype) > dtypes.itemsize_bits(aval.dtype) and d == aval.ndim - 1:
        x, d = moveaxis(x, d, 0), 0  # the last dimension is consumed: keep the batch out of it
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


abstract_eval_rules[bitcast_convert_type_p] = _bitcast_abstract
register_lowering(bitcast_convert_type_p, lambda ctx, x, *, new_dtype: ctx.op1(
    "stablehlo.bitcast_convert", [x]))
defzero(bitcast_convert_type_p)
batch_rules[bitcast_convert_type_p] = _bitcast_batch


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of ``operand`` as ``new_dtype``."""
    new_dtype = dtypes.canonicalize_user_dtype(new_dtype, "new_dtype")
    return bitcast_convert_type_p.bind(operand, new_dtype=new_dtype)


# --- stop_gradient ----------------------------------------------------------------------
stop_gradient_p = Primitive("stop_gradient")
abstract_eval_rules[stop_gradient_p] = lambda x: x
register_lowering(stop_gradient_p, lambda ctx, x: x)
defzero(stop_gradient_p)
vectorized(stop_gradient_p)


def stop_gradient(x):
    """The identity on values, with a zero derivative (applies to every leaf of a pytree)."""
    def stop(leaf):
        if dtypes.is_inexact(get_aval(leaf).dtype):
            return stop_gradient_p.bind(leaf)
        return leaf
    return tree_util.tree_map(stop, x)
