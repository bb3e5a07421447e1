"""jax.ops, jax.scipy.fft, jax.monitoring and lax.pswapaxes reached by a JAX program under
`python -m plax`; `import plax` leaves them unloaded until first use."""
from tests.test_drop_in import assert_ok, program, run_script

PROGRAM = program("small_modules")


def test_small_modules_through_python_m_plax(tmp_path):
    # dct([1, 2, 4]) = 2 * sum_n x_n cos(pi k (2n + 1) / 6): 14, -5.1962, 1
    assert_ok(run_script(tmp_path, PROGRAM), "unloaded True", "segments [1.0, 0.0, 5.0]",
              "dct [14.0, -5.1962, 1.0] True", "events [('/prog/step', {'stage': 'train'})]",
              "swapped [[0.0, 2.0], [1.0, 3.0]]")
