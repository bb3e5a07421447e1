"""Finding libtpu and starting the TPU platform, on a machine without a TPU: fake library
paths and a fake ``libtpu`` package stand in (found, missing, broken), and the errors a
held chip gives are checked on their messages. Platform choices run in a fresh process each
(backends start once per process)."""

import pytest
from helpers import run_platform_probe  # tests/ is on sys.path (conftest.py)

from plax.runtime import platforms, tpu_plugin


@pytest.fixture
def broken_library(tmp_path):
    path = tmp_path / "libtpu.so"
    path.write_text("not a shared library")
    return path


def test_tpu_is_tried_first_where_libtpu_is_found(monkeypatch, broken_library):
    assert list(platforms.FACTORIES)[:3] == ["tpu", "cuda", "cpu"]  # JAX's order
    monkeypatch.delenv("PLAX_PLATFORMS", raising=False)
    monkeypatch.delenv("TPU_LIBRARY_PATH", raising=False)
    names, named = platforms.requested(platforms.FACTORIES)
    assert "tpu" not in names and not named  # (no libtpu in the test environment)
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(broken_library))
    assert platforms.requested(platforms.FACTORIES)[0][0] == "tpu"


def test_library_path_wins_when_it_names_a_file(monkeypatch, broken_library, tmp_path):
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(broken_library))
    assert tpu_plugin.find() == tpu_plugin.Library(str(broken_library), "TPU_LIBRARY_PATH")
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(tmp_path / "missing.so"))
    assert tpu_plugin.find() is None  # not a file, and no libtpu package here


def test_the_libtpu_package_is_found_without_importing_it(monkeypatch, tmp_path):
    package = tmp_path / "libtpu"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('importing libtpu is not needed')")
    (package / "libtpu.so").write_text("")
    monkeypatch.delenv("TPU_LIBRARY_PATH", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = tpu_plugin.find()
    assert found == tpu_plugin.Library(str(package / "libtpu.so"), "the libtpu package")


@pytest.mark.parametrize("text, options", [
    (None, {}), ("", {}), ("a:1", {"a": "1"}),
    ("max_inflight_computations:32;num_slices:1",
     {"max_inflight_computations": "32", "num_slices": "1"}),
])
def test_client_options_as_jax_reads_them(text, options):
    assert tpu_plugin.client_options(text) == options


def test_client_option_with_two_separators_is_refused():
    with pytest.raises(RuntimeError, match="Multiple ':' separators for option in "
                                           "jax_pjrt_client_create_options: 'a:b:c'"):
        tpu_plugin.client_options("a:b:c")


def test_a_held_chip_is_explained():
    library = tpu_plugin.Library("/x/libtpu.so", "the libtpu package")
    said = tpu_plugin.explain_failure(RuntimeError(
        "ABORTED: The TPU is already in use by process with pid 123. Not attempting to load "
        "libtpu.so in this process."), library)
    assert "held by another process" in said and "pid 123" in said
    assert "PLAX_PLATFORMS=cpu" in said
    said = tpu_plugin.explain_failure(RuntimeError(
        "INTERNAL: Internal error when accessing libtpu multi-process lockfile."), library)
    assert "held by another process" in said
    said = tpu_plugin.explain_failure(RuntimeError("invalid ELF header"), library)
    assert said == ("libtpu at /x/libtpu.so (found through the libtpu package) could not "
                    "start: invalid ELF header")


def test_a_broken_libtpu_warns_once_and_falls_back_to_the_cpu(broken_library):
    run = run_platform_probe({"TPU_LIBRARY_PATH": str(broken_library)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "DEVICES ['cpu'" in run.stdout and " cpu 6" in run.stdout
    assert run.stderr.count("Unable to initialize backend 'tpu'") == 1
    assert str(broken_library) in run.stderr and "PLAX_PLATFORMS=cpu" in run.stderr


@pytest.mark.parametrize("variable, value", [("PLAX_PLATFORMS", "tpu"),
                                             ("JAX_PLATFORMS", "tpu,cpu")])
def test_a_named_tpu_that_cannot_start_is_an_error(broken_library, variable, value):
    run = run_platform_probe({"TPU_LIBRARY_PATH": str(broken_library), variable: value})
    assert run.returncode != 0
    assert "RuntimeError: Unable to initialize backend 'tpu'" in run.stderr
    assert "could not start" in run.stderr and str(broken_library) in run.stderr


def test_naming_tpu_without_libtpu_says_how_to_install_it():
    run = run_platform_probe({"PLAX_PLATFORMS": "tpu"})
    assert run.returncode != 0
    assert "Unable to initialize backend 'tpu': libtpu is not installed" in run.stderr
    assert "plax[tpu]" in run.stderr


def test_a_named_tpu_without_libtpu_is_passed_over_beside_the_cpu():
    run = run_platform_probe({"JAX_PLATFORMS": "tpu,cpu"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "DEVICES ['cpu'" in run.stdout and "Unable to initialize" not in run.stderr
