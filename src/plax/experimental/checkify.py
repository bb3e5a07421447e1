"""plax.experimental.checkify: as ``jax.experimental.checkify``, functionalized run-time checks.

``checkify(f, errors=...)`` returns a function giving ``(err, out)``; ``err.get()`` is the
message of the first failed check (or None) and ``err.throw()`` raises it. Checks are the
user's (``check``, ``debug_check``, ``check_error``) and, when enabled, automatic ones:
NaNs produced (``nan_checks``), division by zero (``div_checks``) and out-of-bounds
indexing (``index_checks``).
"""
from plax.interpreters import checkify_rules as api_checkify_rules  # noqa: F401  (registers the rules for every primitive)
from plax.interpreters.checkify import (  # noqa: F401
    Error, ErrorCategory, JaxRuntimeError, all_checks, automatic_checks, check, check_error,
    checkify, debug_check, div_checks, float_checks, index_checks, init_error, nan_checks,
    user_checks)

__all__ = ["Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks",
           "check", "check_error", "checkify", "debug_check", "div_checks", "float_checks",
           "index_checks", "init_error", "nan_checks", "user_checks"]
