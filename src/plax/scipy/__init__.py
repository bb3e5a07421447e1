"""plax.scipy: SciPy functions on plax arrays."""
from plax.scipy import special  # noqa: F401
from plax.scipy import signal  # noqa: F401
from plax.scipy import linalg  # noqa: F401
from plax.scipy import stats  # noqa: F401
from plax.scipy import fft  # noqa: F401
from plax.scipy import optimize  # noqa: F401
