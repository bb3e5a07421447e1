"""plax.experimental.rnn: the packed-weight LSTM against a NumPy LSTM (ragged lengths,
bidirectional, several layers), gradients by check_grads, under jit and vmap."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import random
from plax.experimental import rnn
from plax.test_util import check_grads

I, H, B, T = 3, 4, 3, 5
LENGTHS = np.array([5, 2, 4], np.int32)


def numpy_lstm(x, h0, c0, w, lengths, num_layers, bidirectional):
    """A plain LSTM, one example and one step at a time (PyTorch's gate order i, f, g, o)."""
    sig = lambda z: 1 / (1 + np.exp(-z))
    W_ih, W_hh, b_ih, b_hh = (
        {k: np.asarray(v, np.float64) for k, v in d.items()}
        for d in rnn.unpack_lstm_weights(np.asarray(w), I, H, num_layers, bidirectional))
    dirs = 2 if bidirectional else 1
    x = np.asarray(x, np.float64)
    y = np.zeros((B, T, dirs * H))
    hn, cn = np.zeros((dirs * num_layers, B, H)), np.zeros((dirs * num_layers, B, H))
    for b in range(B):
        n = lengths[b]
        inp = x[b, :n]
        for layer in range(num_layers):
            outs = []
            for d in range(dirs):
                p = layer * dirs + d
                h, c = np.asarray(h0[p, b], np.float64), np.asarray(c0[p, b], np.float64)
                seq = inp if d == 0 else inp[::-1]
                out = []
                for x_t in seq:
                    z = W_ih[p] @ x_t + b_ih[p] + W_hh[p] @ h + b_hh[p]
                    i, f, g, o = np.split(z, 4)
                    c = sig(f) * c + sig(i) * np.tanh(g)
                    h = sig(o) * np.tanh(c)
                    out.append(h)
                out = np.array(out)
                outs.append(out if d == 0 else out[::-1])
                hn[p, b], cn[p, b] = h, c
            inp = np.concatenate(outs, axis=-1)
        y[b, :n] = inp
    return y, hn, cn


def make_inputs(num_layers, bidirectional, seed=0):
    # The data come from NumPy (a plax sampler compiles once per shape); the weights from
    # init_lstm_weight.
    dirs = 2 if bidirectional else 1
    rng = np.random.default_rng(seed)
    x, h0, c0 = (jnp.asarray(rng.standard_normal(shape), jnp.float32)
                 for shape in [(B, T, I), (dirs * num_layers, B, H), (dirs * num_layers, B, H)])
    w = rnn.init_lstm_weight(random.key(seed), I, H, num_layers, bidirectional)
    return x, h0, c0, w


CONFIGS = [(1, False), (2, False), (1, True), (2, True)]


@pytest.mark.parametrize("num_layers, bidirectional", CONFIGS)
def test_lstm_matches_numpy(num_layers, bidirectional):
    x, h0, c0, w = make_inputs(num_layers, bidirectional)
    lengths = jnp.asarray(LENGTHS)
    y, hn, cn = rnn.lstm(x, h0, c0, w, lengths, I, H, num_layers, 0.0, bidirectional)
    ry, rh, rc = numpy_lstm(x, h0, c0, w, LENGTHS, num_layers, bidirectional)
    dirs = 2 if bidirectional else 1
    assert y.shape == (B, T, dirs * H) and hn.shape == cn.shape == (dirs * num_layers, B, H)
    np.testing.assert_allclose(np.asarray(y), ry, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(hn), rh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(cn), rc, rtol=1e-5, atol=1e-6)
    ref = rnn.lstm_ref(x, h0, c0, *rnn.unpack_lstm_weights(w, I, H, num_layers, bidirectional),
                       lengths, I, H, num_layers, 0.0, bidirectional)
    for got, want in zip((y, hn, cn), ref):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_weight_layout_helpers():
    assert rnn.get_num_params_in_lstm(3, 4, 2, True) == 736  # JAX 0.10.2's count
    assert rnn.get_num_params_in_lstm(3, 4, 1, False) == 4 * 4 * (3 + 4) + 2 * 16
    w = rnn.init_lstm_weight(random.key(0), 3, 4, 1, False)
    assert w.shape == (144,) and w.dtype == np.float32
    np.testing.assert_allclose(np.asarray(w[:3]), [0.447667, 0.47857988, -0.16770852], rtol=1e-6)
    assert float(jnp.max(jnp.abs(w))) <= 0.5
    W_ih, W_hh, b_ih, b_hh = rnn.unpack_lstm_weights(jnp.arange(736.), 3, 4, 2, True)
    assert [W_ih[p].shape for p in range(4)] == [(16, 3), (16, 3), (16, 8), (16, 8)]
    assert W_hh[3].shape == (16, 4) and b_hh[3].shape == (16,)
    assert float(W_hh[0][0, 0]) == 48.0 and float(b_ih[0][0]) == 16 * 3 * 2 + 16 * 4 * 2 + 16 * 8 * 2 + 16 * 4 * 2
    swapped = rnn.swap_lstm_gates(jnp.arange(16.), 1, 1, 1, False)
    np.testing.assert_array_equal(np.asarray(swapped),
                                  [0, 1, 3, 2, 4, 5, 7, 6, 8, 9, 11, 10, 12, 13, 15, 14])


@pytest.mark.parametrize("num_layers, bidirectional", [(1, False), (2, True)])
def test_lstm_gradients(num_layers, bidirectional):
    x, h0, c0, w = make_inputs(num_layers, bidirectional, seed=1)
    lengths = jnp.asarray(LENGTHS)

    def f(x, h0, c0, w):
        return rnn.lstm(x, h0, c0, w, lengths, I, H, num_layers, 0.0, bidirectional)
    check_grads(f, (x, h0, c0, w), order=1, modes=["rev"], eps=1e-2, atol=2e-2, rtol=2e-2)


def test_lstm_gradient_matches_reference_gradient():
    x, h0, c0, w = make_inputs(1, True, seed=2)
    lengths = jnp.asarray(LENGTHS)

    def loss(w, x):
        y, hn, cn = rnn.lstm(x, h0, c0, w, lengths, I, H, 1, 0.0, True)
        return jnp.sum(y ** 2) + jnp.sum(hn * cn)

    def ref_loss(w, x):
        y, hn, cn = rnn.lstm_ref(x, h0, c0, *rnn.unpack_lstm_weights(w, I, H, 1, True),
                                 lengths, I, H, 1, 0.0, True)
        return jnp.sum(y ** 2) + jnp.sum(hn * cn)
    got = plax.jit(plax.grad(loss, (0, 1)))(w, x)
    want = plax.grad(ref_loss, (0, 1))(w, x)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-6)


