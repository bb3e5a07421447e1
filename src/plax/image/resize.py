"""resize and scale_and_translate: separable resampling, one weight matrix per spatial axis.

For an axis of ``m`` input pixels resampled to ``n`` outputs, output pixel ``j`` (centre
``j + 0.5``) samples the input at ``(j + 0.5 - translation) / scale - 0.5`` in input pixel
coordinates; input pixel ``i`` gets the method's kernel at ``|sample - i|`` as its weight
(the distance divided by ``1 / scale`` when downsampling with ``antialias``, which widens
the kernel into a low-pass filter). Each output's weights are normalised to sum to 1, and
an output whose sample falls outside the input gets none (it is 0). The image is then
contracted with the ``(m, n)`` weight matrix along that axis. Everything is plax.numpy and
lax, so it is jittable, batchable and differentiable in the image, the scale and the
translation.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.symbolic_shapes import DimExpr, dimension_as_value
from plax.image.methods import AREA, KERNELS, ResizeMethod, as_method
from plax.numpy.util import canonicalize_axis, check_arraylike, promote_dtypes_inexact

# Below this total weight an output has no input support: it is 0 rather than a quotient of
# rounding errors.
_TINY_TOTAL_WEIGHT = 1000.0 * float(np.finfo(np.float32).eps)


def _as_shape(shape, fn: str) -> tuple:
    try:
        return tuple(d if type(d) is DimExpr else operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{fn}: Shapes must be 1D sequences of concrete values of integer "
                        f"type, got {shape!r}: give the full output shape, batch and channel "
                        "dimensions included, as Python ints.") from None


def _check_rank(shape, image, fn):
    if len(shape) != image.ndim:
        raise ValueError(f"{fn}: shape must have length equal to the number of dimensions of "
                         f"x; {shape} vs {image.shape}. Give every dimension, repeating the "
                         "batch and channel sizes unchanged.")


def weight_matrix(in_size: int, out_size: int, scale, translation, kernel, antialias: bool,
                  edge_padding: bool, radius: int):
    """The ``(in_size, out_size)`` matrix whose column ``j`` weighs the input pixels for
    output ``j``, in the dtype of ``scale`` and ``translation``."""
    dtype = dtypes.result_type(scale, translation)
    in_value = dimension_as_value(in_size)  # (a traced value for a symbolic size)
    inv_scale = 1.0 / scale
    outputs = jnp.arange(out_size, dtype=dtype)
    sample = (outputs + 0.5) * inv_scale - translation * inv_scale - 0.5
    if kernel is AREA:
        # the overlap of output pixel j's footprint [left, left + 1/scale) with input pixel i
        left = outputs * inv_scale - translation * inv_scale
        pixels = jnp.arange(in_size, dtype=dtype)[:, None]
        weights = jnp.maximum(0.0, jnp.minimum(left[None, :] + inv_scale, pixels + 1.0)
                              - jnp.maximum(left[None, :], pixels))
    else:
        # edge padding evaluates the kernel on `radius` pixels past each edge and moves their
        # weight onto the edge pixel (PyTorch's bicubic without antialiasing)
        pad = radius if edge_padding else 0
        pixels = jnp.arange(-pad, in_size + pad, dtype=dtype)[:, None]
        distance = jnp.abs(sample[None, :] - pixels)  # (ranks explicit, as JAX's code keeps)
        if antialias:
            distance = distance / jnp.maximum(inv_scale, 1.0)
        weights = kernel(distance)
        if edge_padding:
            onto = np.clip(np.arange(-pad, in_size + pad), 0, in_size - 1)
            weights = jnp.zeros((in_size, out_size), weights.dtype).at[onto].add(weights)
    total = jnp.sum(weights, axis=0, keepdims=True)
    weights = jnp.where(jnp.abs(total) > _TINY_TOTAL_WEIGHT,
                        weights / jnp.where(total != 0, total, 1), 0)
    if not edge_padding:
        inside = (sample >= -0.5) & (sample <= in_value - 0.5)
        weights = jnp.where(inside[None, :], weights, 0)
    return weights


def _resample(image, shape, spatial_dims, scales, translations, method, antialias, precision):
    """Contract ``image`` with one weight matrix per axis in ``spatial_dims``."""
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = KERNELS[method]
    edge_padding = method is ResizeMethod.CUBIC_PYTORCH
    # a contraction puts its new axis first (when it replaces the leading axis) or last;
    # `order` tracks where each axis went, and one transpose at the end restores it
    out, order = image, list(range(image.ndim))
    for axis, scale, translation in zip(spatial_dims, scales, translations):
        weights = weight_matrix(image.shape[axis], shape[axis], scale, translation, kernel,
                                antialias, edge_padding, radius).astype(image.dtype)
        rest = [a for a in order if a != axis]
        if order[0] == axis:
            out = lax.dot_general(weights, out, (((0,), (0,)), ((), ())), precision=precision)
            order = [axis] + rest
        else:
            out = lax.dot_general(out, weights, (((order.index(axis),), (0,)), ((), ())),
                                  precision=precision)
            order = rest + [axis]
    if order != sorted(order):
        out = lax.transpose(out, tuple(order.index(a) for a in range(image.ndim)))
    return out


@jit(static_argnums=(1, 2, 3, 4, 5))
def _scale_and_translate(image, shape, spatial_dims, method, antialias, precision, scale,
                         translation):
    image, = promote_dtypes_inexact(image)
    scale, translation = promote_dtypes_inexact(scale, translation)
    count = len(spatial_dims)
    return _resample(image, shape, spatial_dims, [scale[i] for i in range(count)],
                     [translation[i] for i in range(count)], method, antialias, precision)


def scale_and_translate(image, shape: Sequence[int], spatial_dims: Sequence[int], scale,
                        translation, method, antialias: bool = True,
                        precision=lax.Precision.HIGHEST):
    """Resample ``image`` to ``shape`` under ``x -> x * scale + translation`` on the axes
    ``spatial_dims`` (pixel centres at ``i + 0.5``); outputs mapping outside the input are 0.
    ``method`` is any :class:`ResizeMethod` but NEAREST, or its name."""
    fn = "scale_and_translate"
    check_arraylike(fn, image)
    image = jnp.asarray(image)
    shape = _as_shape(shape, fn)
    _check_rank(shape, image, fn)
    method = as_method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate; use resize(..., 'nearest') or another method.")
    spatial_dims = tuple(canonicalize_axis(d, image.ndim) for d in spatial_dims)
    scale, translation = jnp.asarray(scale), jnp.asarray(translation)
    if scale.shape != (len(spatial_dims),) or translation.shape != (len(spatial_dims),):
        raise ValueError(f"{fn}: scale and translation must have shape (len(spatial_dims),) "
                         f"= ({len(spatial_dims)},), one entry per spatial dimension; got "
                         f"{scale.shape} and {translation.shape}.")
    for axis in range(image.ndim):
        if axis not in spatial_dims and shape[axis] != image.shape[axis]:
            raise ValueError(f"{fn}: dimension {axis} is not in spatial_dims, so its size "
                             f"must stay {image.shape[axis]}, got shape {shape}.")
    return _scale_and_translate(image, shape, spatial_dims, method, bool(antialias),
                                precision, scale, translation)


def _resize_nearest(image, shape):
    """Output ``j`` of an axis takes input ``floor((j + 0.5) * m / n)``, computed in float32."""
    for axis, (m, n) in enumerate(zip(image.shape, shape)):
        if m == n:
            continue
        if type(m) is DimExpr or type(n) is DimExpr:  # symbolic sizes: computed in the program
            centres = (jnp.arange(n, dtype=np.float32) + np.float32(0.5)) * _as_f32(m)
            picks = jnp.floor(centres / _as_f32(n)).astype(np.int32)
        else:
            centres = (np.arange(n, dtype=np.float32) + np.float32(0.5)) * np.float32(m)
            picks = np.floor(centres / np.float32(n)).astype(np.int32)
        image = jnp.take(image, picks, axis=axis, mode="clip")
    return image


def _as_f32(d):
    """A dimension as a float32 value (traced for a symbolic one)."""
    return lax.convert_element_type(dimension_as_value(d), np.float32)


@jit(static_argnums=(1, 2, 3, 4))
def _resize(image, shape, method, antialias, precision):
    if method is ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image, = promote_dtypes_inexact(image)
    # an axis whose size stays is left as it is: every kernel interpolates, so an identity
    # warp changes nothing
    spatial_dims = tuple(d for d in range(image.ndim) if image.shape[d] != shape[d])
    scales = [1.0 if shape[d] == 0 else _as_f32(shape[d]) / _as_f32(image.shape[d])
              if type(shape[d]) is DimExpr or type(image.shape[d]) is DimExpr
              else shape[d] / image.shape[d] for d in spatial_dims]
    return _resample(image, shape, spatial_dims, scales, [0.0] * len(spatial_dims), method,
                     antialias, precision)


def resize(image, shape: Sequence[int], method, antialias: bool = True,
           precision=lax.Precision.HIGHEST):
    """Resize ``image`` to ``shape`` (every dimension; batch and channel sizes repeated) with
    ``method``, a :class:`ResizeMethod` or its name (``"nearest"``, ``"linear"``,
    ``"cubic"``, ``"lanczos3"``, ``"lanczos5"``, ``"area"``, ...). ``antialias`` low-pass
    filters when downsampling. NEAREST keeps the dtype; the others promote to float."""
    fn = "resize"
    check_arraylike(fn, image)
    image = jnp.asarray(image)
    shape = _as_shape(shape, fn)
    _check_rank(shape, image, fn)
    if any(d < 0 for d in shape):
        raise ValueError(f"{fn}: shape must be non-negative, got {shape}.")
    return _resize(image, shape, as_method(method), bool(antialias), precision)
