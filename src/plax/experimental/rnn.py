"""plax.experimental.rnn: the LSTM API of ``jax.experimental.rnn``.

JAX's module serves cuDNN's LSTM (one opaque weight vector, batch-first inputs, sequences of
per-example lengths). plax runs the same computation on its own primitives: ``rnn_fwd_p`` and
``rnn_bwd_p`` hold the LSTM and its pullback, written in lax ops (``lstm_ref``'s recurrence)
and lowered inline on every platform, so ``lstm`` works on CPU where JAX's needs a GPU.

The weight vector packs, for every pseudo-layer (layer 0 forward, layer 0 reverse when
bidirectional, layer 1 forward, ...), first all matrices ``W_ih`` (4*hidden, layer input) and
``W_hh`` (4*hidden, hidden), pseudo-layer by pseudo-layer, then all biases ``b_ih`` and
``b_hh`` (4*hidden each). The four gate blocks of each are, in order, input, forget, cell and
output (PyTorch's order). Dropout between layers is cuDNN's random mask, which plax cannot
reproduce: a non-zero ``dropout`` is refused, as by JAX's reference path.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax, random
from plax.api.autodiff import jvp as _jvp, vjp as _vjp
from plax.api.vmap import vmap as _vmap
from plax.core import avals as _avals
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, jvp_rules, register_lowering
from plax.custom_derivatives import custom_vjp
from plax.lowering.inline import lower_fun

__all__ = ["lstm", "lstm_ref", "lstm_fwd", "lstm_bwd", "init_lstm_weight",
           "get_num_params_in_lstm", "unpack_lstm_weights", "swap_lstm_gates",
           "rnn_abstract_eval", "rnn_bwd_abstract_eval", "rnn_fwd_p", "rnn_bwd_p",
           "sigmoid", "tanh", "Array", "Shape", "PRNGKeyArray", "custom_vjp"]

Array = plax.Array
Shape = Sequence[int]
PRNGKeyArray = Any
sigmoid = plax.nn.sigmoid
tanh = plax.nn.tanh


# --- the weight layout ----------------------------------------------------------------------
def _param_shapes(input_size: int, hidden_size: int, num_layers: int,
                  bidirectional: bool) -> list[tuple[int, ...]]:
    """The shapes of the packed weights in storage order (see the module docstring)."""
    directions = 2 if bidirectional else 1
    pseudo_layers = num_layers * directions
    matrices, biases = [], []
    for layer in range(pseudo_layers):
        fan_in = input_size if layer < directions else directions * hidden_size
        matrices += [(4 * hidden_size, fan_in), (4 * hidden_size, hidden_size)]
        biases += [(4 * hidden_size,), (4 * hidden_size,)]
    return matrices + biases


def get_num_params_in_lstm(input_size: int, hidden_size: int, num_layers: int,
                           bidirectional: bool) -> int:
    """The length of the packed weight vector of such an LSTM."""
    return sum(math.prod(s) for s in _param_shapes(input_size, hidden_size, num_layers,
                                                   bidirectional))


def init_lstm_weight(rng: PRNGKeyArray, input_size: int, hidden_size: int, num_layers: int,
                     bidirectional: bool):
    """A packed float32 weight vector drawn from U(-k, k), k = 1/sqrt(hidden_size)."""
    count = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    k = np.sqrt(1.0 / hidden_size)
    return random.uniform(rng, shape=(count,), dtype=jnp.float32, minval=-k, maxval=k)


def _blocks(weights, shapes):
    """The packed vector cut into arrays of ``shapes``, in storage order."""
    out, offset = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(weights[offset:offset + size].reshape(shape))
        offset += size
    return out


def unpack_lstm_weights(weights: Array, input_size: int, hidden_size: int, num_layers: int,
                        bidirectional: bool):
    """``(W_ih, W_hh, b_ih, b_hh)``, each a dict from pseudo-layer index to its array (gates
    stacked on the leading axis)."""
    shapes = _param_shapes(input_size, hidden_size, num_layers, bidirectional)
    blocks = _blocks(weights, shapes)
    n = len(shapes) // 4  # pseudo-layers
    W_ih = {layer: blocks[2 * layer] for layer in range(n)}
    W_hh = {layer: blocks[2 * layer + 1] for layer in range(n)}
    b_ih = {layer: blocks[2 * n + 2 * layer] for layer in range(n)}
    b_hh = {layer: blocks[2 * n + 2 * layer + 1] for layer in range(n)}
    return W_ih, W_hh, b_ih, b_hh


def swap_lstm_gates(weights, input_size, hidden_size, num_layers, bidirectional):
    """The packed vector with the third and fourth gate blocks (cell and output) exchanged in
    every weight and bias: between PyTorch's gate order and the (i, f, o, g) order."""
    weights = jnp.asarray(weights)
    shapes = _param_shapes(input_size, hidden_size, num_layers, bidirectional)
    swapped = []
    for block in _blocks(weights, shapes):
        i, f, g, o = jnp.split(block, 4, axis=0)
        swapped.append(jnp.concatenate([i, f, o, g], axis=0).reshape(-1))
    return jnp.concatenate(swapped) if swapped else weights


