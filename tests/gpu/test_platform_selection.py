"""Finding the CUDA plugin and choosing platforms, on a machine without a GPU: fake plugin
paths stand in for a broken install. A platform tried by default that fails warns once and
plax runs on the CPU; one the user named (PLAX_PLATFORMS, jax_platforms) must start or raise,
unless its plugin is not installed at all and other platforms are named too.
Each case runs in a fresh process (backends start once per process)."""
import warnings

import pytest
from helpers import PLATFORM_PROBE, run_platform_probe  # tests/ is on sys.path (conftest.py)

from plax.runtime import cuda_plugin


@pytest.fixture
def broken_library(tmp_path):
    path = tmp_path / "xla_cuda_plugin.so"
    path.write_text("not a shared library")
    return path


def test_without_a_plugin_only_the_cpu_starts_quietly():
    assert cuda_plugin.find() is None  # (the test environment has no CUDA plugin)
    run = run_platform_probe({})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "DEVICES ['cpu'" in run.stdout and " cpu 6" in run.stdout
    assert "Unable to initialize" not in run.stderr


def test_a_broken_plugin_warns_once_and_falls_back_to_the_cpu(broken_library):
    run = run_platform_probe({"PJRT_NAMES_AND_LIBRARY_PATHS": f"cuda:{broken_library}"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert " cpu 6" in run.stdout
    assert run.stderr.count("Unable to initialize backend 'cuda'") == 1
    assert str(broken_library) in run.stderr and "PLAX_PLATFORMS=cpu" in run.stderr


@pytest.mark.parametrize("platforms", ["cuda", "gpu", "cuda,cpu"])
def test_a_named_platform_that_cannot_start_is_an_error(broken_library, platforms):
    run = run_platform_probe({"PJRT_NAMES_AND_LIBRARY_PATHS": f"cuda:{broken_library}",
                "PLAX_PLATFORMS": platforms})
    assert run.returncode != 0
    assert "RuntimeError: Unable to initialize backend 'cuda'" in run.stderr
    assert "could not be loaded" in run.stderr and str(broken_library) in run.stderr


def test_naming_cuda_without_a_plugin_says_how_to_install_one():
    run = run_platform_probe({"PLAX_PLATFORMS": "cuda"})
    assert "Unable to initialize backend 'cuda': no CUDA plugin is installed" in run.stderr
    assert "plax[cuda13]" in run.stderr


@pytest.mark.parametrize("variable", ["PLAX_PLATFORMS", "JAX_PLATFORMS"])
def test_a_named_platform_with_no_plugin_installed_is_passed_over(variable):
    # as JAX 0.10.2: JAX_PLATFORMS=cuda,cpu without a CUDA plugin runs on the CPU, quietly
    run = run_platform_probe({variable: "cuda,cpu"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "DEVICES ['cpu'" in run.stdout and " cpu 6" in run.stdout
    assert "Unable to initialize" not in run.stderr


def test_naming_only_the_cpu_never_touches_the_plugin(broken_library):
    run = run_platform_probe({"PJRT_NAMES_AND_LIBRARY_PATHS": f"cuda:{broken_library}",
                "PLAX_PLATFORMS": "cpu"})
    assert run.returncode == 0 and " cpu 6" in run.stdout
    assert "Unable to initialize" not in run.stderr


def test_jax_platforms_is_read_too_and_unknown_names_are_refused():
    run = run_platform_probe({"JAX_PLATFORMS": "cpu,metal"})
    assert "Unable to initialize backend 'metal': unknown platform" in run.stderr
    run = run_platform_probe({"JAX_PLATFORMS": "cpu"})
    assert run.returncode == 0 and " cpu 6" in run.stdout


def test_the_plugin_is_found_in_a_jax_plugins_folder_without_importing_it(tmp_path):
    # A jax_plugins package whose __init__ would fail on import (as the real one does
    # without jax): discovery must only look at the files.
    folder = tmp_path / "jax_plugins" / "xla_cuda13"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("raise ImportError('imports jax')\n")
    (folder / "xla_cuda_plugin.so").write_text("not a shared library")
    code = ("from plax.runtime import cuda_plugin\n"
            "p = cuda_plugin.find()\nprint('FOUND', p.library, p.kernels, p.found_by)\n") \
        + PLATFORM_PROBE
    run = run_platform_probe({}, code=code, path_extra=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"FOUND {folder / 'xla_cuda_plugin.so'} None the xla_cuda13 package" in run.stdout
    assert " cpu 6" in run.stdout
    assert run.stderr.count("Unable to initialize backend 'cuda'") == 1


def test_client_settings_take_the_plax_names():
    env = {"PLAX_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5",
           "PLAX_PYTHON_CLIENT_ALLOCATOR": "platform", "PLAX_CLIENT_MEM_FRACTION": ".3"}
    assert cuda_plugin.client_settings(env) == {
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
        "XLA_CLIENT_MEM_FRACTION": ".3"}
    assert cuda_plugin.client_settings({"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}) == {}


def test_nvidia_libraries_that_cannot_load_are_skipped(tmp_path, monkeypatch):
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.13").write_text("not a shared library")
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cuda_plugin.preload_nvidia_libraries() == []


@pytest.mark.parametrize("platform,named", [("cpu", "cpu"), ("cuda", "gpu"), ("rocm", "gpu")])
def test_default_backend_names_gpus_gpu_as_jax_does(monkeypatch, platform, named):
    import plax
    from plax.runtime import xla
    monkeypatch.setattr(xla, "default_platform", lambda: platform)
    assert plax.default_backend() == named
