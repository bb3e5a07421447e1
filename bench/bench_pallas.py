"""Pallas kernels on one TPU chip: plax next to real JAX running the same kernel source, and
next to the plain jnp computation, in one run.

    JAX_PYTHON=/path/to/python-with-jax python bench/bench_pallas.py [--smoke]

Rows (targets from issue 50):
- matmul: plax.experimental.pallas.ops.tpu.matmul, 4096³ bf16 in 512 x 512 tiles with a 1024
  contraction block (an f32 VMEM accumulator over the "arbitrary" axis), next to ``jnp.dot``.
- flash attention forward: ops.tpu.flash_attention, causal, bf16 [1, 16, 2048, 128] (batch x
  heads 16, sequence 2048, head dim 128), next to attention written with jnp (the logits
  materialised, softmax in f32).
Each library runs in a subprocess of its own, one after the other (one process at a time can
hold a TPU chip). JAX runs the *same source*: the ops modules' text with ``plax`` spelled
``jax`` (they import only public faces), so the kernels differ only in whose Pallas lowers
them; the target is plax within 1.05x of JAX on each kernel. Times are the best of 5 rounds
after a warm-up, in ms; each kernel's result is checked against the jnp computation.
``--smoke`` shrinks the shapes and runs on the CPU, where both libraries run the kernels in
interpret mode, to check the script on a machine without a TPU. A library whose kernels fail
(plax before its Mosaic lowering exists) gets its error printed in place of its figures.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tpu import plax_and_jax  # noqa: E402  (plax, then JAX_PYTHON's JAX)
from harness import PRELUDE  # noqa: E402  (best_of)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = os.path.join(ROOT, "src", "plax", "experimental", "pallas", "ops", "tpu")

SIZES = {"matmul": 4096, "matmul_blocks": [512, 512, 1024], "attention": [1, 16, 2048, 128],
         "attention_blocks": [512, 512, 512], "platform": "tpu", "rounds": 5, "calls": 10}
SMOKE = {"matmul": 256, "matmul_blocks": [128, 128, 128], "attention": [1, 2, 256, 128],
         "attention_blocks": [128, 128, 128], "platform": "cpu", "rounds": 2, "calls": 2}

HEADER = r'''
import sys, re, types
lib_name, sizes, ops_dir = sys.argv[1], sys.argv[2], sys.argv[3]
lib = __import__(lib_name)
jnp = lib.numpy
lax = lib.lax


def load_ops(name):
    """ops.tpu.<name> of this library: plax's module, or for JAX plax's source with the
    library's name spelled jax (the same kernels, lowered by JAX's Pallas)."""
    if lib_name == "plax":
        return __import__(f"plax.experimental.pallas.ops.tpu.{name}", fromlist=[name])
    path = f"{ops_dir}/{name}.py"
    module = types.ModuleType(f"same_source_{name}")
    module.__file__ = path
    sys.modules[module.__name__] = module
    source = re.sub(r"\bplax\b", "jax", open(path).read())
    exec(compile(source, path, "exec"), module.__dict__)
    return module
'''

BODY = r'''
sizes = json.loads(sizes)
assert lib.default_backend() == sizes["platform"], lib.devices()
BF16 = jnp.bfloat16
rounds, calls = sizes["rounds"], sizes["calls"]
rng = np.random.default_rng(0)
results = {}


def timed_ms(fn, *args):
    """Best time of one call (ms), ``calls`` calls a round, after a warm-up."""
    out = fn(*args)
    out.block_until_ready()
    return best_of(lambda: [fn(*args) for _ in range(calls)][-1].block_until_ready(), 1,
                   rounds) / 1e3 / calls, out


def guarded(key, run):
    """``run()`` (returns {row: value}); a failure is recorded as the row's error."""
    try:
        results.update(run())
    except Exception as e:  # noqa: BLE001  (the bench reports it and goes on)
        results[key + "_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"


n = sizes["matmul"]
x = lib.device_put(rng.standard_normal((n, n), np.float32).astype(BF16))
y = lib.device_put(rng.standard_normal((n, n), np.float32).astype(BF16))
dot_ms, want = timed_ms(lib.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)
                                .astype(BF16)), x, y)
results["jnp_dot_ms"] = dot_ms


def matmul_rows():
    mm = load_ops("matmul")
    bm, bn, bk = sizes["matmul_blocks"]
    ms, got = timed_ms(lambda a, b: mm.matmul(a, b, block_shape=(bm, bn), block_k=bk), x, y)
    err = float(jnp.max(jnp.abs(got.astype(jnp.float32) - want.astype(jnp.float32))))
    return {"pallas_matmul_ms": ms, "pallas_matmul_tflops": 2 * n ** 3 / ms / 1e9,
            "pallas_matmul_max_err": err}