# --- the reference recurrence ---------------------------------------------------------------
def _check_ref_options(seq_lengths, dropout):
    dtype = getattr(seq_lengths, "dtype", None)
    if (np.asarray(seq_lengths).dtype if dtype is None else dtype) != np.dtype("int32"):
        raise NotImplementedError("`seq_lengths` can only be int32.")
    if dropout != 0.0:
        raise NotImplementedError(
            "Dropout not supported in LSTM reference because we cannot determine CUDNN dropout "
            "mask (plax's LSTM is this reference): pass dropout=0.0.")


def _cell(carry, x_t, W_ih, W_hh, b_ih, b_hh):
    h, c = carry
    gates = x_t @ W_ih.T + b_ih[None] + h @ W_hh.T + b_hh[None]
    i, f, g, o = jnp.split(gates, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)
    return (h, c), (h, c)


def _run_layer(xs, h0, c0, W_ih, W_hh, b_ih, b_hh, seq_lengths):
    """One direction of one layer over time-major ``xs``: outputs zeroed past each sequence's
    length, and the carry at its last step."""
    _, (hs, cs) = lax.scan(partial(_cell, W_ih=W_ih, W_hh=W_hh, b_ih=b_ih, b_hh=b_hh),
                           (h0, c0), xs)
    rows = jnp.arange(hs.shape[1])
    h_last, c_last = hs[seq_lengths - 1, rows], cs[seq_lengths - 1, rows]
    valid = seq_lengths[None] > jnp.arange(xs.shape[0], dtype=jnp.int32)[:, None]
    return jnp.where(valid[..., None], hs, 0), h_last, c_last


def _reverse_within_lengths(xs, seq_lengths):
    """Each sequence (time-major) reversed over its own length, padding kept at the end."""
    steps = xs.shape[0]
    rolled = _vmap(lambda seq, shift: jnp.roll(seq, shift, axis=0), in_axes=(1, 0),
                   out_axes=1)(xs, steps - seq_lengths)
    return rolled[::-1]


@partial(plax.jit, static_argnums=(8, 9, 10, 11, 12))
def lstm_ref(x: Array, h_0: Array, c_0: Array, W_ih: dict, W_hh: dict, b_ih: dict, b_hh: dict,
             seq_lengths: Array, input_size: int, hidden_size: int, num_layers: int,
             dropout: float, bidirectional: bool):
    """The LSTM computed step by step with ``lax.scan`` from unpacked weights (see
    ``unpack_lstm_weights``): returns ``(y, h_n, c_n)`` as ``lstm`` does."""
    _check_ref_options(seq_lengths, dropout)
    directions = 2 if bidirectional else 1
    layer_in = x.transpose(1, 0, 2)
    h_n, c_n = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            p = layer * directions + d
            weights = (W_ih[p], W_hh[p], b_ih[p], b_hh[p])
            if d == 0:
                ys, h, c = _run_layer(layer_in, h_0[p], c_0[p], *weights, seq_lengths)
            else:
                ys, h, c = _run_layer(_reverse_within_lengths(layer_in, seq_lengths),
                                      h_0[p], c_0[p], *weights, seq_lengths)
                ys = _reverse_within_lengths(ys, seq_lengths)
            outs.append(ys)
            h_n.append(h)
            c_n.append(c)
        layer_in = outs[0] if directions == 1 else jnp.concatenate(outs, axis=-1)
    return layer_in.transpose(1, 0, 2), jnp.stack(h_n), jnp.stack(c_n)