def test_lstm_under_jit_and_vmap():
    x, h0, c0, w = make_inputs(1, False, seed=3)
    lengths = jnp.asarray(LENGTHS)
    run = lambda x: rnn.lstm(x, h0, c0, w, lengths, I, H, 1, 0.0, False)
    xs = jnp.stack([x, 2 * x])
    ys, hns, cns = plax.jit(plax.vmap(run))(xs)
    for k in range(2):
        ry, rh, rc = numpy_lstm(xs[k], h0, c0, w, LENGTHS, 1, False)
        np.testing.assert_allclose(np.asarray(ys[k]), ry, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(hns[k]), rh, rtol=1e-5, atol=1e-6)
    # the pullback batches too
    g = plax.vmap(plax.grad(lambda x: jnp.sum(run(x)[0])))(xs)
    g0 = plax.grad(lambda x: jnp.sum(run(x)[0]))(xs[0])
    np.testing.assert_allclose(np.asarray(g[0]), np.asarray(g0), rtol=1e-6)


def test_lstm_forward_mode_is_refused():
    x, h0, c0, w = make_inputs(1, False)
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp"):
        plax.jvp(lambda x: rnn.lstm(x, h0, c0, w, jnp.asarray(LENGTHS), I, H, 1, 0.0, False),
                 (x,), (x,))


@pytest.mark.parametrize("change, exc, match", [
    (dict(dropout=0.5), NotImplementedError, "Dropout not supported in LSTM reference"),
    (dict(lengths=LENGTHS.astype(np.int64)), NotImplementedError, "`seq_lengths` can only be int32"),
    (dict(hidden=5), ValueError, r"h_0 must have shape .* = \(1, 3, 5\), got \(1, 3, 4\)"),
    (dict(w_cut=1), ValueError, r"weights must have shape \(144,\)"),
    (dict(input_size=2), ValueError, r"x must be \(batch_size, max_seq_length, input_size=2\)"),
])
def test_lstm_bad_input(change, exc, match):
    x, h0, c0, w = make_inputs(1, False)
    w = w[:len(w) - change.get("w_cut", 0)]
    lengths = change.get("lengths", LENGTHS)
    with pytest.raises(exc, match=match):
        rnn.lstm(x, h0, c0, w, lengths, change.get("input_size", I), change.get("hidden", H), 1,
                 change.get("dropout", 0.0), False)
