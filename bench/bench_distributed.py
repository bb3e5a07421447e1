"""Data-parallel training step: 2 processes x 4 CPU devices against 1 process x 8 devices.

The step is an MLP (256 -> 512 -> 512 -> 10, tanh) trained by SGD on a global batch of 1024
rows. The batch is split over all 8 devices, the parameters are replicated, and jit turns the
gradient's mean into an all-reduce. With 2 processes, half of that all-reduce crosses between
processes over gloo/TCP (127.0.0.1); with 1 process it stays inside XLA. The figure is the
per-step time in process 0: the best of 5 runs of 20 steps, after one warm-up step. There is
no target; the ratio is the cost of going through processes.

    JAX_PYTHON=/tmp/jaxenv/bin/python .venv/bin/python bench/bench_distributed.py

When JAX_PYTHON names a Python with jax, the same program runs on JAX too (gloo collectives).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
from plax.distributed.launch import free_port  # noqa: E402

PROGRAM = r'''
import json, os, sys, time
import numpy as np
lib_name = sys.argv[1]
lib = __import__(lib_name)
if lib_name == "jax":
    lib.config.update("jax_cpu_collectives_implementation", "gloo")
n = int(os.environ.get("BENCH_NUM_PROCESSES", "1"))
if n > 1:
    lib.distributed.initialize(os.environ["BENCH_COORDINATOR"], n,
                               int(os.environ["BENCH_PROCESS_ID"]))
jnp = lib.numpy
from importlib import import_module
sharding = import_module(lib_name + ".sharding")
Mesh, NamedSharding, P = sharding.Mesh, sharding.NamedSharding, sharding.PartitionSpec
mesh = Mesh(np.array(lib.devices()), ("data",))
rows, sizes = 1024, (256, 512, 512, 10)
rng = np.random.default_rng(0)
host_params = [((rng.standard_normal((m, k)) / np.sqrt(m)).astype(np.float32),
                np.zeros(k, np.float32)) for m, k in zip(sizes[:-1], sizes[1:])]
host_x = rng.standard_normal((rows, sizes[0])).astype(np.float32)
host_y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], rows)]
replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
cb = lambda a, s: lib.make_array_from_callback(a.shape, s, lambda i: a[i])
params = [(cb(w, replicated), cb(b, replicated)) for w, b in host_params]
x, y = cb(host_x, split), cb(host_y, split)

def loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)

@lib.jit
def step(params, x, y):
    grads = lib.grad(loss)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]

params = step(params, x, y)
lib.block_until_ready(params)
best = float("inf")
for _ in range(5):
    start = time.perf_counter()
    for _ in range(20):
        params = step(params, x, y)
    lib.block_until_ready(params)
    best = min(best, (time.perf_counter() - start) / 20)
value = float(np.asarray(params[-1][1].addressable_shards[0].data)[0])
print("RESULT", json.dumps({"step_us": best * 1e6, "check": value}), flush=True)
'''


def _run(python: str, lib: str, processes: int, devices: int, path: str) -> dict:
    port = free_port()
    procs = []
    for pid in range(processes):
        env = dict(os.environ, BENCH_NUM_PROCESSES=str(processes), BENCH_PROCESS_ID=str(pid),
                   BENCH_COORDINATOR=f"127.0.0.1:{port}", PLAX_NUM_CPU_DEVICES=str(devices),
                   JAX_NUM_CPU_DEVICES=str(devices), JAX_PLATFORMS="cpu")
        procs.append(subprocess.Popen([python, path, lib], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir()))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{lib} {processes}x{devices} failed:\n{out}\n{err[-3000:]}")
    found = re.search(r"^RESULT (.*)$", outs[0][0], re.M)
    return json.loads(found.group(1))


def main() -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROGRAM)
        path = f.name
    libs = [(sys.executable, "plax")]
    if os.environ.get("JAX_PYTHON"):
        libs.append((os.environ["JAX_PYTHON"], "jax"))
    print(f"{'library':<8} {'1 x 8 (us/step)':>16} {'2 x 4 (us/step)':>16} {'ratio':>6}")
    for python, lib in libs:
        one = _run(python, lib, 1, 8, path)
        two = _run(python, lib, 2, 4, path)
        if abs(one["check"] - two["check"]) > 1e-4 * max(1.0, abs(one["check"])):
            raise RuntimeError(f"{lib}: the two runs disagree: {one} vs {two}")
        print(f"{lib:<8} {one['step_us']:>16.1f} {two['step_us']:>16.1f} "
              f"{two['step_us'] / one['step_us']:>6.2f}")
    os.unlink(path)
    print("\nPer-step time in process 0, best of 5 runs of 20 steps; ratio = 2x4 / 1x8.")


if __name__ == "__main__":
    main()
