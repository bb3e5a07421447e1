"""``jax._src.error_check``: errors set inside (jitted) code and raised later, plax's
``plax.numpy.error_checks``."""
from plax.numpy.error_checks import (  # noqa: F401
    JaxValueError, error_checking_context, raise_if_error, set_error_if, unwrap_from_import,
    wrap_for_export)
from plax.numpy.error_checks import NO_ERROR as _NO_ERROR  # noqa: F401
