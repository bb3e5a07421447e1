"""The extension API's lowering cost: a primitive whose lowering rule is written with
jaxlib's MLIR bindings (``hlo.sine``), against the same program written with lax ops.

Rows, in ms: ``jit(f).lower(x)`` of a fresh chain of 100 ops, built from
1. ``lax.sin`` (plax's own rule);
2. a user primitive ``my_sin`` registered with ``mlir.register_lowering`` and an ``hlo.*``
   rule: "first" is the first lower in the process (the rule's function is built with the
   bindings once), "steady" the best of later lowers of fresh chains;
3. a user primitive lowered with ``mlir.lower_fun`` (plax traces it and lowers it itself).
Both libraries run the same code (JAX with its own extension API).

    JAX_PYTHON=/tmp/jaxenv/bin/python .venv/bin/python bench/bench_extension.py [ROUNDS]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main  # noqa: E402

MEASURE = r'''
import importlib
core = importlib.import_module(lib.__name__ + ".extend.core")
mlir = importlib.import_module(lib.__name__ + ".interpreters.mlir")
from jaxlib.mlir.dialects import stablehlo as hlo

def unary(name):
    p = core.Primitive(name)
    p.def_abstract_eval(lambda x: lib.core.ShapedArray(x.shape, x.dtype))
    return p

bindings_p = unary("my_sin")
mlir.register_lowering(bindings_p, lambda ctx, x: [hlo.sine(x)])
lower_fun_p = unary("my_sin_lower_fun")
mlir.register_lowering(lower_fun_p, mlir.lower_fun(lambda x: lax.sin(x), multiple_results=False))

def chain(op):
    def f(x):
        for _ in range(100):
            x = op(x)
        return x
    return f

x = np.ones(16, np.float32)
def lower_ms(op):
    t = time.perf_counter()
    lib.jit(chain(op)).lower(x)
    return (time.perf_counter() - t) * 1e3

def steady(op):
    return min(lower_ms(op) for _ in range(10))

out = {}
out["lax.sin x100, first lower (ms)"] = lower_ms(lax.sin)
out["lax.sin x100, steady lower (ms)"] = steady(lax.sin)
out["hlo.* rule x100, first lower (ms)"] = lower_ms(bindings_p.bind)
out["hlo.* rule x100, steady lower (ms)"] = steady(bindings_p.bind)
out["lower_fun rule x100, first lower (ms)"] = lower_ms(lower_fun_p.bind)
out["lower_fun rule x100, steady lower (ms)"] = steady(lower_fun_p.bind)
print(json.dumps(out))
'''

if __name__ == "__main__":
    main(MEASURE, "A fresh chain each lower: no jit cache hit; the rules' own caches stay warm.")
