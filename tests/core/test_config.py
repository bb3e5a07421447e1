"""Tests for plax.core.config: flags, global updates, thread-local overrides, env vars."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import plax
from plax.core import dtypes
from plax.core.config import Config, config, debug_infs, debug_nans, enable_x64

_ALL_FLAGS = {
    "enable_x64", "debug_nans", "debug_infs", "disable_jit", "log_compiles",
    "check_tracer_leaks", "numpy_rank_promotion", "default_matmul_precision", "platforms",
    "num_cpu_devices", "compilation_cache_dir", "numpy_dtype_promotion", "enable_checks",
    "default_device", "threefry_partitionable", "debug_key_reuse", "enable_compilation_cache",
    "compilation_cache_max_size", "persistent_cache_min_compile_time_secs",
    "persistent_cache_min_entry_size_bytes", "explain_cache_misses", "pallas_poison_buffers",
}


# --- reading and updating ------------------------------------------------------
def test_every_flag_is_readable_three_ways():
    assert set(config.values()) == _ALL_FLAGS
    for name in _ALL_FLAGS:
        value = config.read(name)
        assert config.read("jax_" + name) == value
        assert getattr(config, name) == value
        assert getattr(config, "jax_" + name) == value


def test_plax_exports_the_config():
    assert plax.config is config
    assert plax.enable_x64 is enable_x64


def test_update_enable_x64_and_back():
    config.update("jax_enable_x64", True)
    assert config.jax_enable_x64 is True and config.enable_x64 is True
    assert config.read("jax_enable_x64") is True
    assert dtypes.canonicalize_dtype(np.int64) == np.dtype(np.int64)
    config.update("jax_enable_x64", False)
    assert config.jax_enable_x64 is False and config.enable_x64 is False
    assert dtypes.canonicalize_dtype(np.int64) == np.dtype(np.int32)
    config.update("enable_x64", 1)  # the jax_ prefix is optional; values coerce to bool
    assert config.jax_enable_x64 is True


@pytest.mark.parametrize("text, want", [("1", True), ("true", True), ("On", True),
                                        ("0", False), ("false", False), ("no", False)])
def test_update_bool_flag_from_string(text, want):
    config.update("jax_debug_nans", text)
    assert config.jax_debug_nans is want


def test_update_bool_flag_bad_string():
    with pytest.raises(ValueError, match="Flag 'enable_x64' must be a boolean"):
        config.update("jax_enable_x64", "maybe")
    assert config.jax_enable_x64 is False


def test_update_int_flag_coerces():
    config.update("jax_num_cpu_devices", "4")
    assert config.jax_num_cpu_devices == 4
    with pytest.raises(ValueError, match="invalid literal for int"):
        config.update("jax_num_cpu_devices", "four")


def test_unknown_option_raises_attribute_error():
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_foo"):
        config.update("jax_foo", True)
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_foo"):
        config.jax_foo
    with pytest.raises(AttributeError, match="Unrecognized config option: bar"):
        config.read("bar")
    with pytest.raises(AttributeError, match="Unrecognized config option"):
        with config.override("jax_nope", True):
            pass
    assert not hasattr(config, "jax_nope")
    assert not hasattr(config, "_private")


def test_flags_cannot_be_assigned():
    with pytest.raises(AttributeError, match="config.update"):
        config.jax_enable_x64 = True
    assert config.jax_enable_x64 is False


# --- choices -------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["allow", "warn", "raise"])
def test_numpy_rank_promotion_choices(mode):
    config.update("jax_numpy_rank_promotion", mode)
    assert config.jax_numpy_rank_promotion == mode


def test_numpy_rank_promotion_rejects_other_values():
    with pytest.raises(ValueError, match="'allow', 'raise', 'warn', got 'sometimes'"):
        config.update("jax_numpy_rank_promotion", "sometimes")
    assert config.jax_numpy_rank_promotion == "allow"
    with pytest.raises(ValueError, match="numpy_rank_promotion"):
        with config.override("numpy_rank_promotion", "bogus"):
            pass
    assert config.jax_numpy_rank_promotion == "allow"


def test_default_matmul_precision_choices_include_none():
    config.update("jax_default_matmul_precision", "highest")
    assert config.jax_default_matmul_precision == "highest"
    config.update("jax_default_matmul_precision", None)
    assert config.jax_default_matmul_precision is None
    # The choices mix None and strings; the error must still list them.
    with pytest.raises(ValueError, match="must be one of None, .*'bfloat16'.*got 'fastest'"):
        config.update("jax_default_matmul_precision", "fastest")


# --- thread-local overrides ----------------------------------------------------
def test_enable_x64_context_and_nesting():
    assert not config.jax_enable_x64
    with enable_x64():
        assert config.jax_enable_x64 and dtypes.default_float_dtype() == np.dtype(np.float64)
        with enable_x64(False):
            assert not config.jax_enable_x64
            with enable_x64(True):
                assert config.jax_enable_x64
            assert not config.jax_enable_x64
        assert config.jax_enable_x64
    assert not config.jax_enable_x64
    assert dtypes.default_float_dtype() == np.dtype(np.float32)


def test_override_is_undone_by_an_exception():
    with pytest.raises(RuntimeError, match="boom"):
        with enable_x64(True):
            raise RuntimeError("boom")
    assert config.jax_enable_x64 is False


def test_override_beats_global_update_inside_the_block():
    with enable_x64(False):
        config.update("jax_enable_x64", True)
        assert config.jax_enable_x64 is False
    assert config.jax_enable_x64 is True


def test_debug_contexts():
    with debug_nans():
        assert config.jax_debug_nans and not config.jax_debug_infs
        with debug_infs():
            assert config.jax_debug_infs
        with debug_nans(False):
            assert not config.jax_debug_nans
    assert not config.jax_debug_nans and not config.jax_debug_infs


def _read_in_thread(name):
    seen = []
    t = threading.Thread(target=lambda: seen.append(config.read(name)))
    t.start()
    t.join()
    return seen[0]


def test_overrides_are_thread_local():
    with enable_x64(True):
        assert config.jax_enable_x64 is True
        assert _read_in_thread("enable_x64") is False
    config.update("jax_enable_x64", True)
    assert _read_in_thread("enable_x64") is True


def test_override_in_another_thread_is_not_seen_here():
    entered, release = threading.Event(), threading.Event()

    def worker():
        with enable_x64(True):
            entered.set()
            release.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert entered.wait(5)
        assert config.jax_enable_x64 is False
    finally:
        release.set()
        t.join()


# --- environment variables at import -------------------------------------------
_PROBE = ("import json, plax; from plax.core.config import config; "
          "print(json.dumps({'values': config.values(), "
          "'int64': str(plax.dtypes.canonicalize_dtype('int64'))}))")

_ENV_CASES = {  # each case costs one plax import (~0.3 s), so only the essential ones
    "defaults": {},
    "x64_1": {"PLAX_ENABLE_X64": "1"},
    "x64_bad": {"PLAX_ENABLE_X64": "maybe"},
}


@pytest.fixture(scope="module")
def env_runs():
    """Import plax in one subprocess per case (all at once), with only the case's PLAX_ vars."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PLAX_", "JAX_"))}
    procs = {name: subprocess.Popen([sys.executable, "-c", _PROBE], env={**base, **extra},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, extra in _ENV_CASES.items()}
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=60)
        out[name] = (p.returncode, stdout, stderr)
    return out


