"""The context managers over plax.random's flags (JAX's ``jax.default_prng_impl``,
``jax.legacy_prng_key`` and ``jax.enable_custom_prng``): each sets its flag for the current
thread inside a ``with`` block, as ``jax.config.update`` sets it globally."""
from __future__ import annotations

from plax.core.config import config

__all__ = ["default_prng_impl", "legacy_prng_key", "enable_custom_prng"]

_NO_VALUE = object()


def _needs_value(name: str, new_val):
    if new_val is _NO_VALUE:
        raise TypeError(f"Context manager for {name} config option requires an argument "
                        "representing the new value for the config option.")


def default_prng_impl(new_val=_NO_VALUE):
    """Context manager: the PRNG implementation keys are made with when ``impl`` is not given
    ('threefry2x32', 'rbg' or 'unsafe_rbg'); legacy uint32 keys are read as its keys."""
    _needs_value("default_prng_impl", new_val)
    return config.override("default_prng_impl", new_val)


def legacy_prng_key(new_val=_NO_VALUE):
    """Context manager: legacy uint32 keys given to plax.random are 'allow'ed, 'warn' or
    'error'."""
    _needs_value("legacy_prng_key", new_val)
    return config.override("legacy_prng_key", new_val)


def enable_custom_prng(new_val: bool = True):
    """Context manager: with it on, ``random.PRNGKey`` returns typed keys (as ``random.key``
    does) instead of their uint32 data."""
    return config.override("enable_custom_prng", new_val)
