"""``jax._src.config``: JAX's flag objects over plax's flags (``plax.core.config``).

Each of JAX's states (``enable_x64``, ``numpy_rank_promotion``, ...) is a ``State`` over the
plax flag of the same name: ``.value`` reads it for this thread, calling it gives a context
manager (or decorator). The four whose values JAX gives as enums (``explicit_x64_dtypes``,
``numpy_dtype_promotion``, ``legacy_prng_key``, ``send_traceback_to_runtime``) read back as
those enums. ``bool_state``/``enum_state``/... and ``bool_flag``/... define new plax flags.
``config`` is plax's config seen as JAX's ``Config`` (``values`` is a dict there).
"""
import enum
import os

from plax.api import runtime_flags as _runtime_flags
from plax.api.runtime_flags import (  # noqa: F401
    array_garbage_collection_guard, make_user_context, transfer_guard,
    transfer_guard_device_to_device, transfer_guard_device_to_host,
    transfer_guard_host_to_device)
from plax.core import config as _plax_config
from plax.core.config import State, UserContext  # noqa: F401
from plax.runtime.xla import JAXLIB_EXTENSION_VERSION as jaxlib_extension_version  # noqa: F401

from plax._src import _face

_config = _plax_config.config

# JAX's attribute name -> plax's flag, where they differ by more than a "jax_" prefix.
_FLAG_OF = {
    "_check_vma": "check_vma", "enable_remat_opt_pass": "compiler_enable_remat_pass",
    "xla_runtime_errors": "experimental_unsafe_xla_runtime_errors",
    "_transfer_guard": "transfer_guard", "gpu_use_magma": "use_magma",
    "use_high_dynamic_range_gumbel": "high_dynamic_range_gumbel",
}

_REFUSED = {
    name: "JAX's internal trace-context slot; plax keeps what these hold in its own "
          "flags and contexts (plax.core.config)"
    for name in ("mesh_context_manager", "abstract_mesh_context_manager", "device_context",
                 "pallas_tpu_interpret_mode_context_manager", "config_states",
                 "register_trace_context_callback", "jax_jit_cpp_cache_obj")}

__doc__ = _face.document(__doc__, _REFUSED)


class ExplicitX64Mode(enum.IntEnum):
    """Values of ``explicit_x64_dtypes``."""
    WARN = 1
    ERROR = 2
    ALLOW = 3


class NumpyDtypePromotion(enum.StrEnum):
    STANDARD = "standard"
    STRICT = "strict"


class LegacyPrngKeyState(enum.StrEnum):
    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


class RuntimeTracebackMode(enum.StrEnum):
    OFF = "off"
    ON = "on"
    FULL = "full"


def _text(value):
    """An enum member as the string plax's flag stores."""
    return value.name.lower() if isinstance(value, enum.IntEnum) else \
        value.value if isinstance(value, enum.Enum) else value


class _EnumState(State):
    """A flag stored as a string whose value JAX gives as a member of ``enum_class``."""

    def __init__(self, name, enum_class):
        super().__init__(name)
        self._enum = enum_class

    def _member(self, text):
        if isinstance(self._enum, type) and issubclass(self._enum, enum.IntEnum):
            return self._enum[text.upper()]
        return self._enum(text)

    @property
    def value(self):
        return self._member(super().value)

    def get_global(self):
        return self._member(super().get_global())

    def set_global(self, value) -> None:
        super().set_global(_text(value))

    def __call__(self, new_val):
        return super().__call__(_text(new_val))


_ENUM_STATES = {"explicit_x64_dtypes": ExplicitX64Mode,
                "numpy_dtype_promotion": NumpyDtypePromotion,
                "legacy_prng_key": LegacyPrngKeyState,
                "send_traceback_to_runtime": RuntimeTracebackMode}
_states = {}