def _values(env_runs, name):
    rc, stdout, stderr = env_runs[name]
    assert rc == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1])


def test_defaults_without_env(env_runs):
    got = _values(env_runs, "defaults")
    assert got["values"] == {
        "enable_x64": False, "debug_nans": False, "debug_infs": False, "disable_jit": False,
        "log_compiles": False, "check_tracer_leaks": False, "numpy_rank_promotion": "allow",
        "default_matmul_precision": None, "platforms": None, "num_cpu_devices": 1,
        "compilation_cache_dir": None, "numpy_dtype_promotion": "standard",
        "enable_checks": False, "default_device": None, "threefry_partitionable": True,
        "debug_key_reuse": False, "enable_compilation_cache": True,
        "compilation_cache_max_size": 1 << 30, "persistent_cache_min_compile_time_secs": 0.0,
        "persistent_cache_min_entry_size_bytes": 0, "explain_cache_misses": None,
        "pallas_poison_buffers": False,
    }
    assert got["int64"] == "int32"


def test_env_enable_x64_is_honoured_at_import(env_runs):
    got = _values(env_runs, "x64_1")
    assert got["values"]["enable_x64"] is True
    assert got["int64"] == "int64"


def test_env_bad_bool_raises_value_error_at_import(env_runs):
    rc, _, stderr = env_runs["x64_bad"]
    assert rc != 0
    assert "ValueError: Environment variable PLAX_ENABLE_X64 must be a boolean" in stderr
    assert "'maybe'" in stderr


