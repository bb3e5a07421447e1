"""``jax._src.numpy.error``: the checks of NumPy operations (NaNs produced, division by
zero, out-of-bounds gathers) that the ``jax_error_checking_behavior_*`` flags turn on;
plax's ``plax.numpy.error_checks``."""
from plax.numpy.error_checks import error_checking_behavior  # noqa: F401
from plax.numpy.error_checks import (  # noqa: F401
    check_precondition_oob_gather as _check_precondition_oob_gather,
    set_error_if_divide_by_zero as _set_error_if_divide_by_zero,
    set_error_if_nan as _set_error_if_nan,
    set_error_if_with_category as _set_error_if_with_category)
