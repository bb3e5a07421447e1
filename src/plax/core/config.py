"""Configuration flags.

Each flag has a default, environment variables ``PLAX_<NAME>`` (first) and ``JAX_<NAME>``
that override the default at import, ``config.update("jax_<name>", value)`` to change it,
``config.jax_<name>`` to read it, and a context manager to change it for a block
(thread-local). ``config.parse_flags_with_absl()`` reads ``--jax_<name>=value`` arguments
from ``sys.argv`` as JAX's does (absl itself is not needed).

The flags defined below are plax's own; ``config.values()`` lists them. Every other flag of
JAX 0.10.2 (``plax.core.jax_flags``: jax_traceback_filtering, jax_platform_name, the
GPU/TPU/Pallas ones, ...) is accepted, checked and stored the same way so that programs
setting it run; plax acts on the few that module names (PRNG choices, transfer guards,
no_tracing/no_execution, ...). A name JAX does not know raises AttributeError ("Unrecognized
config option"), as in JAX.

``State`` (JAX's config State: ``.value``, a context manager when called) and
``UserContext`` (``make_user_context``) are the objects plax.api.runtime_flags exposes at
the top level.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading

from plax.core import jax_flags

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _parse_bool(text: str, name: str, env_var: str | None = None) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    where = f"Environment variable {env_var}" if env_var else f"Flag {name!r}"
    raise ValueError(f"{where} must be a boolean (1/0/true/false), got {text!r}.")


def _env_value(name: str):
    """``(variable, text)`` of the environment variable setting flag ``name``: PLAX_<NAME>,
    else JAX's JAX_<NAME>; ``(None, None)`` when neither is set."""
    for var in ("PLAX_" + name.upper(), "JAX_" + name.upper()):
        text = os.environ.get(var)
        if text is not None:
            return var, text
    return None, None


_counting = threading.Lock()  # guards the process-wide count of active overrides


class _Flag:
    def __init__(self, name, default, kind, help, choices=None, validator=None):
        self.name = name
        self.kind = kind
        self.help = help
        self.choices = choices
        self.validator = validator
        var, env = _env_value(name)
        self.global_value = self._coerce(env, env_var=var) if env is not None else default
        self.source = var or "default"  # where global_value came from (see Config.source)

    def _coerce(self, value, env_var=None):
        if self.kind is bool:
            if isinstance(value, str):
                return _parse_bool(value, self.name, env_var)
            return bool(value)
        if self.kind is int:
            return int(value)
        if self.validator is not None:
            return self.validator(value)
        if self.choices is not None and value is not None and value not in self.choices:
            # None first: the choices may mix None and strings, which do not compare.
            allowed = ", ".join(repr(c) for c in sorted(self.choices,
                                                        key=lambda c: (c is not None, str(c))))
            raise ValueError(f"Flag {self.name!r} must be one of {allowed}, got {value!r}.")
        return value