# The parsing of env values, checked in-process on a fresh Config (flags read
# their PLAX_<NAME> variable when they are defined).
def _fresh(monkeypatch, var, text, *define_args, **define_kwargs):
    monkeypatch.setenv(var, text)
    cfg = Config()
    cfg.define(*define_args, **define_kwargs)
    return cfg


@pytest.mark.parametrize("text, want", [("1", True), ("True", True), ("yes", True), (" on ", True),
                                        ("0", False), ("off", False), ("FALSE", False),
                                        ("", False)])
def test_env_bool_values(monkeypatch, text, want):
    cfg = _fresh(monkeypatch, "PLAX_MY_FLAG", text, "my_flag", not want)
    assert cfg.jax_my_flag is want


@pytest.mark.parametrize("text", ["maybe", "2", "enabled"])
def test_env_bad_bool_value(monkeypatch, text):
    with pytest.raises(ValueError, match="Environment variable PLAX_MY_FLAG must be a boolean"):
        _fresh(monkeypatch, "PLAX_MY_FLAG", text, "my_flag", False)


def test_env_choice_and_int_values(monkeypatch):
    choices = {"allow", "warn", "raise"}
    cfg = _fresh(monkeypatch, "PLAX_MODE", "raise", "mode", "allow", kind=str, choices=choices)
    assert cfg.jax_mode == "raise"
    with pytest.raises(ValueError, match="Flag 'mode' must be one of 'allow', 'raise', 'warn'"):
        _fresh(monkeypatch, "PLAX_MODE", "sometimes", "mode", "allow", kind=str, choices=choices)
    cfg = _fresh(monkeypatch, "PLAX_COUNT", "8", "count", 1, kind=int)
    assert cfg.jax_count == 8


def test_env_unset_gives_default(monkeypatch):
    monkeypatch.delenv("PLAX_MY_FLAG", raising=False)
    cfg = Config()
    cfg.define("my_flag", True)
    assert cfg.jax_my_flag is True and cfg.values() == {"my_flag": True}


# --- JAX's flags plax accepts and stores (plax.core.jax_flags) ---------------------------------
@pytest.fixture
def restore_every_flag():
    """Also the flags outside values(), which the conftest does not restore."""
    flags = set(config._by_any_name.values())
    before = {f: f.global_value for f in flags}
    yield
    for flag, value in before.items():
        if flag.global_value != value:  # (through update: some flags set jaxlib's state)
            config.update(flag.name, value)


@pytest.mark.parametrize("name, default, value", [  # JAX 0.10.2's defaults
    ("jax_traceback_filtering", "auto", "off"), ("jax_legacy_prng_key", "allow", "warn"),
    ("jax_platform_name", "", "cpu"), ("jax_use_magma", "auto", "on"),
    ("jax_pprint_use_color", True, False), ("jax_random_seed_offset", 0, 3),
    ("check_vma", False, True), ("jax_exec_time_optimization_effort", 0.0, 0.5),
    ("jax_default_prng_impl", "threefry2x32", "threefry2x32"),
    ("jax_compilation_cache_include_metadata_in_key", False, True),
])
def test_other_jax_flags_are_accepted_and_stored(restore_every_flag, name, default, value):
    assert getattr(config, name) == default and config.read(name) == default
    config.update(name, value)
    assert getattr(config, name) == value and config.source(name) == "update"
    with config.override(name, default):
        assert getattr(config, name) == default
    assert getattr(config, name) == value
    assert name.removeprefix("jax_") not in config.values()  # values(): what plax acts on


def test_every_jax_flag_is_known():
    from plax.core import jax_flags
    tables = (jax_flags.BOOL_FLAGS, jax_flags.INT_FLAGS, jax_flags.FLOAT_FLAGS,
              jax_flags.STRING_FLAGS, jax_flags.CHOICE_FLAGS)
    names = [n for t in tables for n in t] + ["jax_" + n for n in _ALL_FLAGS]
    assert len(names) == 133 == len(set(names))  # JAX 0.10.2 has 133 config options
    for name in names:
        getattr(config, name)


