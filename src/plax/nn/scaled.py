"""Block-scaled matrix products (the microscaling formats mxfp8 and nvfp4), as in
``jax.nn``: ``scaled_matmul`` (operands already quantized, with their scales),
``scaled_dot_general`` (a ``dot_general`` whose operands are quantized on the way in, with
a straight-through gradient) and ``get_scaled_dot_general_config``.

A block is ``block_size`` consecutive entries along the contracting dimension; it is
stored in a narrow type (``data_type``) with one shared scale (``scale_type``). mxfp8:
float8_e4m3fn values, float8_e8m0fnu (power-of-two) scales, blocks of 32; nvfp4:
float4_e2m1fn values, float8_e4m3fn scales, blocks of 16, and a float32 global scale.

The product is ``lax.scaled_dot`` (dequantize, then one float32 contraction), which every
backend runs. (JAX 0.10.2 lowers its ``scaled_matmul`` on CUDA and ROCm only; on ROCm,
to ``lax.scaled_dot`` as here.)
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.core import dtypes
from plax.custom_derivatives import custom_vjp

__all__ = ["BlockScaleConfig", "scaled_matmul", "scaled_dot_general",
           "get_scaled_dot_general_config"]

_F32 = np.dtype(np.float32)


@dataclass(slots=True)
class BlockScaleConfig:
    """How one operand is quantized: ``mode`` ('mxfp8' or 'nvfp4'), ``block_size``,
    ``data_type`` (the values' type), ``scale_type`` (the scales'), ``global_scale`` (nvfp4's
    float32 array of shape (1,), else None) and ``infer_only``."""
    mode: str
    block_size: int
    data_type: Any
    scale_type: Any
    global_scale: Any
    infer_only: bool


def get_scaled_dot_general_config(mode, global_scale=None):
    """The ``BlockScaleConfig`` of ``mode``: 'mxfp8' (float8_e4m3fn values, float8_e8m0fnu
    scales, blocks of 32) or 'nvfp4' (float4_e2m1fn values, float8_e4m3fn scales, blocks of
    16, ``global_scale`` a float32 array of shape (1,), ones by default)."""
    if mode == "nvfp4":
        return BlockScaleConfig(
            mode="nvfp4", block_size=16, data_type=np.dtype(dtypes.float4_e2m1fn),
            scale_type=np.dtype(dtypes.float8_e4m3fn),
            global_scale=jnp.ones((1,), _F32) if global_scale is None else global_scale,
            infer_only=False)
    if mode == "mxfp8":
        return BlockScaleConfig(
            mode="mxfp8", block_size=32, data_type=np.dtype(dtypes.float8_e4m3fn),
            scale_type=np.dtype(dtypes.float8_e8m0fnu), global_scale=None, infer_only=False)
    raise ValueError(f"Unsupported mode: {mode} (get_scaled_dot_general_config knows 'mxfp8' "
                     "and 'nvfp4').")


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """The batched product ``(B, M, K) x (B, N, K) -> (B, M, N)`` of block-scaled operands:
    each operand's entries times its scale (shape ``(B, M, K // block)``), repeated over its
    block, contracted over ``K`` in float32; the result in ``preferred_element_type``."""
    operands = [jnp.asarray(x) for x in (lhs, rhs, lhs_scales, rhs_scales)]
    a, b, a_scales, b_scales = operands
    if not all(x.ndim == 3 for x in operands):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays, got "
                         f"shapes {[x.shape for x in operands]} (lhs (B, M, K), rhs (B, N, K), "
                         "scales (B, M, K // block) and (B, N, K // block)).")
    (Ba, M, Ka), (Bb, N, Kb) = a.shape, b.shape
    if Ka != Kb or Ba != Bb:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) "
                         f"and contract (K) dimensions, but got shapes {a.shape} and {b.shape}")
    if a_scales.shape[2] != b_scales.shape[2] or a_scales.shape[0] != b_scales.shape[0]:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and "
                         f"contract (K) dimensions, but got shapes {a_scales.shape} and "
                         f"{b_scales.shape}")
    if a_scales.shape[1] != M or b_scales.shape[1] != N:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions of "
                         f"inputs, but got shapes a: {a.shape}, b: {b.shape}, a_scales: "
                         f"{a_scales.shape}, b_scales: {b_scales.shape}")
    out_type = dtypes.canonicalize_user_dtype(preferred_element_type, "scaled_matmul")
    return lax.scaled_dot(a, b, lhs_scale=a_scales, rhs_scale=b_scales,
                          dimension_numbers=(((2,), (2,)), ((0,), (0,))),
                          preferred_element_type=out_type)


# --- quantizing --------------------------------------------------------------------------
def _as_bmk(x, contracting, batch):
    """``x`` transposed to (batch, free, contracting) dims and flattened to (B, M, K)."""
    free = [d for d in range(x.ndim) if d not in contracting and d not in batch]
    order = [d for d in range(x.ndim) if d in batch] + free + \
        [d for d in range(x.ndim) if d in contracting]
    size = lambda dims: int(np.prod([x.shape[d] for d in dims], dtype=np.int64))  # noqa: E731
    return jnp.reshape(jnp.transpose(x, order), (size(batch), size(free), size(contracting)))


def _dot_shape(lhs_shape, rhs_shape, lhs_dims, rhs_dims):
    """dot_general's result shape: batch dims, lhs's free dims, rhs's free dims."""
    (lc, lb), (rc, rb) = lhs_dims, rhs_dims
    return (tuple(s for i, s in enumerate(lhs_shape) if i in lb)
            + tuple(s for i, s in enumerate(lhs_shape) if i not in lc and i not in lb)
            + tuple(s for i, s in enumerate(rhs_shape) if i not in rc and i not in rb))


