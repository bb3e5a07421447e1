"""plax next to JAX on one TPU chip, in one run (bench/tpu_check.sh runs it on a TPU machine).

    JAX_PYTHON=/path/to/python-with-jax python bench/bench_tpu.py [--smoke]

Each library runs in subprocesses of its own, one after the other (one process at a time can
hold a TPU chip). Rows (targets from issue 46):
- gpt step: an SGD training step of a GPT (12 layers, d_model 768, 12 heads, sequence 512,
  batch 16, vocabulary 50257, tied embeddings, bf16 weights and activations, f32 softmax,
  layer norms and loss), ms per step; plax/JAX at most 1.0. Both print the same losses.
- small gpt step: the same at 4 layers, d_model 256, 4 heads.
- first trace+lower of the GPT step, the first thing the process stages: at most 0.5x JAX's.
- cold compile of the GPT step, into an empty persistent compilation cache
  (``jax_compilation_cache_dir`` in a temporary directory), then the compile again in a fresh
  process on that warm cache: plax's warm-cache compile at most 0.1x JAX's (cold) compile.
- dispatch: a jitted f32[8] function called and waited for, µs per call.
- bf16 matmul 8192³: TFLOP/s, the chip's ceiling (197 TFLOP/s on a v5e).
Timed figures are the best of 5 rounds after a warm-up. JAX is JAX_PYTHON, else the system's
python3 when it imports jax; without one only plax's column is printed. ``--smoke`` shrinks
every size and runs on the CPU, to check the script itself on a machine without a TPU.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PRELUDE  # noqa: E402  (best_of, shared with bench/)

SIZES = {"gpt": dict(layers=12, d=768, heads=12, seq=512, batch=16, vocab=50257),
         "small": dict(layers=4, d=256, heads=4, seq=512, batch=16, vocab=50257),
         "matmul": 8192, "steps": 5, "dispatch_calls": 2000, "platform": "tpu"}
SMOKE = {"gpt": dict(layers=2, d=64, heads=2, seq=32, batch=2, vocab=512),
         "small": dict(layers=1, d=32, heads=2, seq=32, batch=2, vocab=512),
         "matmul": 256, "steps": 2, "dispatch_calls": 200, "platform": "cpu"}

HEADER = r'''
import sys
lib_name, mode, cache_dir, sizes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
lib = __import__(lib_name)
jnp = lib.numpy
lax = lib.lax
lib.config.update("jax_compilation_cache_dir", cache_dir)
lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
'''

BODY = r'''
sizes = json.loads(sizes)
assert lib.default_backend() == sizes["platform"], lib.devices()
BF16 = jnp.bfloat16


def gpt_init(layers, d, vocab, seq, seed=0, **_):
    """GPT weights (bf16; the same numbers for both libraries: drawn by NumPy)."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.02):
        return lib.device_put((rng.standard_normal(shape, np.float32) * scale).astype(BF16))

    def ones(n):
        return lib.device_put(np.ones(n, BF16))

    def zeros(n):
        return lib.device_put(np.zeros(n, BF16))

    blocks = [dict(ln1=(ones(d), zeros(d)), qkv=w(d, 3 * d), proj=w(d, d),
                   ln2=(ones(d), zeros(d)), fc=w(d, 4 * d), out=w(4 * d, d))
              for _ in range(layers)]
    return dict(wte=w(vocab, d), wpe=w(seq, d), blocks=blocks, lnf=(ones(d), zeros(d)))


def layer_norm(x, scale_shift):
    scale, shift = scale_shift
    x32 = x.astype(jnp.float32)
    mean = x32.mean(-1, keepdims=True)
    var = ((x32 - mean) ** 2).mean(-1, keepdims=True)
    return ((x32 - mean) * lax.rsqrt(var + 1e-5) * scale + shift).astype(BF16)


