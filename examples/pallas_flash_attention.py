"""Flash attention written as two Pallas kernels, trained through.

    python examples/pallas_flash_attention.py [--steps N]

A forward kernel computes causal attention block by block with an online softmax (a running
row maximum and row sum in VMEM scratch) and saves each row's log-sum-exp; a backward kernel
recomputes the attention weights from it and accumulates dq, dk and dv. ``plax.custom_vjp``
ties them together, so ``plax.grad`` of a model using ``flash_attention`` runs both kernels.

The model is one causal self-attention layer over token and position embeddings; the task is
to predict each token's predecessor in a random sequence, which only attention can do. A few
steps of SGD print a falling loss. On a TPU the kernels compile with Mosaic; elsewhere (the
CPU) they run in interpret mode.
"""
import argparse
import functools

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

INTERPRET = plax.default_backend() != "tpu"
LANES = 128  # row statistics are stored broadcast over one vreg row of lanes
NT = (((1,), (1,)), ((), ()))  # a @ b.T
TN = (((0,), (0,)), ((), ()))  # a.T @ b
F32 = np.float32


# --- the forward kernel -------------------------------------------------------------------
def _forward_kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, m_sc, l_sc, acc_sc, *, scale,
                    block):
    """Query block i against key block j (the grid's last, "arbitrary" axis)."""
    i, j = pl.program_id(1), pl.program_id(2)

    @pl.when(j == 0)
    def _start():
        m_sc[...] = jnp.full(m_sc.shape, -jnp.inf, F32)
        l_sc[...] = jnp.zeros(l_sc.shape, F32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, F32)

    @pl.when(j <= i)  # key blocks right of the diagonal are masked whole: skipped
    def _visit():
        s = lax.dot_general(q_ref[...], k_ref[...], NT, preferred_element_type=F32) * scale
        s = jnp.where(_causal(i, j, block), s, -1e30)
        m_prev = m_sc[...][:, :1]
        m_next = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
        p = jnp.exp(s - m_next)
        rescale = jnp.exp(m_prev - m_next)
        l_next = rescale * l_sc[...][:, :1] + jnp.sum(p, axis=1, keepdims=True)
        m_sc[...] = jnp.broadcast_to(m_next, m_sc.shape)
        l_sc[...] = jnp.broadcast_to(l_next, l_sc.shape)
        acc_sc[...] = acc_sc[...] * rescale + lax.dot(p.astype(v_ref.dtype), v_ref[...],
                                                      preferred_element_type=F32)

    @pl.when(j == pl.num_programs(2) - 1)
    def _finish():
        l = l_sc[...][:, :1]
        o_ref[...] = (acc_sc[...] / l).astype(o_ref.dtype)
        lse_ref[...] = jnp.broadcast_to(m_sc[...][:, :1] + jnp.log(l), lse_ref.shape)


def _causal(i, j, block):
    rows = i * block + lax.broadcasted_iota(jnp.int32, (block, block), 0)
    cols = j * block + lax.broadcasted_iota(jnp.int32, (block, block), 1)
    return cols <= rows