def _state_named(attr: str):
    """The State of JAX's ``config.<attr>``: plax's runtime-flag objects where plax has one
    (its hooks mirror the value into jaxlib), else a State over the flag."""
    state = _states.get(attr)
    if state is None:
        flag = _FLAG_OF.get(attr, attr)
        state = getattr(_runtime_flags, flag, None)
        if not isinstance(state, State):
            _config._flag(flag)  # an unknown name raises AttributeError here
            state = _EnumState(flag, _ENUM_STATES[attr]) if attr in _ENUM_STATES \
                else State(flag)
        _states[attr] = state
    return state


def __getattr__(name):
    if name in _REFUSED:
        raise _face.not_provided(__name__, name, _REFUSED[name])
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return _state_named(name)
    except AttributeError:
        raise AttributeError(f"module 'jax._src.config' has no attribute {name!r}") from None


# --- the Config object -------------------------------------------------------------------
class _ConfigView:
    """plax's ``config`` as JAX's ``Config``: ``update``, ``read``/``_read``, ``values`` (a
    dict of every flag by its ``jax_`` name) and, through it, plax's own methods."""

    def update(self, name, value) -> None:
        _config.update(name, value)

    def read(self, name):
        return _config.read(name)

    _read = read

    @property
    def values(self) -> dict:
        flags = {id(f): f for f in _config._by_any_name.values()}.values()
        return {_jax_flag_name(f.name): _config.read(f.name) for f in flags}

    def __getattr__(self, name):
        return getattr(_config, name)


def _jax_flag_name(name: str) -> str:
    return name if name.startswith("jax") else "jax_" + name


config = _ConfigView()
update = config.update
_read = config.read
parse_flags_with_absl = _config.parse_flags_with_absl
checking_leaks = _plax_config.checking_leaks
no_default = object()


def trace_context() -> tuple:
    """The values of the flags a trace depends on (part of jit's cache key)."""
    return _config.trace_context()


def trace_context_names() -> tuple:
    """The names of those flags, in the same order."""
    return tuple(_jax_flag_name(n) for n in _plax_config.TRACE_FLAGS)


def bool_env(varname: str, default: bool) -> bool:
    """Environment variable ``varname`` read as a boolean (``default`` when unset)."""
    text = os.getenv(varname)
    return default if text is None else _plax_config._parse_bool(text, varname, varname)


def int_env(varname: str, default: int) -> int:
    return int(os.getenv(varname, default))


# --- defining flags ------------------------------------------------------------------------
def _unprefixed(name: str) -> str:
    return name[4:] if name.startswith("jax_") else name


def _define(name, default, help, validator, *, update_global_hook=None,
            update_thread_local_hook=None, include_in_jit_key=False,
            include_in_trace_context=False) -> str:
    """Define plax flag ``name`` (JAX's spelling) checked by ``validator``; its plax name."""
    name = name.lower()
    if name in _config._by_any_name:
        raise Exception(f"Config option {name} already defined")
    flag = _unprefixed(name)
    _config.define(flag, validator(default), kind=object, validator=validator, help=help,
                   listed=False)
    if include_in_jit_key or include_in_trace_context:
        _plax_config.TRACE_FLAGS.append(flag)
        _config._global_trace_context[0] = None
    if update_global_hook is not None:
        _config._listeners.append(
            lambda changed: changed == flag and update_global_hook(_config._flag(flag)
                                                                   .global_value))
        update_global_hook(_config._flag(flag).global_value)
    del update_thread_local_hook  # see _state
    return flag


class _BoolState(State):
    """A boolean State whose context manager means True when called without a value."""

    def __call__(self, new_val=True):
        return super().__call__(new_val)


def _state(flag, update_thread_local_hook=None, kind=State, **_):
    """A State (of ``kind``) over ``flag``, calling ``update_thread_local_hook`` with the
    value a block sets and, when it ends, the one the enclosing block set (None outside)."""
    if update_thread_local_hook is None:
        return kind(flag)
    stack = []

    def on_local(value):
        stack.append(value)
        update_thread_local_hook(value)

        def undo():
            stack.pop()
            update_thread_local_hook(stack[-1] if stack else None)
        return undo
    return kind(flag, on_local)