class Config:
    """Holds every flag. Read a flag as ``config.<name>`` or ``config.jax_<name>``."""

    def __init__(self):
        object.__setattr__(self, "_active_overrides", [0])  # any thread inside override()?
        object.__setattr__(self, "_flags", {})
        object.__setattr__(self, "_by_any_name", {})  # "x" and "jax_x" -> flag
        object.__setattr__(self, "_plain", [True])  # see plain_dispatch()
        object.__setattr__(self, "_local", threading.local())
        object.__setattr__(self, "_listeners", [])
        # See install_override_hook.
        object.__setattr__(self, "_override_hook", [lambda overridden: None])
        object.__setattr__(self, "_global_trace_context", [None])  # see trace_context()

    def define(self, name, default, kind=bool, help="", choices=None, validator=None,
               listed=True):
        """A flag read as ``name`` or ``jax_<name>``; ``listed=False`` keeps it out of
        ``values()`` (JAX's flags that plax accepts and stores, see ``plax.core.jax_flags``)."""
        flag = _Flag(name, default, kind, help, choices, validator)
        if listed:
            self._flags[name] = flag
        self._by_any_name[name] = self._by_any_name["jax_" + name] = flag

    def _flag(self, name: str) -> _Flag:
        try:
            return self._by_any_name[name]
        except KeyError:
            raise AttributeError(f"Unrecognized config option: {name}") from None

    def _overrides(self) -> dict:
        d = getattr(self._local, "overrides", None)
        if d is None:
            d = self._local.overrides = {}
        return d

    def read(self, name: str):
        flag = self._flag(name)
        if not self._active_overrides[0]:  # the common case: no context manager active
            return flag.global_value
        over = self._overrides()
        return over[flag.name] if flag.name in over else flag.global_value

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.read(name)

    def __setattr__(self, name, value):
        raise AttributeError("Set flags with config.update(name, value).")

    @property
    def x64_enabled(self) -> bool:
        """Whether 64-bit types are on (``jax_enable_x64``), as JAX's ``config.x64_enabled``."""
        return bool(self.read("enable_x64"))

    def plain_dispatch(self) -> bool:
        """True when no flag changes how a jitted call runs (no disable_jit, debug_nans,
        debug_infs, and no override context active): one cheap check on the fast path."""
        return self._plain[0] and not self._active_overrides[0]

    def trace_context(self) -> tuple:
        """The values of the flags that change what tracing produces (a jit cache key part)."""
        if not self._active_overrides[0]:
            ctx = self._global_trace_context[0]
            if ctx is None:
                ctx = self._global_trace_context[0] = tuple(
                    self._by_any_name[n].global_value for n in TRACE_FLAGS)
            return ctx
        return tuple(self.read(n) for n in TRACE_FLAGS)

    def update(self, name: str, value) -> None:
        """Set a flag globally, e.g. ``config.update("jax_enable_x64", True)``."""
        flag = self._flag(name)
        flag.global_value = flag._coerce(value)
        flag.source = "update"
        self._plain[0] = not any(self._by_any_name[n].global_value for n in _DISPATCH_FLAGS)
        self._global_trace_context[0] = None
        for fn in self._listeners:
            fn(flag.name)

    @contextlib.contextmanager
    def override(self, name: str, value):
        """Set a flag for the current thread inside a ``with`` block."""
        flag = self._flag(name)
        over = self._overrides()
        missing = object()
        old = over.get(flag.name, missing)
        over[flag.name] = flag._coerce(value)
        with _counting:  # (threads entering and leaving at once must not lose a count)
            self._active_overrides[0] += 1
        self._override_hook[0](self._override_signature(over))
        try:
            yield
        finally:
            with _counting:
                self._active_overrides[0] -= 1
            if old is missing:
                del over[flag.name]
            else:
                over[flag.name] = old
            self._override_hook[0](self._override_signature(over))

    @staticmethod
    def _override_signature(over: dict) -> tuple:
        def hashable(v):
            try:
                hash(v)
                return v
            except TypeError:
                return repr(v)
        return tuple(sorted((name, hashable(v)) for name, v in over.items()))

    def dispatch_flags_off(self) -> bool:
        """No flag that makes jitted calls run through Python (disable_jit, debug_nans, ...)
        is on for this thread."""
        return not any(self.read(n) for n in _DISPATCH_FLAGS)

    def source(self, name: str) -> str:
        """Where the flag's global value came from: "default", "update" (config.update), or
        the environment variable that set it ("PLAX_<NAME>" or "JAX_<NAME>")."""
        return self._flag(name).source

    def install_override_hook(self, hook) -> None:
        """Report this thread's overridden flags (a sorted tuple of (name, value); () when
        none) to ``hook`` on each change (jit's C++ dispatch keys on it)."""
        self._override_hook[0] = hook

    def values(self) -> dict:
        """The value of every flag plax acts on (JAX's other flags are not listed)."""
        return {name: self.read(name) for name in self._flags}

    def parse_flags_with_absl(self) -> None:
        """Set flags from ``--jax_<name>=value`` arguments in ``sys.argv`` (before any ``--``),
        once per process, as JAX's does: a boolean flag given bare (``--jax_enable_x64``) is
        True; unknown ``--jax`` names are left alone; a bad value raises and sets nothing."""
        global _argv_parsed
        if _argv_parsed:
            return
        updates = []
        for arg in itertools.takewhile(lambda a: a != "--", sys.argv[1:]):
            if not arg.startswith("--jax"):
                continue
            name, has_value, text = arg[2:].partition("=")
            flag = self._by_any_name.get(name) if name.startswith("jax") else None
            if flag is None:
                continue
            if not has_value:
                if not (flag.kind is bool or flag.validator is _optional_bool):
                    raise ValueError(f"Missing value for flag --{name}: pass it as "
                                     f"--{name}=VALUE (a separate argument is not read).")
                text = "true"
            try:
                updates.append((flag.name, flag._coerce(text)))
            except ValueError as e:
                raise ValueError(f"Illegal value for flag --{name}={text}: {e}") from None
        for name, value in updates:
            self.update(name, value)
        _argv_parsed = True
        _mark_absl_flags_parsed()