def test_other_jax_flags_check_values(restore_every_flag):
    with pytest.raises(ValueError, match="'traceback_filtering' must be one of 'auto', 'off'"):
        config.update("jax_traceback_filtering", "sometimes")
    with pytest.raises(ValueError, match="invalid literal for int"):
        config.update("jax_random_seed_offset", "three")
    config.update("jax_random_seed_offset", "7")  # as from an environment variable
    assert config.jax_random_seed_offset == 7
    with pytest.raises(ValueError, match="'default_prng_impl' must be one of 'philox2x32', "
                                         "'philox4x32', 'rbg', .*got 'philox8x32'"):
        config.update("jax_default_prng_impl", "philox8x32")
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_no_such_flag"):
        config.update("jax_no_such_flag", True)


def test_jax_environment_variables(monkeypatch):
    monkeypatch.delenv("PLAX_MY_FLAG", raising=False)
    cfg = _fresh(monkeypatch, "JAX_MY_FLAG", "1", "my_flag", False)
    assert cfg.jax_my_flag is True
    cfg = _fresh(monkeypatch, "PLAX_MY_FLAG", "0", "my_flag", True)  # with JAX_MY_FLAG=1:
    assert cfg.jax_my_flag is False  # plax's own variable comes first
    monkeypatch.delenv("PLAX_MY_FLAG")
    with pytest.raises(ValueError, match="Environment variable JAX_MY_FLAG must be a boolean"):
        _fresh(monkeypatch, "JAX_MY_FLAG", "maybe", "my_flag", False)


# --- parse_flags_with_absl: --jax_* arguments from sys.argv ----------------------------------
@pytest.fixture
def argv(monkeypatch, restore_every_flag):
    import plax.core.config as config_module
    monkeypatch.setattr(config_module, "_argv_parsed", False)

    def set_argv(*args):
        monkeypatch.setattr(sys, "argv", ["prog.py", *args])
    return set_argv


def test_parse_flags_with_absl_reads_jax_arguments(argv):
    argv("--jax_enable_x64", "--jax_numpy_rank_promotion=raise", "--jax_foo=3", "data.txt",
         "--jax_traceback_filtering=off", "--other=1", "--", "--jax_debug_nans")
    config.parse_flags_with_absl()
    assert config.jax_enable_x64 is True and config.jax_numpy_rank_promotion == "raise"
    assert config.jax_traceback_filtering == "off" and config.jax_debug_nans is False
    argv("--jax_debug_nans=true")
    config.parse_flags_with_absl()  # once per process, as JAX's
    assert config.jax_debug_nans is False


def test_parse_flags_with_absl_values_and_errors(argv):
    argv("--jax_enable_x64=false", "--jax_compilation_cache_max_size=12", "--jax_debug_nans=1")
    config.parse_flags_with_absl()
    assert config.jax_enable_x64 is False and config.jax_compilation_cache_max_size == 12
    assert config.jax_debug_nans is True
    import plax.core.config as config_module
    config_module._argv_parsed = False
    argv("--jax_debug_infs", "--jax_platforms")
    with pytest.raises(ValueError, match="Missing value for flag --jax_platforms"):
        config.parse_flags_with_absl()
    assert config.jax_debug_infs is False  # nothing is set when an argument is bad
    argv("--jax_numpy_rank_promotion=bogus")
    with pytest.raises(ValueError, match="Illegal value for flag --jax_numpy_rank_promotion"):
        config.parse_flags_with_absl()


def test_parse_flags_with_absl_leaves_absl_flags_parsed():
    # as JAX's: suites that call it rather than absltest.main then read absl flags
    # (jax-md's test helpers read FLAGS.test_srcdir); in a process of its own (absl's state)
    code = ("from absl import flags\nflags.DEFINE_string('data_dir', 'here', 'where')\n"
            "import plax\nassert not flags.FLAGS.is_parsed()\n"
            "plax.config.parse_flags_with_absl()\nprint(flags.FLAGS.data_dir)\n")
    out = subprocess.run([sys.executable, "-c", code, "--jax_enable_x64"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["here"], out.stderr[-2000:]
