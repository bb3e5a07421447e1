"""A JAX program using jax.experimental.pallas (interpret mode) under `python -m plax`."""
from tests.test_drop_in import assert_ok, program, run_script


def test_pallas_program_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, program("pallas_kernels")),
              "add [0.0, 11.0, 22.0, 33.0, 44.0, 55.0, 66.0, 77.0]",
              "module plax.experimental.pallas")
