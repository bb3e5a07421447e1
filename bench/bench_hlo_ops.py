"""Data movement in compiled programs, plax next to JAX when one is found.

For representative programs (an MLP loss, its gradient and training step,
per-example gradients, vmap of jacrev / jacfwd, hessian (and under vmap), a scan RNN, a
fori_loop, a LeNet step, softmax / logsumexp, attention and layer norm), each
is compiled with `jit(...).lower(...).compile()` and the instructions of
`Compiled.as_text()` (inside fused computations too) are counted by opcode:
`copy` and `transpose` (data movement that the program's layout choices
cause) and `fusion` (kernels launched). The run time of each program is the
best mean of repeated calls.

Target (issue 18): no program has more copies + transposes than JAX's, and
run time <= 1.0x JAX.

    JAX_PYTHON=/tmp/jaxvenv/bin/python .venv/bin/python bench/bench_hlo_ops.py [ROUNDS]

Counts are the same every round; times are the best over ROUNDS (default 1)
alternating plax/JAX runs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import best_rounds  # noqa: E402

OPCODES = ("copy", "transpose", "fusion")

MEASURE = r'''
import re
OPCODES = ("copy", "transpose", "fusion")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*")

def opcode_counts(text):
    """How many instructions of each of OPCODES the HLO module text has."""
    counts = dict.fromkeys(OPCODES, 0)
    for line in text.splitlines():
        m = _INSTR.match(line)
        if not m:
            continue
        rest = line[m.end():]
        if rest.startswith("("):  # a tuple shape: skip to its closing parenthesis
            depth = 0
            for i, ch in enumerate(rest):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    rest = rest[i + 1:]
                    break
        else:
            rest = rest.split(" ", 1)[1] if " " in rest else ""
        op = rest.lstrip().split("(", 1)[0]
        if op in counts:
            counts[op] += 1
    return counts

rng = np.random.default_rng(0)
def arr(*shape, scale=1.0):
    return lib.device_put((scale * rng.standard_normal(shape)).astype(np.float32))

programs = {}

# --- MLPs
params, xb, yb = mlp_data([784, 256, 256, 10], batch=128)
programs["MLP loss 784-256-256-10, b128"] = (mlp_loss, (params, xb, yb), 200)
programs["grad(MLP loss)"] = (lib.grad(mlp_loss), (params, xb, yb), 100)

def sgd_step(params, x, y, lr=0.01):
    value, grads = lib.value_and_grad(mlp_loss)(params, x, y)
    return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)], value
programs["MLP SGD step"] = (sgd_step, (params, xb, yb), 100)

programs["vmap(grad) per-example MLP, b128"] = (
    lib.vmap(lib.grad(mlp_example_loss), in_axes=(None, 0, 0)), (params, xb, yb), 20)

# --- jacobians
def layer(w, h):
    return jnp.tanh(w @ h)
w32, hs = arr(32, 32, scale=0.2), arr(64, 32)
programs["vmap(jacrev(tanh(w@h))) 32x32, b64"] = (
    lib.vmap(lib.jacrev(layer, argnums=1), in_axes=(None, 0)), (w32, hs), 500)
programs["vmap(jacfwd(tanh(w@h))) 32x32, b64"] = (
    lib.vmap(lib.jacfwd(layer, argnums=1), in_axes=(None, 0)), (w32, hs), 500)

w64, x64 = arr(64, 64, scale=0.1), arr(64)
def energy(x):
    return jnp.sum(jnp.tanh(w64 @ x) ** 2) + jnp.sum(jnp.sin(x) * x)
programs["hessian(f) f32[64]"] = (lib.hessian(energy), (x64,), 500)
programs["jacrev(tanh(w@x)) f32[64]"] = (lib.jacrev(lambda x: jnp.tanh(w64 @ x) * x), (x64,), 500)

# An elementwise op with an unbatched operand, next to a term batched elsewhere (jacfwd's
# basis), and a hessian under vmap.
w16, x16 = arr(16, 16, scale=0.3), arr(8, 16)
def sin_layer(x):
    return jnp.sin(w16 @ x) * x
programs["jacfwd(sin(w@x)*x) f32[16]"] = (lib.jacfwd(sin_layer), (x16[0],), 500)
programs["vmap(jacfwd(sin(w@x)*x)) 16, b8"] = (lib.vmap(lib.jacfwd(sin_layer)), (x16,), 500)
programs["vmap(jacrev(sin(w@x)*x)) 16, b8"] = (lib.vmap(lib.jacrev(sin_layer)), (x16,), 500)
programs["vmap(hessian(sum tanh(w@x)^2)) 16, b8"] = (
    lib.vmap(lib.hessian(lambda x: jnp.sum(jnp.tanh(w16 @ x) ** 2))), (x16,), 500)
programs["vmap(hessian(f)) f32[64], b8"] = (lib.vmap(lib.hessian(energy)), (arr(8, 64),), 200)

# --- loops
T, B, H = 100, 8, 128
rnn = (arr(H, H, scale=0.9 / np.sqrt(H)), arr(H, H, scale=1 / np.sqrt(H)), arr(H, scale=0.1))
xs = arr(T, B, H)
def rnn_loss(p, xs):
    W, U, b = p
    def cell(h, x_t):
        h = jnp.tanh(h @ W + x_t @ U + b)
        return h, h
    _, hs = lax.scan(cell, jnp.zeros((xs.shape[1], H), xs.dtype), xs)
    return jnp.mean(hs ** 2)
programs["value_and_grad(scan RNN) T100 b8 h128"] = (lib.value_and_grad(rnn_loss), (rnn, xs), 20)

wf, xf = arr(128, 128, scale=1 / np.sqrt(128)), arr(16, 128)
def fori(w, x):
    return lax.fori_loop(0, 50, lambda i, x: jnp.tanh(x @ w) + 0.1 * x, x)
programs["fori_loop 50 x tanh(x@w) 16x128"] = (fori, (wf, xf), 200)
programs["grad(fori_loop)"] = (lib.grad(lambda w, x: jnp.sum(fori(w, x))), (wf, xf), 100)

# --- convolution
conv_params = {"c1": (arr(5, 5, 1, 6, scale=0.2), arr(6)), "c2": (arr(5, 5, 6, 16, scale=0.08), arr(16)),
               "d1": (arr(400, 120, scale=0.05), arr(120)), "d2": (arr(120, 10, scale=0.09), arr(10))}
cx = arr(32, 28, 28, 1)
cy = lib.device_put(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)])
def lenet_loss(params, x, y):
    def block(h, w, b, padding):
        h = lax.conv_general_dilated(h, w, (1, 1), padding, dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jnp.maximum(h + b, 0.0)
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = block(x, *params["c1"], "SAME")
    h = block(h, *params["c2"], "VALID").reshape(x.shape[0], -1)
    h = jnp.maximum(h @ params["d1"][0] + params["d1"][1], 0.0)
    logits = h @ params["d2"][0] + params["d2"][1]
    return -jnp.mean(jnp.sum(y * lib.nn.log_softmax(logits), axis=1))
programs["LeNet loss, b32"] = (lenet_loss, (conv_params, cx, cy), 50)
programs["grad(LeNet loss), b32"] = (lib.grad(lenet_loss), (conv_params, cx, cy), 20)

# --- reductions
z = arr(256, 1024)
programs["softmax f32[256,1024]"] = (lambda z: lib.nn.softmax(z, axis=-1), (z,), 200)
programs["grad(sum logsumexp) f32[256,1024]"] = (
    lib.grad(lambda z: jnp.sum(lib.nn.logsumexp(z, axis=-1))), (z,), 200)

def layer_norm(x, g, b):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * g + b
lg, lb = arr(1024), arr(1024)
programs["grad(layer norm) f32[256,1024]"] = (
    lib.grad(lambda x, g, b: jnp.sum(layer_norm(x, g, b) ** 2), argnums=(0, 1, 2)), (z, lg, lb), 100)

# --- attention
Bt, Tt, Dm, Hd = 4, 64, 128, 4
aw = [arr(Dm, Dm, scale=1 / np.sqrt(Dm)) for _ in range(4)]
ax = arr(Bt, Tt, Dm)
def attention(ws, x):
    wq, wk, wv, wo = ws
    def heads(t):
        return t.reshape(t.shape[0], t.shape[1], Hd, Dm // Hd)
    q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(Dm // Hd)
    a = jnp.einsum("bhqk,bkhd->bqhd", lib.nn.softmax(s, axis=-1), v)
    return a.reshape(x.shape) @ wo
programs["attention b4 t64 d128 h4"] = (attention, (aw, ax), 200)
programs["grad(attention)"] = (lib.grad(lambda ws, x: jnp.sum(attention(ws, x) ** 2)), (aw, ax), 100)

def attend_one(ws, x):  # one example, batched with vmap
    return attention(ws, x[None])[0]
programs["vmap(attention) over b4"] = (lib.vmap(attend_one, in_axes=(None, 0)), (aw, ax), 200)

res = {}
for name, (fn, args, n) in programs.items():
    jf = lib.jit(fn)
    counts = opcode_counts(jf.lower(*args).compile().as_text())
    for op in OPCODES:
        res[f"{name}|{op}"] = counts[op]
    res[f"{name}|us"] = best_of(lambda: lib.block_until_ready(jf(*args)), n, 5)
print(json.dumps(res))
'''


def print_counts(mine: dict, theirs: dict | None) -> None:
    """One row per program: plax's counts and time, then JAX's, then the time ratio."""
    names = list(dict.fromkeys(k.rsplit("|", 1)[0] for k in mine))
    width = max(len(n) for n in names)
    cols = "copy/transp/fusion"
    header = f"{'program':<{width}}  {'plax ' + cols:>24}  {'plax us':>9}"
    if theirs:
        header += f"  {'jax ' + cols:>24}  {'jax us':>9}  {'ratio':>6}"
    print(header)
    print("-" * len(header))
    worse = []
    for n in names:
        c = "/".join(str(int(mine[f"{n}|{op}"])) for op in OPCODES)
        line = f"{n:<{width}}  {c:>24}  {mine[f'{n}|us']:>9.1f}"
        if theirs and f"{n}|us" in theirs:
            t = "/".join(str(int(theirs[f"{n}|{op}"])) for op in OPCODES)
            line += f"  {t:>24}  {theirs[f'{n}|us']:>9.1f}  {mine[f'{n}|us'] / theirs[f'{n}|us']:>6.2f}"
            moves = sum(mine[f"{n}|{op}"] - theirs[f"{n}|{op}"] for op in ("copy", "transpose"))
            if moves > 0:
                worse.append(n)
        print(line)
    if theirs:
        print(f"\nPrograms with more copies + transposes than JAX: {', '.join(worse) or 'none'}.")


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    mine, theirs = best_rounds(MEASURE, rounds)
    print_counts(mine, theirs)
    print(f"\nTimes: best of {rounds} alternating round(s) per row; counts from Compiled.as_text(), "
          "fused computations included.")
    print("Target: copies + transposes <= JAX's for every program; run time <= 1.0x JAX.")
    if theirs is None:
        print("\n(JAX not found: set JAX_PYTHON to a Python with jax installed to compare.)")