# --- the primitives -------------------------------------------------------------------------
def _lstm_cudnn_allow_tf32(precision) -> bool:
    """cuDNN's one precision switch from a ``precision=`` argument (JAX's rule; on CPU the
    computation is float32 whatever it says)."""
    precision = lax.canonicalize_precision(precision)
    if precision is None or not (isinstance(precision, tuple) and len(precision) == 2):
        return True
    first = precision[0]
    if first == lax.Precision.HIGHEST:
        return False
    if first == lax.Precision.HIGH:
        return True
    if first == lax.Precision.DEFAULT:
        raise NotImplementedError("bfloat16 support not implemented for LSTM")
    raise ValueError(f"Unexpected precision specifier value {precision}")


def rnn_abstract_eval(x_aval, h_0_aval, c_0_aval, w_aval, seq_lengths_aval, input_size: int,
                      hidden_size: int, num_layers: int, dropout: float, bidirectional: bool,
                      cudnn_allow_tf32: bool):
    """The types of ``rnn_fwd_p``'s results ``(y, h_n, c_n, reserve_space)``; checks the
    operands' shapes against the sizes. plax's reserve space is empty (the pullback
    recomputes the recurrence)."""
    directions = 2 if bidirectional else 1
    if len(x_aval.shape) != 3 or x_aval.shape[2] != input_size:
        raise ValueError(f"lstm: x must be (batch_size, max_seq_length, input_size={input_size}),"
                         f" got shape {x_aval.shape}.")
    batch, steps = x_aval.shape[:2]
    state_shape = (directions * num_layers, batch, hidden_size)
    for name, aval in (("h_0", h_0_aval), ("c_0", c_0_aval)):
        if tuple(aval.shape) != state_shape:
            raise ValueError(f"lstm: {name} must have shape (num_directions * num_layers, "
                             f"batch_size, hidden_size) = {state_shape}, got {aval.shape}.")
    count = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    if tuple(w_aval.shape) != (count,):
        raise ValueError(f"lstm: weights must have shape ({count},) (get_num_params_in_lstm), "
                         f"got {w_aval.shape}.")
    if tuple(seq_lengths_aval.shape) != (batch,):
        raise ValueError(f"lstm: seq_lengths must have shape (batch_size,) = ({batch},), got "
                         f"{seq_lengths_aval.shape}.")
    y = _avals.ShapedArray((batch, steps, directions * hidden_size), x_aval.dtype)
    reserve = _avals.ShapedArray((0,), np.dtype(np.float32))
    return (y, _avals.ShapedArray(h_0_aval.shape, h_0_aval.dtype),
            _avals.ShapedArray(c_0_aval.shape, c_0_aval.dtype), reserve)


def rnn_bwd_abstract_eval(dy_aval, dhn_aval, dcn_aval, x_aval, h0_aval, c0_aval, w_aval,
                          y_aval, reserve_space_aval, seq_lengths_aval, input_size: int,
                          hidden_size: int, num_layers: int, dropout: float,
                          bidirectional: bool, cudnn_allow_tf32: bool):
    """The types of ``rnn_bwd_p``'s results: the cotangents of x, h_0, c_0 and the weights."""
    return tuple(_avals.ShapedArray(a.shape, a.dtype) for a in (x_aval, h0_aval, c0_aval, w_aval))


def _forward(x, h_0, c_0, w, seq_lengths, *, input_size, hidden_size, num_layers, dropout,
             bidirectional, cudnn_allow_tf32):
    y, h_n, c_n = lstm_ref(x, h_0, c_0,
                           *unpack_lstm_weights(w, input_size, hidden_size, num_layers,
                                                bidirectional),
                           seq_lengths, input_size, hidden_size, num_layers, dropout,
                           bidirectional)
    return [y, h_n, c_n, jnp.zeros((0,), jnp.float32)]


def _backward(dy, dh_n, dc_n, x, h_0, c_0, w, y, reserve_space, seq_lengths, **params):
    def diff_part(x, h_0, c_0, w):
        return tuple(_forward(x, h_0, c_0, w, seq_lengths, **params)[:3])
    _, pullback = _vjp(diff_part, x, h_0, c_0, w)
    return list(pullback((dy, dh_n, dc_n)))


