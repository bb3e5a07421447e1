"""plax.scipy: SciPy functions on plax arrays."""
from plax.scipy import special  # noqa: F401
from plax.scipy import signal  # noqa: F401
from plax.scipy import linalg  # noqa: F401
from plax.scipy import stats  # noqa: F401
from plax.scipy import fft  # noqa: F401
from plax.scipy import optimize  # noqa: F401

# Loaded on first use, as attributes (``plax.scipy.ndimage``) as well as by import.
_LAZY_SUBMODULES = frozenset({"cluster", "integrate", "interpolate", "ndimage", "sparse"})


def __getattr__(name):
    import importlib
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
