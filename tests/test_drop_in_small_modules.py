"""jax.ops, jax.scipy.fft, jax.monitoring and lax.pswapaxes reached by a JAX program under
`python -m plax`; `import plax` leaves them unloaded until first use."""
from tests.test_drop_in import assert_ok, run_script

PROGRAM = """
    import sys
    import numpy as np
    import jax
    loaded = [m for m in ("plax.ops", "plax.monitoring", "plax.scipy.fft") if m in sys.modules]
    print("unloaded", loaded == [])
    import jax.ops
    import jax.monitoring
    from jax.scipy.fft import dct, idct
    import jax.numpy as jnp

    print("segments", jax.ops.segment_sum(jnp.arange(5.0), jnp.array([0, 0, 2, 2, 9]), 3).tolist())
    x = np.array([1.0, 2.0, 4.0], np.float32)
    print("dct", [round(float(v), 4) for v in dct(x)],
          np.allclose(idct(dct(x)), x, atol=1e-6))
    seen = []
    jax.monitoring.register_event_listener(lambda event, **kw: seen.append((event, kw)))
    jax.monitoring.record_event("/prog/step", stage="train")
    print("events", seen)
    swapped = jax.vmap(lambda v: jax.lax.pswapaxes(v, "i", 0), axis_name="i")(
        np.arange(4.0).reshape(2, 2))
    print("swapped", swapped.tolist())
"""


def test_small_modules_through_python_m_plax(tmp_path):
    # dct([1, 2, 4]) = 2 * sum_n x_n cos(pi k (2n + 1) / 6): 14, -5.1962, 1
    assert_ok(run_script(tmp_path, PROGRAM), "unloaded True", "segments [1.0, 0.0, 5.0]",
              "dct [14.0, -5.1962, 1.0] True", "events [('/prog/step', {'stage': 'train'})]",
              "swapped [[0.0, 2.0], [1.0, 3.0]]")
