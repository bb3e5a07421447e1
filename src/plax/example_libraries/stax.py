"""stax: neural networks as (init_fun, apply_fun) pairs, as ``jax.example_libraries.stax``.

A layer is a pair of functions:

* ``init_fun(rng, input_shape) -> (output_shape, params)`` draws the layer's parameters
  from a PRNG key for inputs of ``input_shape``;
* ``apply_fun(params, inputs, **kwargs) -> outputs`` runs the layer (``rng=`` among the
  keyword arguments feeds layers that need randomness, such as Dropout).

Layer constructors are CamelCase (``Dense(10)``, ``Conv(32, (3, 3))``); layers without
settings are ready-made pairs (``Relu``, ``Flatten``). ``serial``, ``parallel`` and
``shape_dependent`` combine layers into new ones.
"""
import functools
import math

import plax.numpy as jnp
from plax import lax
from plax import random
from plax.nn import (elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax,  # noqa: F401
                     softplus, standardize)
from plax.nn.initializers import glorot_normal, normal, ones, zeros  # noqa: F401

# The older spellings stax has always exported.
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


# --- layers with parameters ---------------------------------------------------------------
def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: ``inputs @ W + b`` with W of shape (in_dim, out_dim)."""
    def init_fun(rng, input_shape):
        w_key, b_key = random.split(rng)
        params = (W_init(w_key, (input_shape[-1], out_dim)), b_init(b_key, (out_dim,)))
        return tuple(input_shape[:-1]) + (out_dim,), params

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _kernel_shape(lhs_spec, rhs_spec, input_shape, out_chan, filter_shape):
    """The kernel's shape in ``rhs_spec`` order: 'O' is out_chan, 'I' the input's channels,
    the spatial letters take ``filter_shape`` in turn."""
    spatial = iter(filter_shape)
    return [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
            else next(spatial) for c in rhs_spec]


def _bias_shape(out_spec, out_chan):
    return [out_chan if c == "C" else 1 for c in out_spec]


def _default_kernel_init(rhs_spec, W_init):
    if W_init is not None:
        return W_init
    return glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
                W_init=None, b_init=normal(1e-6)):
    """A convolution layer in the layout ``dimension_numbers`` = (lhs_spec, rhs_spec,
    out_spec), e.g. ('NHWC', 'HWIO', 'NHWC'), with a bias per output channel."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    unit = (1,) * len(filter_shape)
    strides = strides or unit
    W_init = _default_kernel_init(rhs_spec, W_init)

    def init_fun(rng, input_shape):
        kernel_shape = _kernel_shape(lhs_spec, rhs_spec, input_shape, out_chan, filter_shape)
        output_shape = lax.conv_general_shape_tuple(input_shape, kernel_shape, strides, padding,
                                                    dimension_numbers)
        w_key, b_key = random.split(rng)
        params = (W_init(w_key, kernel_shape), b_init(b_key, _bias_shape(out_spec, out_chan)))
        return output_shape, params

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return lax.conv_general_dilated(inputs, W, strides, padding, unit, unit,
                                        dimension_numbers=dimension_numbers) + b
    return init_fun, apply_fun


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


def _transpose_pad_total(k, s, padding):
    """lo + hi of the padding lax.conv_transpose gives one spatial dimension."""
    if isinstance(padding, str):
        if padding == "SAME":
            return k + s - 2
        if padding == "VALID":
            return k + s - 2 + max(k - s, 0)
        raise ValueError(f"GeneralConvTranspose: padding must be 'SAME', 'VALID' or a sequence "
                         f"of (low, high) pairs, got {padding!r}.")
    lo, hi = padding
    return lo + hi


