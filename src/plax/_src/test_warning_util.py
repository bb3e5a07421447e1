"""``jax._src.test_warning_util``: thread-safe warning capture for JAX's test files
(``test_util_parts.warning_capture``)."""
from plax._src.test_util_parts.warning_capture import (  # noqa: F401
    ignore_warning, install_threadsafe_warning_handlers, raise_on_warnings, record_warnings)