def _mark_absl_flags_parsed() -> None:
    """As JAX's parse_flags_with_absl, leave absl's flags parsed (with their defaults): absl
    test helpers read them (``FLAGS.test_srcdir``) in suites that call it instead of
    ``absltest.main``. absl is optional: without it there is nothing to mark."""
    try:
        from absl import flags
    except ImportError:
        return
    if not flags.FLAGS.is_parsed():
        flags.FLAGS([sys.argv[0] if sys.argv else ""], known_only=True)


_argv_parsed = False  # parse_flags_with_absl reads sys.argv once, as JAX's does


# Flags under which a jitted call needs Python (not jaxlib's C++ fast path) when set globally.
_DISPATCH_FLAGS = ("disable_jit", "debug_nans", "debug_infs", "debug_key_reuse", "no_execution")
# Flags that change the jaxpr a function traces to: jitted functions retrace when they change.
# (A list: make_user_context adds its contexts.)
TRACE_FLAGS = ["enable_x64", "numpy_rank_promotion", "numpy_dtype_promotion",
               "default_matmul_precision", "threefry_partitionable", "debug_key_reuse",
               "softmax_custom_jvp", "allow_f16_reductions", "auto_pcast",
               # (plax.numpy's functions stage error checks when these say "raise")
               "error_checking_behavior_nan", "error_checking_behavior_divide",
               "error_checking_behavior_oob"]


def _check_default_device(value):
    # A Device is recognised by its attributes: importing jaxlib here would be circular.
    if value is None or isinstance(value, str) or (hasattr(value, "platform")
                                                   and hasattr(value, "client")):
        return value
    raise ValueError("default_device must be passed either a Device object (e.g. "
                     "plax.devices('cpu')[0]) or a platform name string such as 'cpu', got: "
                     f"{value!r}.")