def _conv_transpose_shape(lhs_shape, rhs_shape, strides, padding, dimension_numbers):
    """The shape lax.conv_transpose returns (no dilation); a -1 batch size stays -1."""
    lhs_perm, rhs_perm, out_perm = lax.conv_general_permutations(dimension_numbers)
    lhs = [lhs_shape[d] for d in lhs_perm]
    rhs = [rhs_shape[d] for d in rhs_perm]
    n_spatial = len(lhs) - 2
    pads = [padding] * n_spatial if isinstance(padding, str) else list(padding)
    if len(pads) != n_spatial or len(strides) != n_spatial:
        raise ValueError(f"GeneralConvTranspose: {n_spatial} spatial dimensions need as many "
                         f"strides and paddings, got strides={tuple(strides)} and "
                         f"padding={padding!r}.")
    space = [(i - 1) * s - k + 2 + _transpose_pad_total(k, s, p)
             for i, k, s, p in zip(lhs[2:], rhs[2:], strides, pads)]
    in_order = [lhs[0], rhs[0], *space]  # (N, C, spatial...) of the output
    out = [0] * len(in_order)
    for size, dim in zip(in_order, out_perm):
        out[dim] = size
    return tuple(out)


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None,
                         padding="VALID", W_init=None, b_init=normal(1e-6)):
    """A transposed (fractionally strided) convolution layer in the layout
    ``dimension_numbers``, with a bias per output channel."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    unit = (1,) * len(filter_shape)
    strides = strides or unit
    W_init = _default_kernel_init(rhs_spec, W_init)

    def init_fun(rng, input_shape):
        kernel_shape = _kernel_shape(lhs_spec, rhs_spec, input_shape, out_chan, filter_shape)
        output_shape = _conv_transpose_shape(input_shape, kernel_shape, strides, padding,
                                             dimension_numbers)
        w_key, b_key = random.split(rng)
        params = (W_init(w_key, kernel_shape), b_init(b_key, _bias_shape(out_spec, out_chan)))
        return output_shape, params

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return lax.conv_transpose(inputs, W, strides, padding,
                                  dimension_numbers=dimension_numbers) + b
    return init_fun, apply_fun


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
    """Normalizes over ``axis`` (batch statistics of the inputs), then shifts by beta
    (``center``) and scales by gamma (``scale``), both shaped as the remaining axes."""
    axis = (axis,) if jnp.isscalar(axis) else axis

    def init_fun(rng, input_shape):
        kept = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        beta_key, gamma_key = random.split(rng)
        beta = beta_init(beta_key, kept) if center else ()
        gamma = gamma_init(gamma_key, kept) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        # Index that puts the reduced axes back as size-1 dimensions.
        expand = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        if center:
            z = z + beta[expand]
        return z
    return init_fun, apply_fun


# --- elementwise layers -------------------------------------------------------------------
def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying ``fun(inputs, **fun_kwargs)``; shapes pass through."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


# --- pooling ------------------------------------------------------------------------------
def _with_unit_dims(dims, positions):
    """``dims`` with a 1 inserted at each of ``positions`` (ascending)."""
    dims = tuple(dims)
    for i in sorted(positions):
        dims = dims[:i] + (1,) + dims[i:]
    return dims


def _non_spatial_axes(spec, ndim):
    """Where the batch and channel axes sit: ``spec``'s 'N' and 'C', else first and last."""
    if spec is None:
        return 0, ndim - 1
    return spec.index("N"), spec.index("C")


def _average_by_window_size(window_shape, strides, padding):
    """Divides a window sum by how many input elements (padding excluded) each window held."""
    def rescale(outputs, inputs, spec):
        non_spatial = _non_spatial_axes(spec, inputs.ndim)
        spatial_shape = tuple(d for i, d in enumerate(inputs.shape) if i not in non_spatial)
        counts = lax.reduce_window(jnp.ones(spatial_shape, dtype=inputs.dtype), 0., lax.add,
                                   window_shape, strides, padding)
        for i in sorted(non_spatial):
            counts = jnp.expand_dims(counts, i)
        return outputs / counts
    return rescale