def _power_of_two_scale_bits(s):
    """The float8_e8m0fnu byte of the power of two at or above the float32 ``s`` (>= 0):
    its float32 exponent, plus one when a mantissa is left, except at the top exponent
    (254, below e8m0's NaN) and for subnormals at most half the smallest normal (which
    keep exponent 0, i.e. 2**-127)."""
    bits = lax.bitcast_convert_type(s.astype(_F32), np.uint32)
    exponent = lax.shift_right_logical(bits, np.uint32(23))
    mantissa = bits & np.uint32(0x7FFFFF)
    round_up = (mantissa > 0) & (exponent != 0xFE) & ~((exponent == 0) & (mantissa <= 0x400000))
    return jnp.where(round_up, exponent + np.uint32(1), exponent).astype(np.uint8)


def _e8m0_bits_value(byte, dtype):
    """The power of two a float8_e8m0fnu byte stands for, in ``dtype``; the byte 0 (2**-127)
    is read as 2**-15 in float16 (its smallest normal) so that dividing by it stays finite."""
    value = lax.bitcast_convert_type(lax.shift_left(byte.astype(np.uint32), np.uint32(23)),
                                     _F32)
    tiny = 2.0 ** -15 if np.dtype(dtype) == np.float16 else 2.0 ** -127
    return jnp.where(value == 0, jnp.asarray(tiny, _F32), value).astype(dtype)