def _forward(q, k, v, block):
    """Attention of q, k, v [batch*heads, seq, d]: the output and each row's log-sum-exp."""
    bh, seq, d = q.shape
    scale = 1.0 / float(np.sqrt(d))
    q_spec = pl.BlockSpec((None, block, d), lambda b, i, j: (b, i, 0))
    # (a skipped key block maps to the one already in VMEM: no copy for it)
    kv_spec = pl.BlockSpec((None, block, d), lambda b, i, j: (b, jnp.minimum(i, j), 0))
    return pl.pallas_call(
        functools.partial(_forward_kernel, scale=scale, block=block),
        out_shape=(plax.ShapeDtypeStruct(q.shape, q.dtype),
                   plax.ShapeDtypeStruct((bh, seq, LANES), F32)),
        grid=(bh, seq // block, seq // block),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=(q_spec, pl.BlockSpec((None, block, LANES), lambda b, i, j: (b, i, 0))),
        scratch_shapes=[pltpu.VMEM((block, LANES), F32), pltpu.VMEM((block, LANES), F32),
                        pltpu.VMEM((block, d), F32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        interpret=INTERPRET)(q, k, v)


# --- the backward kernel ------------------------------------------------------------------
def _backward_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, di_ref, dq_ref, dk_ref, dv_ref,
                     dk_sc, dv_sc, *, scale, block):
    """Key block j (grid axis 1) against query block i (axis 2, "arbitrary"): dk and dv
    accumulate in scratch; dq, one whole-sequence block per batch entry that stays in VMEM
    across the grid, accumulates in place."""
    j, i = pl.program_id(1), pl.program_id(2)

    @pl.when(i == 0)
    def _start():
        dk_sc[...] = jnp.zeros(dk_sc.shape, F32)
        dv_sc[...] = jnp.zeros(dv_sc.shape, F32)

    @pl.when(jnp.logical_and(j == 0, i == 0))
    def _zero_dq():
        dq_ref[...] = jnp.zeros(dq_ref.shape, dq_ref.dtype)

    @pl.when(j <= i)
    def _visit():
        rows = pl.ds(pl.multiple_of(i * block, block), block)
        q, do = q_ref[rows, :], do_ref[rows, :]
        k, v = k_ref[...], v_ref[...]
        s = lax.dot_general(q, k, NT, preferred_element_type=F32) * scale
        s = jnp.where(_causal(i, j, block), s, -1e30)
        p = jnp.exp(s - lse_ref[rows, :][:, :1])
        dp = lax.dot_general(do, v, NT, preferred_element_type=F32)
        ds = p * (dp - di_ref[rows, :][:, :1]) * scale
        dv_sc[...] += lax.dot_general(p.astype(do.dtype), do, TN, preferred_element_type=F32)
        dk_sc[...] += lax.dot_general(ds.astype(q.dtype), q, TN, preferred_element_type=F32)
        dq_ref[rows, :] += lax.dot(ds.astype(k.dtype), k,
                                   preferred_element_type=F32).astype(dq_ref.dtype)

    @pl.when(i == pl.num_programs(2) - 1)
    def _finish():
        dk_ref[...] = dk_sc[...].astype(dk_ref.dtype)
        dv_ref[...] = dv_sc[...].astype(dv_ref.dtype)


def _backward(q, k, v, o, lse, do, block):
    bh, seq, d = q.shape
    di = jnp.sum(o.astype(F32) * do.astype(F32), axis=-1, keepdims=True)
    di = jnp.broadcast_to(di, (bh, seq, LANES))
    whole = pl.BlockSpec((None, seq, d), lambda b, j, i: (b, 0, 0))
    stats = pl.BlockSpec((None, seq, LANES), lambda b, j, i: (b, 0, 0))
    kv_spec = pl.BlockSpec((None, block, d), lambda b, j, i: (b, j, 0))
    return pl.pallas_call(
        functools.partial(_backward_kernel, scale=1.0 / float(np.sqrt(d)), block=block),
        out_shape=(plax.ShapeDtypeStruct(q.shape, F32), plax.ShapeDtypeStruct(k.shape, k.dtype),
                   plax.ShapeDtypeStruct(v.shape, v.dtype)),
        grid=(bh, seq // block, seq // block),
        in_specs=[whole, kv_spec, kv_spec, whole, stats, stats],
        out_specs=(whole, kv_spec, kv_spec),
        scratch_shapes=[pltpu.VMEM((block, d), F32), pltpu.VMEM((block, d), F32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")),
        interpret=INTERPRET)(q, k, v, do, lse, di)


# --- the custom_vjp -----------------------------------------------------------------------
@functools.partial(plax.custom_vjp, nondiff_argnums=(3,))
def flash_attention(q, k, v, block):
    """Causal softmax attention of q, k, v [batch*heads, seq, d] (scale 1/sqrt(d))."""
    return _forward(q, k, v, block)[0]


def _flash_fwd(q, k, v, block):
    o, lse = _forward(q, k, v, block)
    return o, (q, k, v, o, lse)


def _flash_bwd(block, residuals, do):
    q, k, v, o, lse = residuals
    dq, dk, dv = _backward(q, k, v, o, lse, do, block)
    return dq.astype(q.dtype), dk, dv


flash_attention.defvjp(_flash_fwd, _flash_bwd)


def reference_attention(q, k, v):
    """The same attention with the logits materialised."""
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    seq = q.shape[1]
    s = jnp.where(np.tril(np.ones((seq, seq), bool)), s, -jnp.inf)
    return jnp.einsum("bqk,bkd->bqd", plax.nn.softmax(s, axis=-1), v)


# --- the model ----------------------------------------------------------------------------
def init(vocab, seq, d_model, seed=0):
    rng = np.random.default_rng(seed)

    def w(*shape):
        return jnp.asarray(rng.standard_normal(shape).astype(F32) / np.sqrt(shape[0]))
    return dict(embed=w(vocab, d_model), pos=w(d_model, seq).T, wq=w(d_model, d_model),
                wk=w(d_model, d_model), wv=w(d_model, d_model), wo=w(d_model, d_model),
                unembed=w(d_model, vocab))


def loss_fn(params, tokens, targets, heads, block, attention=None):
    """Cross-entropy of the next-token logits of a one-layer causal attention model."""
    batch, seq = tokens.shape
    d_model = params["wq"].shape[0]
    x = params["embed"][tokens] + params["pos"][None]

    def split(h):  # [batch, seq, d_model] -> [batch*heads, seq, d_model/heads]
        h = h.reshape(batch, seq, heads, d_model // heads).transpose(0, 2, 1, 3)
        return h.reshape(batch * heads, seq, d_model // heads)
    q, k, v = (split(x @ params[n]) for n in ("wq", "wk", "wv"))
    a = attention(q, k, v) if attention else flash_attention(q, k, v, block)
    a = a.reshape(batch, heads, seq, -1).transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
    logits = (x + a @ params["wo"]) @ params["unembed"]
    logp = plax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def batch_of(rng, batch, seq, vocab):
    """Random tokens; each target is the token before (the first position's is itself)."""
    tokens = rng.integers(0, vocab, (batch, seq), dtype=np.int32)
    return tokens, np.concatenate([tokens[:, :1], tokens[:, :-1]], axis=1)


def train(steps, lr, vocab=32, seq=128, d_model=128, heads=2, batch=8, block=64, log=print):
    """Checks the kernels' gradients against the reference's, then runs ``steps`` steps of
    SGD on fresh batches; returns (the gradients' max abs difference, the losses)."""
    params = init(vocab, seq, d_model)
    rng = np.random.default_rng(1)
    tokens, targets = batch_of(rng, batch, seq, vocab)

    @plax.jit
    def gradient_error(params, tokens, targets):
        grads = plax.grad(loss_fn)(params, tokens, targets, heads, block)
        want = plax.grad(loss_fn)(params, tokens, targets, heads, block, reference_attention)
        return jnp.max(jnp.stack([jnp.max(jnp.abs(grads[n] - want[n])) for n in grads]))
    error = float(gradient_error(params, tokens, targets))
    log(f"kernel gradients vs the reference's: max abs difference {error:.2e}")

    @plax.jit
    def step(params, tokens, targets):
        loss, grads = plax.value_and_grad(loss_fn)(params, tokens, targets, heads, block)
        return plax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    losses = []
    for n in range(steps):
        params, loss = step(params, *batch_of(rng, batch, seq, vocab))
        losses.append(float(loss))
        if n % max(1, steps // 10) == 0 or n == steps - 1:
            log(f"step {n:3d}  loss {losses[-1]:.4f}")
    return error, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=5.0)
    args = parser.parse_args()
    print(f"plax on {plax.default_backend()}: flash attention kernels "
          f"({'interpret mode' if INTERPRET else 'Mosaic'}), sequence 128, 2 heads, block 64")
    train(args.steps, args.lr)


if __name__ == "__main__":
    main()