def _pooling_layer(reducer, init_val, rescaler=None):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        """A pooling layer over the spatial axes (all but 'N' and 'C' of ``spec``; without
        a spec, the first axis is the batch and the last the channels)."""
        strides = strides or (1,) * len(window_shape)
        rescale = rescaler(window_shape, strides, padding) if rescaler else None
        non_spatial = _non_spatial_axes(spec, len(window_shape) + 2)
        full_window = _with_unit_dims(window_shape, non_spatial)
        full_strides = _with_unit_dims(strides, non_spatial)

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, full_window, full_strides, padding)
            unit = (1,) * len(full_window)
            out_shape = lax.reduce_window_shape_tuple(input_shape, full_window, full_strides,
                                                      pads, unit, unit)
            return out_shape, ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, full_window, full_strides,
                                    padding)
            return rescale(out, inputs, spec) if rescale else out
        return init_fun, apply_fun
    return PoolingLayer


MaxPool = _pooling_layer(lax.max, -jnp.inf)
SumPool = _pooling_layer(lax.add, 0.)
AvgPool = _pooling_layer(lax.add, 0., _average_by_window_size)


# --- shape plumbing -----------------------------------------------------------------------
def _flatten():
    """Flattens every dimension but the leading (batch) one."""
    def init_fun(rng, input_shape):
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.reshape(inputs, (inputs.shape[0], -1))
    return init_fun, apply_fun


Flatten = _flatten()


def _identity():
    """Returns its inputs unchanged."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return inputs
    return init_fun, apply_fun


Identity = _identity()


def FanOut(num):
    """Copies its input into a list of ``num`` inputs (for ``parallel``)."""
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num
    return init_fun, apply_fun


def _fan_in_sum():
    """Adds up a sequence of inputs of one shape."""
    def init_fun(rng, input_shape):
        return input_shape[0], ()

    def apply_fun(params, inputs, **kwargs):
        return sum(inputs)
    return init_fun, apply_fun


FanInSum = _fan_in_sum()


def FanInConcat(axis=-1):
    """Concatenates a sequence of inputs along ``axis``."""
    def init_fun(rng, input_shape):
        first = tuple(input_shape[0])
        ax = axis % len(first)
        joined = sum(shape[ax] for shape in input_shape)
        return first[:ax] + (joined,) + first[ax + 1:], ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """Dropout: in 'train' mode keeps each input with probability ``rate`` (stax's
    convention: ``rate`` is the keep rate) and divides the kept ones by ``rate``; any
    other mode passes inputs through. ``apply_fun`` needs ``rng=``."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError(
                "Dropout layer requires apply_fun to be called with a PRNG key argument: call "
                "apply_fun(params, inputs, rng=key) with a key from plax.random.key (or "
                "PRNGKey); serial and parallel pass one on to each layer they hold.")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


# --- combinators --------------------------------------------------------------------------
def _keys_for(rng, count):
    """One key per layer from ``rng``, or None for each when no key was given."""
    return (None,) * count if rng is None else random.split(rng, count)


def serial(*layers):
    """Chains ``layers`` (each an (init_fun, apply_fun) pair): every layer's output is the
    next one's input. Returns the chain as one layer; its params are a list, one per layer."""
    init_funs, apply_funs = zip(*layers)
    count = len(layers)

    def init_fun(rng, input_shape):
        params = []
        for layer_init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, layer_params = layer_init(layer_rng, input_shape)
            params.append(layer_params)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        keys = _keys_for(kwargs.pop("rng", None), count)
        for layer_apply, layer_params, key in zip(apply_funs, params, keys):
            inputs = layer_apply(layer_params, inputs, rng=key, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Runs ``layers`` side by side: the i-th layer takes the i-th of a sequence of inputs
    and the result is the list of their outputs (pair it with FanOut and FanInSum or
    FanInConcat)."""
    init_funs, apply_funs = zip(*layers)
    count = len(layers)

    def init_fun(rng, input_shape):
        keys = random.split(rng, count)
        results = [layer_init(key, shape)
                   for layer_init, key, shape in zip(init_funs, keys, input_shape)]
        shapes, params = zip(*results)
        return shapes, params

    def apply_fun(params, inputs, **kwargs):
        keys = _keys_for(kwargs.pop("rng", None), count)
        return [layer_apply(p, x, rng=key, **kwargs)
                for layer_apply, p, x, key in zip(apply_funs, params, inputs, keys)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built only once the input shape is known: ``make_layer(input_shape)`` returns
    the (init_fun, apply_fun) pair to use for inputs of that shape."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
