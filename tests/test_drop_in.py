"""JAX programs run on plax unchanged: `python -m plax`, install_as_jax, and the alias's robustness.

Every test here starts a fresh interpreter, because the alias (and jaxlib's
one-time lookup of ``jax.core``) are per process.
"""
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The JAX programs these tests run, kept as data (.jaxpy): they are JAX code, meant to run
# only under `python -m plax` / install_as_jax, so no plax source or test file imports the jax module itself.
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_programs")


def program(name: str) -> str:
    with open(os.path.join(PROGRAMS, name + ".jaxpy")) as f:
        return f.read()


def run_python(args, tmp_path, pythonpath=(), timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), os.path.join(REPO, "src")])
    env.setdefault("PLAX_NUM_CPU_DEVICES", "8")
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_script(tmp_path, body, via="-m plax", pythonpath=()):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    args = ["-m", "plax", str(script)] if via == "-m plax" else [str(script)]
    return run_python(args, tmp_path, pythonpath)


def assert_ok(proc, *expected_lines):
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for want in expected_lines:
        assert want in lines, (want, proc.stdout[-2000:])


def fake_real_jax(tmp_path):
    """A folder holding a package named ``jax`` that stands for a real JAX elsewhere on the path.

    Importing it records the fact in the environment variable-free way: it
    writes a marker file next to itself, so a test can tell it was imported.
    """
    root = tmp_path / "site"
    pkg = root / "jax"
    pkg.mkdir(parents=True)
    marker = tmp_path / "real_jax_imported"
    (pkg / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').write('yes')\n__version__ = '99.0'\n")
    (pkg / "core.py").write_text(
        f"open({str(marker)!r}, 'w').write('core')\nclass ShapedArray:\n"
        "    def __init__(self, *a, **k): raise RuntimeError('real jax.core used')\n")
    return root, marker


TRAINING = program("training")

VMAP_PYTREES = program("vmap_pytrees")

DEVICES = program("devices")


PUBLIC_MODULES = program("public_modules")

EXPLICIT_SHARDING = program("explicit_sharding")

SHARD_MAP = program("shard_map")

PMAP = program("pmap")


def test_pmap_program_runs_through_the_alias(tmp_path):
    assert_ok(run_script(tmp_path, PMAP), "pmap (8, 2) True", "grad True", "gather (1, 8, 2)")


def test_shard_map_program_runs_through_the_alias(tmp_path):
    assert_ok(run_script(tmp_path, SHARD_MAP), "psum (8, 1) True", "jaxpr True", "grad True",
              "error True")


def test_explicit_sharding_program_runs_through_the_alias(tmp_path):
    assert_ok(run_script(tmp_path, EXPLICIT_SHARDING), "type float32[8@data,4]",
              "matmul float32[8@data,16@model] True", "value True",
              "reshard float32[8,4@data]", "grad float32[4,16@model]",
              "error ShardingTypeError True", "auto float32[4,4]")


def test_public_modules_import_through_the_alias(tmp_path):
    assert_ok(run_script(tmp_path, PUBLIC_MODULES), "version True True", "modules True True",
              "ravel [1.0, 1.0, 0.0] [1.0, 1.0]", "tracer True True", "aval True",
              "caught ConcretizationTypeError")


def test_training_step_runs_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, TRAINING), "close True ndarray", "loss_small True",
              "grad_fd True")


def test_vmap_pytrees_and_dtypes_read_back(tmp_path):
    assert_ok(run_script(tmp_path, VMAP_PYTREES), "vmap True", "jacrev True", "tree True",
              "bf16 True", "int4 True")


def test_control_flow_program_runs_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, program("control_flow")), "scan_grad True",
              "fori_rk4 True True", "while_vmap True", "cond_vmap True True", "switch True",
              "map True", "assoc True", "while_rev_error True", "scan_length_error True",
              "jaxpr True")


@pytest.mark.slow  # (long: its numbers are the unit tests' too)
def test_linalg_program_runs_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, program("linalg")), "mean True True", "grad True",
              "descent True", "logdet True True True", "tri True", "vmap True", "expm True",
              "qr QRResult True")


@pytest.mark.slow  # (long: its numbers are the unit tests' too)
def test_random_and_nn_program_gives_jax_numbers_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, program("random_nn")), "x True", "w True", "probs True",
              "att True", "vmap True", "labels True True", "perm True", "gamma_grad True")


def test_fft_program_runs_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, program("fft")), "fft2 True True", "rfftn True",
              "roundtrip True", "jit True", "grad True", "vmap True", "lax True", "freq True",
              "error True")


def test_callback_program_prints_as_jax_does_through_python_m_plax(tmp_path):
    proc = run_script(tmp_path, program("callbacks"))
    assert_ok(proc, "step x=[0. 1. 2.] total=3.0", "jit [0.0, 2.0, 6.0]", "scan 3.0",
              "vmap 0", "vmap 1", "io [1, 2, 3]", "log [0, 1, 2]",
              "vmap_method [[10.0, 10.0], [10.0, 10.0]]", "grad error True")
    lines = proc.stdout.splitlines()
    scan = [line for line in lines if line.startswith("scan c=")]
    assert scan == ["scan c=0.0 x=0.0", "scan c=0.0 x=1.0", "scan c=1.0 x=2.0"], lines