def _define(prim, fn, abstract):
    """``prim`` as the plax function ``fn``: its types from ``abstract``, its lowering ``fn``
    traced inline, its jvp and batch rules ``fn``'s own."""
    prim.multiple_results = True
    abstract_eval_rules[prim] = abstract
    register_lowering(prim, lower_fun(fn, multiple_results=True))

    def jvp_rule(primals, tangents, **params):
        from plax.first_order.ad_util import instantiate
        outs, out_tangents = _jvp(lambda *xs: fn(*xs, **params), tuple(primals),
                                  tuple(instantiate(t) for t in tangents))
        return list(outs), list(out_tangents)

    def batch_rule(axis_data, vals, dims, **params):
        outs = _vmap(lambda *xs: fn(*xs, **params), in_axes=tuple(dims))(*vals)
        return list(outs), [0] * len(outs)

    jvp_rules[prim] = jvp_rule
    batch_rules[prim] = batch_rule


rnn_fwd_p = Primitive("rnn_fwd")
_define(rnn_fwd_p, _forward, rnn_abstract_eval)
rnn_bwd_p = Primitive("rnn_bwd")
_define(rnn_bwd_p, _backward, rnn_bwd_abstract_eval)


# --- the public LSTM ------------------------------------------------------------------------
def lstm_fwd(x: Array, h_0: Array, c_0: Array, w: Array, seq_lengths: Array, input_size: int,
             hidden_size: int, num_layers: int, dropout: float, bidirectional: bool,
             precision=None):
    """``lstm``'s forward pass: ``((y, h_n, c_n), residuals)``."""
    _check_ref_options(seq_lengths, dropout)
    allow_tf32 = _lstm_cudnn_allow_tf32(precision)
    y, h_n, c_n, reserve_space = rnn_fwd_p.bind(
        x, h_0, c_0, w, seq_lengths, input_size=input_size, hidden_size=hidden_size,
        num_layers=num_layers, dropout=dropout, bidirectional=bidirectional,
        cudnn_allow_tf32=allow_tf32)
    return (y, h_n, c_n), (x, h_0, c_0, w, seq_lengths, y, reserve_space)


def lstm_bwd(input_size: int, hidden_size: int, num_layers: int, dropout: float,
             bidirectional: bool, precision, residuals, gradients):
    """``lstm``'s backward pass: the cotangents of x, h_0, c_0, the weights, and zeros for
    ``seq_lengths``."""
    allow_tf32 = _lstm_cudnn_allow_tf32(precision)
    x, h_0, c_0, w, seq_lengths, y, reserve_space = residuals
    dy, dh_n, dc_n = gradients
    dx, dh_0, dc_0, dw = rnn_bwd_p.bind(
        dy, dh_n, dc_n, x, h_0, c_0, w, y, reserve_space, seq_lengths, input_size=input_size,
        hidden_size=hidden_size, num_layers=num_layers, dropout=dropout,
        bidirectional=bidirectional, cudnn_allow_tf32=allow_tf32)
    return dx, dh_0, dc_0, dw, jnp.zeros_like(seq_lengths)


def _lstm(x: Array, h_0: Array, c_0: Array, weights: Array, seq_lengths: Array,
          input_size: int, hidden_size: int, num_layers: int, dropout: float,
          bidirectional: bool, precision=None):
    """A (multi-layer, optionally bidirectional) LSTM over batch-first sequences.

    x: (batch_size, max_seq_length, input_size); h_0, c_0: (num_directions * num_layers,
    batch_size, hidden_size); weights: the packed vector (``init_lstm_weight``); seq_lengths:
    int32 (batch_size,). Returns ``(y, h_n, c_n)``: y (batch_size, max_seq_length,
    num_directions * hidden_size), zero past each sequence's length; h_n, c_n the states at
    each sequence's last step.
    """
    (y, h_n, c_n), _ = lstm_fwd(x, h_0, c_0, weights, seq_lengths, input_size=input_size,
                                hidden_size=hidden_size, num_layers=num_layers,
                                dropout=dropout, bidirectional=bidirectional,
                                precision=precision)
    return y, h_n, c_n


_lstm.__name__ = _lstm.__qualname__ = "lstm"
lstm = custom_vjp(_lstm, nondiff_argnums=(5, 6, 7, 8, 9, 10))
lstm.defvjp(lstm_fwd, lstm_bwd)