def gpt_loss(params, tokens, targets, heads):
    b, t = tokens.shape
    d = params["wte"].shape[1]
    x = params["wte"][tokens] + params["wpe"][:t]
    causal = jnp.tril(jnp.ones((t, t), bool))
    for blk in params["blocks"]:
        q, k, v = jnp.split(layer_norm(x, blk["ln1"]) @ blk["qkv"], 3, axis=-1)
        q, k, v = (z.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3) for z in (q, k, v))
        scores = (q @ k.transpose(0, 1, 3, 2)).astype(jnp.float32) / np.sqrt(d // heads)
        scores = jnp.where(causal, scores, -1e9)
        att = lib.nn.softmax(scores, axis=-1).astype(BF16)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        x = x + y @ blk["proj"]
        x = x + lib.nn.gelu(layer_norm(x, blk["ln2"]) @ blk["fc"]) @ blk["out"]
    logits = (layer_norm(x, params["lnf"]) @ params["wte"].T).astype(jnp.float32)
    logp = lib.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()


def gpt_step_fn(heads, lr=0.1):
    def step(params, tokens, targets):
        loss, grads = lib.value_and_grad(gpt_loss)(params, tokens, targets, heads)
        new = lib.tree_util.tree_map(lambda p, g: p - jnp.asarray(lr, BF16) * g, params, grads)
        return new, loss
    return step


def gpt_batch(batch, seq, vocab, seed=1, **_):
    tokens = np.random.default_rng(seed).integers(0, vocab, (batch, seq + 1), dtype=np.int32)
    return lib.device_put(tokens[:, :-1]), lib.device_put(tokens[:, 1:])


def run_steps(step, params, tokens, targets, n):
    """``n`` timed steps (ms a step, best of 5 rounds) after a warm-up, and the losses of
    the first and the last step (the same number of steps for both libraries)."""
    state = [params]
    losses = []

    def one():
        state[0], loss = step(state[0], tokens, targets)
        losses.append(loss)
        return loss

    def round_():
        for _ in range(n):
            one()
        losses[-1].block_until_ready()

    ms = best_of(round_, 1) / 1e3 / n
    return ms, float(losses[0]), float(losses[-1])


results = {}
cfg = sizes["gpt"]
params = gpt_init(**cfg)
tokens, targets = gpt_batch(**cfg)
results["gpt_params_m"] = sum(int(np.prod(p.shape))
                              for p in lib.tree_util.tree_leaves(params)) / 1e6
step = lib.jit(gpt_step_fn(cfg["heads"]))
t = time.perf_counter()
lowered = step.trace(params, tokens, targets).lower()
results["gpt_trace_lower_s"] = time.perf_counter() - t
t = time.perf_counter()
compiled = lowered.compile()
results["gpt_compile_s" if mode == "cold" else "gpt_warm_compile_s"] = time.perf_counter() - t

if mode == "cold":
    ms, first, last = run_steps(compiled, params, tokens, targets, sizes["steps"])
    results.update(gpt_step_ms=ms, gpt_first_loss=first, gpt_last_loss=last)
    del params, compiled, lowered

    small = sizes["small"]
    sparams = gpt_init(**small)
    stokens, stargets = gpt_batch(**small)
    ms, first, last = run_steps(lib.jit(gpt_step_fn(small["heads"])), sparams, stokens,
                                stargets, 4 * sizes["steps"])
    results.update(small_step_ms=ms, small_first_loss=first, small_last_loss=last)
    del sparams

    x8 = lib.device_put(np.ones(8, np.float32))
    tiny = lib.jit(lambda v: v * 2 + 1)
    results["dispatch_us"] = best_of(lambda: tiny(x8).block_until_ready(),
                                     sizes["dispatch_calls"])

    n = sizes["matmul"]
    rng = np.random.default_rng(2)
    a = lib.device_put(rng.standard_normal((n, n), np.float32).astype(BF16))
    b = lib.device_put(rng.standard_normal((n, n), np.float32).astype(BF16))
    mm = lib.jit(lambda a, b: a @ b)
    reps = 10
    us = best_of(lambda: [mm(a, b) for _ in range(reps)][-1].block_until_ready(), 1) / reps
    results["matmul_tflops"] = 2 * n ** 3 / us / 1e6
print("RESULT", json.dumps(results), flush=True)
'''
PROGRAM = HEADER + PRELUDE + BODY

ROWS = [  # key, label, format, target
    ("gpt_step_ms", "gpt step (ms)", ".2f", "at most 1.0x"),
    ("small_step_ms", "small gpt step (ms)", ".3f", "at most 1.0x"),
    ("gpt_trace_lower_s", "gpt first trace+lower (s)", ".3f", "at most 0.5x"),
    ("gpt_compile_s", "gpt cold compile (s)", ".2f", ""),
    ("gpt_warm_compile_s", "gpt compile, warm cache (s)", ".3f", "at most 0.1x JAX's cold"),
    ("dispatch_us", "dispatch (µs/call)", ".1f", ""),
    ("matmul_tflops", "bf16 matmul (TFLOP/s)", ".1f", "the ceiling"),
]


def _jax_python() -> str | None:
    if os.environ.get("JAX_PYTHON"):
        return os.environ["JAX_PYTHON"]
    found = shutil.which("python3")
    if found and subprocess.run([found, "-c", "import jax"], capture_output=True).returncode == 0:
        return found
    return None


def _run(python: str, lib: str, path: str, mode: str, cache: str, sizes: dict) -> dict:
    env = dict(os.environ)
    env.pop("PLAX_NUM_CPU_DEVICES", None)
    env["PLAX_PLATFORMS"] = env["JAX_PLATFORMS"] = sizes["platform"]
    if lib == "plax":  # (extended, never replaced: the system's packages stay visible)
        src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    proc = subprocess.run([python, path, lib, mode, cache, json.dumps(sizes)],
                          capture_output=True, text=True, env=env, timeout=400,
                          cwd=tempfile.gettempdir())
    found = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"{lib} ({mode}) failed:\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(found.group(1))


def measure(python: str, lib: str, path: str, sizes: dict) -> dict:
    """The cold run (an empty compilation cache), then a fresh process on the warm cache."""
    cache = tempfile.mkdtemp(prefix=f"bench-tpu-{lib}-")
    try:
        out = _run(python, lib, path, "cold", cache, sizes)
        warm = _run(python, lib, path, "warm", cache, sizes)
        out["gpt_warm_compile_s"] = warm["gpt_warm_compile_s"]
        return out
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _agree(mine: dict, theirs: dict) -> list:
    """The losses that differ by more than 2 % (bf16 programs compiled by the same XLA)."""
    return [f"{k}: plax {mine[k]:.4f}, JAX {theirs[k]:.4f}" for k in mine
            if k.endswith("_loss") and abs(mine[k] - theirs[k]) > 0.02 * abs(theirs[k])]


def plax_and_jax(program: str, sizes: dict, measure_one) -> tuple:
    """``program`` written to a file and measured by ``measure_one(python, lib, path, sizes)``
    under plax (this Python), then under real JAX (None when no Python with JAX is found)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(program)
        path = f.name
    try:
        mine = measure_one(sys.executable, "plax", path, sizes)
        jax_python = _jax_python()
        theirs = measure_one(jax_python, "jax", path, sizes) if jax_python else None
    finally:
        os.unlink(path)
    return mine, theirs


def main() -> int:
    sizes = SMOKE if "--smoke" in sys.argv[1:] else SIZES
    mine, theirs = plax_and_jax(PROGRAM, sizes, measure)
    g = sizes["gpt"]
    print(f"\nGPT: {g['layers']} layers, d_model {g['d']}, sequence {g['seq']}, batch "
          f"{g['batch']}, vocabulary {g['vocab']}: {mine['gpt_params_m']:.1f}M parameters, "
          f"bf16; small GPT: layers {sizes['small']['layers']}, d_model "
          f"{sizes['small']['d']}; matmul {sizes['matmul']}³.")
    print(f"{'benchmark':<30} {'plax':>10} {'jax':>10} {'plax/jax':>9}  target")
    for key, label, fmt, target in ROWS:
        line = f"{label:<30} {mine[key]:>10{fmt}}"
        if theirs:
            line += f" {theirs[key]:>10{fmt}} {mine[key] / theirs[key]:>9.3f}"
        print(f"{line}  {target}")
    for name in ("gpt", "small"):
        print(f"{name} losses, first and last step: plax {mine[name + '_first_loss']:.4f} "
              f"{mine[name + '_last_loss']:.4f}" + (
                  f", JAX {theirs[name + '_first_loss']:.4f} {theirs[name + '_last_loss']:.4f}"
                  if theirs else ""))
    if not theirs:
        print("(no JAX found: set JAX_PYTHON to a Python with jax to compare)")
        return 0
    print(f"plax's warm-cache compile / JAX's cold compile: "
          f"{mine['gpt_warm_compile_s'] / theirs['gpt_compile_s']:.3f} (target at most 0.1)")
    differ = _agree(mine, theirs)
    for line in differ:
        print("the runs disagree:", line)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