def _bool(validator=None):
    def parse(value):
        if isinstance(value, str):  # from the environment
            return _plax_config._parse_bool(value, "flag")
        if validator is not None:
            validator(value)
        return bool(value)
    return parse


def bool_state(name, default, help, *, upgrade=False, extra_description="", validator=None,
               **options):
    """A new boolean flag and its State (``JAX_<NAME>`` in the environment sets it)."""
    if not isinstance(default, bool):
        raise TypeError(f"Default value must be of type bool, got {default!r}")
    return _state(_define(name, default, help, _bool(validator), **options), kind=_BoolState,
                  **options)


def _enum(enum_values, optional=False, extra_validator=None):
    def parse(value):
        if optional and value is None:
            return None
        if type(value) is not str or value not in enum_values:
            raise ValueError(f"new enum value must be in {enum_values}, got {value} of type "
                             f"{type(value)}.")
        if extra_validator is not None:
            extra_validator(value)
        return value
    return parse


def enum_state(name, enum_values, default, help, *, extra_validator=None, **options):
    return _state(_define(name, default, help, _enum(enum_values, False, extra_validator),
                          **options), **options)


def optional_enum_state(name, enum_values, default, help, **options):
    return _state(_define(name, default, help, _enum(enum_values, True), **options), **options)


def _typed(kind, optional):
    def parse(value):
        if optional and value is None:
            return None
        if isinstance(value, str) and kind is not str:  # from the environment
            value = kind(value)
        if kind is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise ValueError(f"new {kind.__name__} config value must be "
                             f"{'None or ' if optional else ''}of type {kind.__name__}, got "
                             f"{value} of type {type(value)}.")
        return value
    return parse


def int_state(name, default, help, **options):
    return _state(_define(name, default, help, _typed(int, True), **options), **options)


def float_state(name, default, help, **options):
    return _state(_define(name, default, help, _typed(float, True), **options), **options)


def string_state(name, default, help, **options):
    return _state(_define(name, default, help, _typed(str, False), **options), **options)


def optional_string_state(name, default, help, **options):
    return _state(_define(name, default, help, _typed(str, True), **options), **options)


def string_or_object_state(name, default, help, **options):
    return _state(_define(name, default, help, lambda v: v, **options), **options)


def enum_class_state(name, enum_class, default, help, **options):
    parse = _enum([_text(m) for m in enum_class], False)
    flag = _define(name, _text(default), help, lambda v: parse(_text(v)), **options)
    return _EnumState(flag, enum_class)


class Flag:
    """A process-wide option without a context manager (JAX's ``bool_flag`` & co): ``.value``,
    ``_set``; ``config.update`` and ``--name=value`` arguments set it too."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    @property
    def value(self):
        return _config.read(self._name)

    def _set(self, value) -> None:
        _config.update(self._name, value)

    def __bool__(self):
        raise TypeError("bool() not supported for instances of type 'Flag' (did you mean to "
                        "use 'Flag.value' instead?)")


def _flag_factory(parse):
    def make(name, default, *args, update_hook=None, **kwargs):
        del args, kwargs  # absl's help text and the like
        flag = _define(name, default, "", parse, update_global_hook=update_hook)
        if parse is _bool_flag_parse:
            _config._flag(flag).kind = bool  # a bare ``--name`` argument means True
        return Flag(name)
    return make


def _bool_flag_parse(value):
    return _plax_config._parse_bool(value, "flag") if isinstance(value, str) else bool(value)


bool_flag = _flag_factory(_bool_flag_parse)
int_flag = _flag_factory(lambda v: None if v is None else int(v))
float_flag = _flag_factory(lambda v: None if v is None else float(v))
string_flag = _flag_factory(lambda v: v)
enum_flag = _flag_factory(lambda v: v)
