"""How many CPU devices plax starts with: jax_num_cpu_devices set by the program (config.update
or JAX_NUM_CPU_DEVICES) > XLA_FLAGS' --xla_force_host_platform_device_count (the environment, or
os.environ before the backend starts) > PLAX_NUM_CPU_DEVICES > 1. Each case is a fresh process;
they run at once."""
import os
import subprocess
import sys

import pytest

import plax

from plax.runtime.cpu_devices import _xla_flags_device_count

FORCE = "--xla_force_host_platform_device_count="
_COUNT = "import plax; print(plax.device_count(), len(plax.devices()), plax.local_device_count())"

CASES = {  # name: (environment, program, the device count JAX 0.10.2 gives in the same case)
    "xla_flags_env": ({"XLA_FLAGS": FORCE + "3"}, _COUNT, 3),
    "xla_flags_beats_plax_variable": ({"XLA_FLAGS": FORCE + "3", "PLAX_NUM_CPU_DEVICES": "8"},
                                      _COUNT, 3),
    "os_environ_before_import": ({"PLAX_NUM_CPU_DEVICES": "8"}, "import os; os.environ['XLA_FLAGS']"
                                 f" = '{FORCE}4'; " + _COUNT, 4),
    "os_environ_after_import": ({}, f"import os, plax; os.environ['XLA_FLAGS'] = '{FORCE}5'; "
                                + _COUNT, 5),
    "jax_variable_beats_xla_flags": ({"XLA_FLAGS": FORCE + "3", "JAX_NUM_CPU_DEVICES": "2"},
                                     _COUNT, 2),
    "config_update_beats_xla_flags": ({"XLA_FLAGS": FORCE + "3"}, "import plax; "
                                      "plax.config.update('jax_num_cpu_devices', 5); "
                                      + _COUNT.removeprefix("import plax; "), 5),
}


@pytest.fixture(scope="module")
def runs():
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PLAX_", "JAX_")) and k != "XLA_FLAGS"}
    procs = {name: subprocess.Popen([sys.executable, "-c", code], env={**base, **env},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, (env, code, _) in CASES.items()}
    return {name: p.communicate(timeout=120) + (p.returncode,) for name, p in procs.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_device_count(runs, name):
    stdout, stderr, rc = runs[name]
    assert rc == 0, stderr[-2000:]
    n = CASES[name][2]
    assert stdout.split() == [str(n)] * 3


@pytest.mark.parametrize("text, want", [
    ("", None), ("--xla_cpu_multi_thread_eigen=false", None), (FORCE + "4", 4),
    (f"--xla_dump_to=/tmp/d  {FORCE}2 ", 2), (f"{FORCE}9 {FORCE}2", 2),  # the last one counts
])
def test_xla_flags_parsing(text, want):
    assert _xla_flags_device_count(text) == want


def test_xla_flags_bad_count():
    with pytest.raises(ValueError, match="--xla_force_host_platform_device_count needs an "
                                         "integer, got 'four'"):
        _xla_flags_device_count(FORCE + "four")


@pytest.mark.parametrize("backend", ["tpu", "gpu", "no_such_platform"])
def test_an_absent_backend_is_an_unknown_backend(backend):
    # JAX's phrase ("Unknown backend"): chex's device assertions match on it.
    with pytest.raises(RuntimeError, match=f"Unknown backend '{backend}'.*Available backends"):
        plax.devices(backend)
