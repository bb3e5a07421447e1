"""Patch extraction and locally connected convolution, built on ``conv_general_dilated``.

``conv_general_dilated_patches`` gathers, for every output location of a convolution with a
window of ``filter_shape``, the input values under the window: its output has
``C * prod(filter_shape)`` features, input channel major, window position minor. It is a
convolution with a one-hot kernel, one group per input channel.
``conv_general_dilated_local`` is a convolution whose kernel differs at each output location
(an unshared convolution): the patches contracted with the kernel of each location.
"""
from __future__ import annotations

import math

import numpy as np

from plax.core.trace import get_aval
from plax.first_order import shapes as _shapes
from plax.first_order.convolution import conv_dimension_numbers, conv_general_dilated
from plax.first_order.dot import canonicalize_precision, dot_general

__all__ = ["conv_general_dilated_local", "conv_general_dilated_patches"]


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with a window of ``filter_shape`` would see: for each output
    location, the ``C * prod(filter_shape)`` input values under the window (channel major)."""
    aval = get_aval(lhs)
    filter_shape = tuple(int(d) for d in filter_shape)
    dnums = conv_dimension_numbers(aval.shape, (1, 1) + filter_shape, dimension_numbers)
    lhs_spec, rhs_spec, _ = dnums
    window = math.prod(filter_shape)
    channels = aval.shape[lhs_spec[1]]
    # Kernel (O, I=1, *filter) in OIHW order: output feature c*window + w picks position w
    # of channel c's window.
    one_hot = np.eye(window, dtype=aval.dtype).reshape((window, 1) + filter_shape)
    kernel_oihw = np.tile(one_hot, (channels,) + (1,) * (len(filter_shape) + 1))
    kernel = np.transpose(kernel_oihw, np.argsort(rhs_spec))
    return conv_general_dilated(lhs, kernel, window_strides, padding, lhs_dilation,
                                rhs_dilation, dnums, feature_group_count=channels,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A convolution with a different kernel at every output location: ``rhs`` has, for
    each output spatial position (its spatial dimensions), an ``O x (C * prod(filter_shape))``
    kernel, contracted with that position's patch of ``lhs``."""
    pair = canonicalize_precision(precision)
    lhs_precision, rhs_precision = pair if pair is not None else (None, None)
    dnums = conv_dimension_numbers(get_aval(lhs).shape, get_aval(rhs).shape, dimension_numbers)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dnums, lhs_precision)
    _, rhs_spec, out_spec = dnums
    # Batch over the spatial positions (in the patches' order), contract the features.
    out_spatial, rhs_spatial = list(out_spec[2:]), list(rhs_spec[2:])
    order = sorted(range(len(out_spatial)), key=lambda i: out_spatial[i])
    dims = (([out_spec[1]], [rhs_spec[1]]),
            ([out_spatial[i] for i in order], [rhs_spatial[i] for i in order]))
    out = dot_general(patches, rhs, dims, precision=rhs_precision)
    # out: (*spatial in sorted order, batch, O) -> the out_spec layout.
    n = len(out_spatial)
    src = list(range(n)) + [n, n + 1]
    dst = sorted(out_spatial) + [out_spec[0], out_spec[1]]
    perm = [src[dst.index(d)] for d in range(n + 2)]
    return _shapes.transpose(out, tuple(perm))
