"""Eager op time and host<->device transfer time, plax next to JAX when one is found.

JAX is never required: it is used if `import jax` works here, or if the
environment variable JAX_PYTHON names a Python interpreter that has it
(e.g. a scratch venv outside the repo). Ratios are only meaningful within
one run: the machines are noisy.

    .venv/bin/python bench/bench_eager.py
    JAX_PYTHON=/tmp/jaxref/bin/python .venv/bin/python bench/bench_eager.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import report  # noqa: E402

# The measurement runs the same code against either library: `lib` is plax or
# jax, `jnp` its numpy module, `lax` its lax module; harness.PRELUDE adds the timers.
MEASURE = r'''
small = lib.device_put(np.ones(8, np.float32))
big = lib.device_put(np.ones((1000, 1000), np.float32))
host = np.ones((1024, 256), np.float32)  # 1 MiB
res = {
  "eager add f32[8] (us)": best_of(lambda: lax.add(small, small).block_until_ready(), 300),
  "eager sin f32[8] (us)": best_of(lambda: lax.sin(small).block_until_ready(), 300),
  "eager x*2+1 f32[8] via numpy ops (us)": best_of(lambda: (small * 2 + 1).block_until_ready(), 200),
  "eager add f32[1000,1000] (us)": best_of(lambda: lax.add(big, big).block_until_ready(), 50),
  # jnp functions under eager transformations: one program per call, as JAX's jitted ones
  "eager grad of sum(tanh(2x+1)/3) f32[8] (us)": best_of(
      lambda: lib.grad(lambda x: jnp.sum(jnp.tanh(x * 2.0 + 1.0) / 3.0))(small)
      .block_until_ready(), 50),
  "eager vmap of the same over f32[4,8] (us)": best_of(
      lambda: lib.vmap(lambda x: jnp.sum(jnp.tanh(x * 2.0 + 1.0) / 3.0))(
          jnp.ones((4, 8))).block_until_ready(), 50),
  "device_put 1 MiB (us)": best_of(lambda: lib.device_put(host).block_until_ready(), 100),
  "device_get 1 MiB (us)": best_of(lambda: np.asarray(lax.add(big, 0.0)), 20),
}
print(json.dumps(res))
'''


def main():
    report(MEASURE, "")


if __name__ == "__main__":
    main()