def _quantize(x, config: BlockScaleConfig):
    """``(values, scales)``: ``x`` (B, M, K) quantized in blocks along K as ``config`` says."""
    B, M, K = x.shape
    block = config.block_size
    if K < block or K % block:
        raise ValueError(f"scaled_dot_general: the contracting size {K} must be a multiple of "
                         f"the {config.mode} block size {block} (operand of shape {x.shape} "
                         "after moving batch and contracting dimensions together; reverse mode "
                         "also contracts the cotangent over the other operand's free "
                         "dimensions, whose product must then be such a multiple too).")
    x = jnp.reshape(x, (B, M, K // block, block))
    top = np.asarray(dtypes.finfo(config.data_type).max).astype(x.dtype)
    amax_ratio = lambda v: jnp.max(jnp.abs(v), axis=-1, keepdims=True) / top  # noqa: E731
    if config.mode == "mxfp8":
        if config.global_scale is not None or \
                np.dtype(config.scale_type) != np.dtype(dtypes.float8_e8m0fnu):
            raise ValueError("scaled_dot_general: an mxfp8 config has float8_e8m0fnu scales "
                             "and no global_scale; build it with "
                             "get_scaled_dot_general_config('mxfp8').")
        scale_bits = _power_of_two_scale_bits(amax_ratio(x))
        scaled = x / _e8m0_bits_value(scale_bits, x.dtype)
        scales = lax.bitcast_convert_type(scale_bits, config.scale_type)
    elif config.mode == "nvfp4":
        if np.dtype(config.scale_type) != np.dtype(dtypes.float8_e4m3fn) or \
                jnp.asarray(config.global_scale).dtype != _F32:
            raise ValueError("scaled_dot_general: an nvfp4 config has float8_e4m3fn scales "
                             "and a float32 global_scale; build it with "
                             "get_scaled_dot_general_config('nvfp4', global_scale).")
        scale_top = np.asarray(dtypes.finfo(config.scale_type).max).astype(x.dtype)
        x = x / config.global_scale
        scales = lax.optimization_barrier(
            jnp.clip(amax_ratio(x), 0, scale_top).astype(config.scale_type))
        scaled = x / scales.astype(_F32)
    else:
        raise ValueError(f"Unrecognized mode: {config.mode}.")
    values = jnp.clip(scaled, -top, top).astype(config.data_type)
    return jnp.reshape(values, (B, M, K)), jnp.reshape(scales, (B, M, K // block))


def _scaled_bmk_product(x3, y3, x_config, y_config, out_type):
    xq, xs = _quantize(x3, x_config)
    yq, ys = _quantize(y3, y_config)
    return scaled_matmul(xq, yq, xs, ys, preferred_element_type=out_type)


def _forward(lhs, rhs, dimension_numbers, preferred_element_type, configs):
    (lc, rc), (lb, rb) = dimension_numbers
    out_type = dtypes.canonicalize_user_dtype(preferred_element_type, "scaled_dot_general")
    nvfp4 = configs[0].mode == "nvfp4"
    out = _scaled_bmk_product(_as_bmk(lhs, lc, lb), _as_bmk(rhs, rc, rb), configs[0],
                              configs[1], _F32 if nvfp4 else out_type)
    if nvfp4:
        out = (out * (configs[0].global_scale * configs[1].global_scale)).astype(out_type)
    return jnp.reshape(out, _dot_shape(lhs.shape, rhs.shape, (lc, lb), (rc, rb)))


def _operand_cotangent(g, x, y, dimension_numbers, out_type, configs, y_first_in_g):
    """The cotangent of ``x`` in ``g = x . y`` (``y_first_in_g``: g lists y's free dims
    before x's, as when x is the rhs): g contracted with y over y's free dims, quantized
    as ``configs`` (g's, y's) say, except for nvfp4, whose backward pass is unquantized."""
    (xc, yc), (xb, yb) = dimension_numbers
    x_free = [d for d in range(x.ndim) if d not in xc and d not in xb]
    y_free = [d for d in range(y.ndim) if d not in yc and d not in yb]
    nb = len(xb)
    if y_first_in_g:
        g_y = list(range(nb, nb + len(y_free)))
    else:
        g_y = list(range(nb + len(x_free), nb + len(x_free) + len(y_free)))
    g3 = _as_bmk(g, g_y, list(range(nb)))       # (B, x free, y free)
    y3 = _as_bmk(y, y_free, yb)                  # (B, y contracting, y free)
    if configs[0].mode == "nvfp4":
        out = jnp.matmul(g3, jnp.swapaxes(y3, 1, 2), preferred_element_type=out_type)
    else:
        out = _scaled_bmk_product(g3, y3, configs[0], configs[1], out_type)
    shape = ((tuple(g.shape[d] for d in range(nb)))
             + tuple(g.shape[d] for d in range(g.ndim) if d >= nb and d not in g_y)
             + tuple(y.shape[d] for d in range(y.ndim) if d not in y_free and d not in yb))
    out = jnp.reshape(out, shape)
    # Back to x's order: batch dims, free dims, then contracting dims (in y's order).
    xc_by_y = [xc[i] for i in np.argsort(yc)]
    return lax.transpose(out, tuple(np.argsort(list(xb) + x_free + xc_by_y)))


def _scaled_dot_fwd(lhs, rhs, dimension_numbers, preferred_element_type, configs):
    return _forward(lhs, rhs, dimension_numbers, preferred_element_type, configs), (lhs, rhs)


def _scaled_dot_bwd(dimension_numbers, preferred_element_type, configs, residuals, g):
    lhs, rhs = residuals
    out_type = dtypes.canonicalize_user_dtype(preferred_element_type, "scaled_dot_general")
    (lc, rc), (lb, rb) = dimension_numbers
    grad_lhs = _operand_cotangent(g, lhs, rhs, dimension_numbers, out_type,
                                  [configs[2], configs[1]], y_first_in_g=False)
    grad_rhs = _operand_cotangent(g, rhs, lhs, ((rc, lc), (rb, lb)), out_type,
                                  [configs[2], configs[0]], y_first_in_g=True)
    if configs[2].mode == "nvfp4":
        # Straight-through, except where the forward pass clipped the input: no gradient.
        top = np.asarray(dtypes.finfo(configs[0].data_type).max).astype(lhs.dtype)
        scale_top = np.asarray(dtypes.finfo(configs[0].scale_type).max).astype(lhs.dtype)
        grad_lhs = jnp.where(jnp.abs(lhs) <= configs[0].global_scale * top * scale_top,
                             grad_lhs, 0)
        grad_rhs = jnp.where(jnp.abs(rhs) <= configs[1].global_scale * top * scale_top,
                             grad_rhs, 0)
    return grad_lhs, grad_rhs


_scaled_dot = custom_vjp(_forward, nondiff_argnums=(2, 3, 4))
_scaled_dot.defvjp(_scaled_dot_fwd, _scaled_dot_bwd)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """``lax.dot_general`` with both operands quantized to a block-scaled format on the way
    in (``configs``: the lhs's, the rhs's and the gradient's ``BlockScaleConfig``, from
    ``get_scaled_dot_general_config``); without ``configs``, plain ``lax.dot_general``.

    Quantization runs along the contracting dimensions (their product must be a multiple
    of the block size). Reverse mode quantizes the cotangent with ``configs[2]`` and is
    straight-through for the inputs (nvfp4: unquantized, zero where the input was clipped).
    ``implementation`` is ignored (deprecated, as in JAX).
    """
    if implementation is not None:
        warnings.warn("scaled_dot_general: the implementation= backend selector is "
                      "deprecated and now ignored; the backend is chosen automatically.",
                      DeprecationWarning, stacklevel=2)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    if np.dtype(preferred_element_type) not in (np.dtype(np.float32),
                                                np.dtype(dtypes.bfloat16),
                                                np.dtype(np.float16)):
        raise TypeError("Only support preferred_element_type in (f32, bf16, f16), but got "
                        f"{np.dtype(preferred_element_type)}")
    if len(configs) != 3:
        raise ValueError("scaled_dot_general: configs lists three BlockScaleConfigs (lhs, "
                         f"rhs, gradient), got {len(configs)}.")
    lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    squeeze = not dn[1][0] and not dn[1][1]
    if squeeze:  # no batch dimension: a trailing one of size 1 on each side
        lhs, rhs = lhs[..., None], rhs[..., None]
        dn = (dn[0], ((lhs.ndim - 1,), (rhs.ndim - 1,)))
    out = _scaled_dot(lhs, rhs, dn, np.dtype(preferred_element_type), tuple(configs))
    return out[0] if squeeze else out