guarded("pallas_matmul", matmul_rows)
del x, y, want

shape = tuple(sizes["attention"])
q, k, v = (lib.device_put((rng.standard_normal(shape, np.float32)).astype(BF16))
           for _ in range(3))
scale = 1.0 / float(np.sqrt(shape[-1]))


def jnp_attention(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    t = s.shape[-1]
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e30)
    p = lib.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p.astype(BF16), v)


att_ms, att_want = timed_ms(lib.jit(jnp_attention), q, k, v)
results["jnp_attention_ms"] = att_ms


def attention_rows():
    fa = load_ops("flash_attention")
    bq, bkm, bk = sizes["attention_blocks"]
    blocks = fa.BlockSizes(block_q=bq, block_k_major=bkm, block_k=bk, block_b=1)
    run = lib.jit(lambda q, k, v: fa.flash_attention(q, k, v, causal=True, sm_scale=scale,
                                                     block_sizes=blocks))
    ms, got = timed_ms(run, q, k, v)
    err = float(jnp.max(jnp.abs(got.astype(jnp.float32) - att_want.astype(jnp.float32))))
    return {"pallas_flash_fwd_ms": ms, "pallas_flash_fwd_max_err": err}


guarded("pallas_flash_fwd", attention_rows)
print("RESULT", json.dumps(results), flush=True)
'''
PROGRAM = HEADER + PRELUDE + BODY

ROWS = [  # key, label, format
    ("pallas_matmul_ms", "pallas matmul (ms)", ".3f"),
    ("pallas_matmul_tflops", "pallas matmul (TFLOP/s)", ".1f"),
    ("jnp_dot_ms", "jnp.dot (ms)", ".3f"),
    ("pallas_flash_fwd_ms", "pallas flash attention fwd (ms)", ".3f"),
    ("jnp_attention_ms", "jnp attention (ms)", ".3f"),
    ("pallas_matmul_max_err", "matmul max |err| vs jnp.dot", ".3g"),
    ("pallas_flash_fwd_max_err", "flash max |err| vs jnp", ".3g"),
]


def run(python: str, lib: str, path: str, sizes: dict) -> dict:
    """One library's figures (a subprocess on ``sizes['platform']``)."""
    env = dict(os.environ)
    env.pop("PLAX_NUM_CPU_DEVICES", None)
    env["PLAX_PLATFORMS"] = env["JAX_PLATFORMS"] = sizes["platform"]
    if lib == "plax":  # (extended, never replaced: the system's packages stay visible)
        src = os.path.join(ROOT, "src")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    proc = subprocess.run([python, path, lib, json.dumps(sizes), OPS], capture_output=True,
                          text=True, env=env, timeout=500, cwd=tempfile.gettempdir())
    found = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"{lib} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(found.group(1))


def table(mine: dict, theirs: dict | None) -> list:
    """The report's lines: each row's plax and JAX figures and their ratio, then errors."""
    lines = [f"{'benchmark':<34} {'plax':>10} {'jax':>10} {'plax/jax':>9}"]
    for key, label, fmt in ROWS:
        def cell(figures):
            value = (figures or {}).get(key)
            return f"{value:>10{fmt}}" if value is not None else f"{'-':>10}"
        line = f"{label:<34} {cell(mine)} {cell(theirs)}"
        if theirs and mine.get(key) is not None and theirs.get(key):
            line += f" {mine[key] / theirs[key]:>9.3f}"
        lines.append(line)
    for name, figures in (("plax", mine), ("jax", theirs or {})):
        for key, value in figures.items():
            if key.endswith("_error"):
                lines.append(f"{name} {key[:-len('_error')]} failed: {value}")
    return lines


def main() -> int:
    sizes = SMOKE if "--smoke" in sys.argv[1:] else SIZES
    mine, theirs = plax_and_jax(PROGRAM, sizes, run)
    b, h, t, d = sizes["attention"]
    print(f"\n{sizes['platform']}: matmul {sizes['matmul']}³ bf16, blocks "
          f"{sizes['matmul_blocks']}; causal flash attention fwd bf16 [{b}, {h}, {t}, {d}], "
          f"blocks (q, k_major, k) {sizes['attention_blocks']}; best of {sizes['rounds']} "
          "rounds. Target: plax's kernels within 1.05x of JAX's.")
    print("\n".join(table(mine, theirs)))
    if theirs is None:
        print("(no JAX found: set JAX_PYTHON to a Python with jax to compare)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