def _optional_bool(value):
    """A three-valued flag: None (unset), True or False (from a bool or a string)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("none", "unset", "default"):
        return None
    if isinstance(value, str):
        return _parse_bool(value, "explain_cache_misses")
    return bool(value)


config = Config()
config.define("enable_x64", False, help="Use 64-bit types by default.")
config.define("debug_nans", False, help="Raise FloatingPointError when a computation makes a NaN.")
config.define("debug_infs", False, help="Raise FloatingPointError when a computation makes an inf.")
config.define("disable_jit", False, help="Run jitted functions op by op.")
config.define("log_compiles", False, help="Log every XLA compilation.")
config.define("explain_cache_misses", None, kind=object, validator=_optional_bool,
              help="Log why a jitted function retraces: None (default) from its 5th retrace "
                   "on, each cause once; True every trace; False never.")
config.define("check_tracer_leaks", False, help="Check for leaked tracers after each transformation.")
config.define("numpy_rank_promotion", "allow", kind=str, choices={"allow", "warn", "raise"},
              help="How plax.numpy treats implicit rank promotion.")
config.define("default_matmul_precision", None, kind=str,
              choices={None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
                       # the dot algorithm presets (lax.DotAlgorithmPreset's names)
                       "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
                       "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32",
                       "BF16_BF16_BF16", "BF16_BF16_F32", "BF16_BF16_F32_X3",
                       "BF16_BF16_F32_X6", "BF16_BF16_F32_X9", "TF32_TF32_F32",
                       "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64"},
              help="Default precision of matmuls and convolutions: a Precision name, or a dot "
                   "algorithm preset's.")
config.define("numpy_dtype_promotion", "standard", kind=str, choices={"standard", "strict"},
              help="'strict' disallows implicit promotion between different dtypes in plax.numpy.")
config.define("enable_checks", False, help="Type-check every traced jaxpr (slower).")
config.define("threefry_partitionable", True,
              help="Lay out random bits so each element is hashed from its own index (JAX's "
                   "default since 0.5); False gives JAX's original layout.")
config.define("debug_key_reuse", False,
              help="Raise KeyReuseError when a typed PRNG key is consumed twice.")
# set_xla_metadata and compute_on set these while they are open: what they attach to the
# ops staged then is part of a trace, so they are part of jit's key.
config.define("xla_metadata_context_manager", None, kind=object, listed=False,
              help="The XLA metadata set_xla_metadata attaches to ops staged now (set by it).")
config.define("compute_on_context_manager", None, kind=object, listed=False,
              help="Where compute_on places ops staged now (set by it).")
TRACE_FLAGS += ["xla_metadata_context_manager", "compute_on_context_manager"]
config.define("pallas_poison_buffers", False,
              help="Pallas TPU kernels fill the buffers they allocate (run_scoped, empty_ref) "
                   "with poison values (NaN, the smallest integer, True) before use.")
TRACE_FLAGS += ["pallas_poison_buffers"]
config.define("default_device", None, kind=object, validator=_check_default_device,
              help="Device (or platform name) for new arrays and uncommitted computations.")
config.define("platforms", None, kind=str, help="Comma-separated platforms to use, e.g. 'cpu'.")
config.define("num_cpu_devices", 1, kind=int, help="Number of virtual CPU devices.")
config.define("compilation_cache_dir", None, kind=str,
              help="Directory of the persistent compilation cache (None: $PLAX_CACHE_DIR, "
                   "else ~/.cache/plax/xla).")
config.define("enable_compilation_cache", True,
              help="Keep compiled programs on disk and reuse them in later processes.")
config.define("compilation_cache_max_size", 1 << 30, kind=int,
              help="Bound in bytes of the persistent compilation cache's directory; the least "
                   "recently used entries go first (-1: no bound, 0: cache off).")
config.define("persistent_cache_min_compile_time_secs", 0.0, kind=float, validator=float,
              help="Only programs that took at least this long to compile are written.")
config.define("persistent_cache_min_entry_size_bytes", 0, kind=int,
              help="Only entries of at least this many bytes are written (0 or -1: any).")


def _optional_int(value):
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value)
    raise ValueError(f"an int config value must be None or an int, got {value!r}.")


def _optional_float(value):
    return None if value is None else float(value)


def _unprefixed(name: str) -> str:
    return name[4:] if name.startswith("jax_") else name


_STORED = "JAX flag; plax accepts and stores it but does not act on it (see plax.core.jax_flags)."
for _name, _default in jax_flags.BOOL_FLAGS.items():
    config.define(_unprefixed(_name), _default, help=_STORED, listed=False)
for _name, _default in jax_flags.INT_FLAGS.items():
    config.define(_unprefixed(_name), _default, kind=object, validator=_optional_int,
                  help=_STORED, listed=False)
for _name, _default in jax_flags.FLOAT_FLAGS.items():
    config.define(_unprefixed(_name), _default, kind=object, validator=_optional_float,
                  help=_STORED, listed=False)
for _name, _default in jax_flags.STRING_FLAGS.items():
    config.define(_unprefixed(_name), _default, kind=str, help=_STORED, listed=False)
for _name, (_default, _choices) in jax_flags.CHOICE_FLAGS.items():
    config.define(_unprefixed(_name), _default, kind=str, choices=set(_choices), help=_STORED,
                  listed=False)
config._plain[0] = not any(config._by_any_name[n].global_value for n in _DISPATCH_FLAGS)


def enable_x64(new_val: bool = True):
    """Context manager that turns 64-bit types on (or off) for a block."""
    return config.override("enable_x64", new_val)


def debug_nans(new_val: bool = True):
    return config.override("debug_nans", new_val)


def debug_infs(new_val: bool = True):
    return config.override("debug_infs", new_val)


def threefry_partitionable(new_val: bool = True):
    """Context manager: the counter layout of random bits (True: JAX's default since 0.5)."""
    return config.override("threefry_partitionable", new_val)


def check_tracer_leaks(new_val: bool = True):
    """Context manager checking for leaked tracers after each transformation."""
    return config.override("check_tracer_leaks", new_val)


checking_leaks = check_tracer_leaks


def debug_key_reuse(new_val: bool = True):
    """Context manager: raise KeyReuseError when a typed PRNG key is consumed twice."""
    return config.override("debug_key_reuse", new_val)


def log_compiles(new_val: bool = True):
    """Context manager logging (at WARNING, logger "plax") every trace and compilation."""
    return config.override("log_compiles", new_val)


def enable_checks(new_val: bool = True):
    """Context manager type-checking every traced jaxpr."""
    return config.override("enable_checks", new_val)


def numpy_rank_promotion(new_val: str):
    """Context manager: plax.numpy broadcasting across ranks is 'allow'ed, 'warn's or 'raise's."""
    return config.override("numpy_rank_promotion", new_val)


def numpy_dtype_promotion(new_val: str):
    """Context manager: 'standard' implicit dtype promotion, or 'strict' (same dtypes only)."""
    return config.override("numpy_dtype_promotion", new_val)


def default_matmul_precision(new_val):
    """Context manager: the precision of matmuls and convolutions given ``precision=None``."""
    return config.override("default_matmul_precision", new_val)


def default_device(new_val):
    """Context manager: where new arrays and computations without committed inputs go."""
    return config.override("default_device", new_val)


# --- flags as JAX's config States ----------------------------------------------------------
_NO_VALUE = object()


class State:
    """A flag as JAX exposes it at the top level (``jax.no_tracing``, ``jax.transfer_guard_
    host_to_device``, ...): ``.value`` is the value in effect in this thread; calling it
    with a value gives a context manager (also usable as a decorator) setting the flag for
    this thread; ``get_global``/``set_global`` read and set the process-wide value.

    ``on_local(value) -> undo`` is called when a block sets the value for this thread, and the
    ``undo`` it returns when the block ends (for state mirrored into jaxlib, such as the
    transfer guards). Boolean flags default to True when called without a value."""

    def __init__(self, name: str, on_local=None):
        self._flag = config._flag(name)
        self._on_local = on_local

    @property
    def name(self) -> str:
        return "jax_" + self._flag.name if not self._flag.name.startswith("jax") \
            else self._flag.name

    @property
    def value(self):
        return config.read(self._flag.name)

    def get_global(self):
        return self._flag.global_value

    def set_global(self, value) -> None:
        config.update(self._flag.name, value)

    def __call__(self, new_val=_NO_VALUE):
        if new_val is _NO_VALUE:
            if self._flag.kind is not bool and self._flag.validator is not _optional_bool:
                raise TypeError(f"Context manager for {self.name.removeprefix('jax_')} config "
                                "option requires an argument representing the new value for "
                                "the config option.")
            new_val = True
        self._flag._coerce(new_val)  # a bad value raises here, before any block
        return _StateBlock(self, new_val)

    def __bool__(self):
        raise TypeError(f"bool() not supported for instances of type 'State' (did you mean to "
                        f"use '{self.name.removeprefix('jax_')}.value' instead?)")

    def __repr__(self):
        return f"<State {self.name}={self.value!r}>"


class _StateBlock(contextlib.ContextDecorator):
    """``with state(value):`` (and ``@state(value)``): the value for this thread inside."""

    def __init__(self, state: State, value):
        self._state, self._value = state, value
        self._stack = []

    def __enter__(self):
        override = config.override(self._state._flag.name, self._value)
        override.__enter__()
        hook = self._state._on_local
        undo = hook(self._flag_value()) if hook is not None else None
        self._stack.append((override, undo))
        return self

    def _flag_value(self):
        return self._state._flag._coerce(self._value)

    def __exit__(self, *exc):
        override, undo = self._stack.pop()
        try:
            if undo is not None:
                undo()
        finally:
            override.__exit__(*exc)
        return False


# --- user contexts (make_user_context) -------------------------------------------------------
_user_context_ids = itertools.count()


class UserContext:
    """A value of the user's that jitted functions depend on (``make_user_context``): part of
    every trace's cache key, so changing it retraces and recompiles. ``.value`` reads it,
    ``ctx(v)`` sets it for a block (a context manager or decorator), ``set_global`` sets it
    for the process. Values must be hashable."""

    def __init__(self, default_value=None):
        name = f"user_context_{next(_user_context_ids)}"
        config.define(name, default_value, kind=object, validator=_hashable, listed=False)
        TRACE_FLAGS.append(name)
        config._global_trace_context[0] = None
        self._state = State(name)

    @property
    def value(self):
        return self._state.value

    def get_global(self):
        return self._state.get_global()

    def set_global(self, value) -> None:
        self._state.set_global(value)

    def __call__(self, new_value):
        return self._state(new_value)

    def __repr__(self):
        return f"<UserContext value={self.value!r}>"


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"A user context's value must be hashable (it is part of jit's cache "
                        f"key), got {value!r} of type {type(value).__name__}.") from None
    return value
