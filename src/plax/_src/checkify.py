"""``jax._src.checkify``: plax's checkify (``plax.interpreters.checkify``) under its private
name (``Out`` and ``JaxException`` are used in type hints)."""
from typing import TypeVar as _TypeVar

from plax.interpreters.checkify import (  # noqa: F401
    DivisionByZeroError, Error, FailedCheckError, JaxException, NaNError, OOBError,
    all_checks, automatic_checks, check, checkify, div_checks, float_checks, index_checks,
    nan_checks, user_checks)

Out = _TypeVar("Out")