def test_typed_key_program_gives_jax_numbers_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, program("typed_keys")), "dtype key<fry> True ()",
              "losses True", "w0 True", "key True", "vmap True", "reuse caught True")


def test_device_put_jit_and_donation_read_back(tmp_path):
    assert_ok(run_script(tmp_path, DEVICES), "ndev 8", "put True True", "shards 1 True",
              "jit_on_dev True True", "donated True", "get True",
              "array_type ArrayImpl True True False", "deepcopy True True True", "dlpack True",
              "traced True")


def test_install_as_jax_from_python(tmp_path):
    body = program("install_as_jax_from_python")
    assert_ok(run_script(tmp_path, body, via="python"), "same True True True",
              "value [0.0, 1.0, 3.0, 6.0]", "errors True")


def test_alias_wins_over_a_real_jax_on_the_path(tmp_path):
    site, marker = fake_real_jax(tmp_path)
    proc = run_script(tmp_path, TRAINING, pythonpath=[site])
    assert_ok(proc, "close True ndarray", "loss_small True")
    assert not marker.exists()


def test_plain_plax_never_imports_a_real_jax(tmp_path):
    """Without the alias, reading results must not make jaxlib import whatever `jax` is."""
    site, marker = fake_real_jax(tmp_path)
    body = program("plain_plax_never_imports_a_real_jax")
    assert_ok(run_script(tmp_path, body, via="python", pythonpath=[site]),
              "read [0.0, 3.0, 6.0] bfloat16", "shard [0.0, 3.0, 6.0]", "jax_loaded False")
    assert not marker.exists()


def test_jaxlib_lookup_of_jax_core_is_answered_by_plax(tmp_path):
    """A `jax.core` installed after plax started (here: one that raises) is never consulted."""
    body = program("jaxlib_lookup_of_jax_core_is_answered_by_plax")
    proc = run_script(tmp_path, body, via="python")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["float32", "[[2.0,", "2.0],", "[2.0,", "2.0]]", "int8", "[[2,",
                                   "2],", "[2,", "2]]", "bfloat16", "[[2.0,", "2.0],", "[2.0,",
                                   "2.0]]", "complex64", "[[(2+0j),", "(2+0j)],", "[(2+0j),",
                                   "(2+0j)]]"], proc.stdout


def test_install_refuses_when_real_jax_already_imported(tmp_path):
    site, _ = fake_real_jax(tmp_path)
    body = program("install_refuses_when_real_jax_already_imported")
    assert_ok(run_script(tmp_path, body, via="python", pythonpath=[site]), "refused: True",
              "untouched 99.0")


def test_python_m_plax_refuses_when_real_jax_already_imported(tmp_path):
    site, _ = fake_real_jax(tmp_path)
    (tmp_path / "prog.py").write_text("print('ran')\n")
    proc = run_python([os.path.join(PROGRAMS, "start_plax_after_jax.jaxpy")], tmp_path,
                      pythonpath=[site])
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "already imported" in proc.stderr and "ran" not in proc.stdout


def test_python_m_plax_version_help_and_arguments(tmp_path):
    version = run_python(["-m", "plax", "--version"], tmp_path)
    assert version.returncode == 0 and "mirrors the JAX 0.10" in version.stdout
    helptext = run_python(["-m", "plax", "--help"], tmp_path)
    assert helptext.returncode == 0 and "python -m plax SCRIPT" in helptext.stdout
    body = program("python_m_plax_version_help_and_arguments")
    (tmp_path / "prog.py").write_text(textwrap.dedent(body))
    proc = run_python(["-m", "plax", "prog.py", "--lr", "0.1"], tmp_path)
    assert proc.returncode == 3
    assert "argv ['--lr', '0.1'] True" in proc.stdout and "name __main__" in proc.stdout
    missing = run_python(["-m", "plax", "nope.py"], tmp_path)
    assert missing.returncode == 2 and "can't open file" in missing.stderr
    code = run_python(["-m", "plax", "-c", program("print_jax_name")], tmp_path)
    assert code.stdout.strip() == "plax 0.10.2", code.stderr


def test_missing_jax_submodule_does_not_fall_through_to_a_real_jax(tmp_path):
    site, marker = fake_real_jax(tmp_path)
    body = program("missing_jax_submodule_does_not_fall_through_to_a_real_jax")
    assert_ok(run_script(tmp_path, body, pythonpath=[site]), "missing jax.no_such_module True")
    assert not marker.exists()


@pytest.mark.parametrize("files", [
    ["tests/test_vmap.py"],
    pytest.param(["tests/test_jit.py", "tests/test_autodiff.py"], marks=pytest.mark.slow)])
def test_core_suites_pass_through_the_alias(files):
    """plax's own jit, autodiff and vmap tests, once more with `jax` resolving to plax (vmap's
    in `make test`, the longer jit and autodiff files in `make slow`)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    env.setdefault("PLAX_NUM_CPU_DEVICES", "8")
    proc = subprocess.run([sys.executable, "-m", "plax", "-m", "pytest", "-q", "-x",
                           "-p", "no:cacheprovider", *files], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
