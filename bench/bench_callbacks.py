"""Host callbacks, plax next to JAX when one is found.

Measures the steady-state cost per call of:

1. a jitted function on f32[8] holding one ``debug.callback`` whose callback does nothing;
2. the same with ``ordered=True``;
3. a jitted ``pure_callback`` of ``np.sin`` on f32[1000];
4. the same ``pure_callback`` called eagerly.

Rows 1-2 are measured two ways: "pipelined" issues 100 calls and then one
``effects_barrier()`` (so the callbacks have all run) and reports the time per call;
"each call waits" blocks on the output and calls ``effects_barrier()`` after every call.
Rows 3-4 block on each call's output. The last row is ``effects_barrier()`` alone, with
nothing left to wait for: what the "each call waits" rows pay on top of the call.
Both libraries run the same code.
Ratios are only meaningful within one run: the machines are noisy.

Target: row 1 (pipelined) <= 1.2x JAX.

    JAX_PYTHON=/tmp/jaxvenv/bin/python .venv/bin/python bench/bench_callbacks.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
def noop(*args):
    return None

def with_callback(ordered):
    def f(x):
        lib.debug.callback(noop, x, ordered=ordered)
        return x + 1
    return lib.jit(f)

small = lib.device_put(np.arange(8, dtype=np.float32))
plain, ordered = with_callback(False), with_callback(True)

def pipelined(f, n=100):
    def run():
        for _ in range(n):
            f(small)
        lib.effects_barrier()
    return lambda: best_of(run, 1, 20) / n

def each_waits(f):
    def run():
        f(small).block_until_ready()
        lib.effects_barrier()
    return run

spec = lib.ShapeDtypeStruct((1000,), np.float32)
def host_sin(x):
    return np.sin(x)

def calls_back(x):
    return lib.pure_callback(host_sin, spec, x)

big = lib.device_put(np.linspace(0, 3, 1000, dtype=np.float32))
jitted = lib.jit(calls_back)
assert np.allclose(np.asarray(jitted(big)), np.sin(np.asarray(big)))
lib.block_until_ready(plain(small)); lib.block_until_ready(ordered(small))
lib.effects_barrier()

res = {
  "jit debug.callback f32[8], pipelined (us/call)": pipelined(plain)(),
  "jit debug.callback ordered f32[8], pipelined (us/call)": pipelined(ordered)(),
  "jit debug.callback f32[8], each call waits (us)": best_of(each_waits(plain), 200),
  "jit debug.callback ordered f32[8], each call waits (us)": best_of(each_waits(ordered), 200),
  "jit pure_callback np.sin f32[1000] (us)":
      best_of(lambda: jitted(big).block_until_ready(), 200),
  "eager pure_callback np.sin f32[1000] (us)":
      best_of(lambda: calls_back(big).block_until_ready(), 200),
  "effects_barrier(), nothing pending (us)": best_of(lib.effects_barrier, 200),
}
print(json.dumps(res))
'''


if __name__ == "__main__":
    main(MEASURE, "Target: jit debug.callback (pipelined) <= 1.2x JAX.",
         "pipelined: 100 calls, then one effects_barrier(); each call waits: block on the "
         "output and effects_barrier() after every call (see the module docstring).")
