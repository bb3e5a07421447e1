"""Version numbers: the JAX API level plax mirrors, and plax's own release.

``plax.__version__`` is the JAX version whose public API plax follows, so that
libraries' ``jax.__version__`` checks pass when they run on plax; plax's own
package version is in its metadata (``python -m plax --version`` prints both).
"""
from plax.runtime.xla import JAXLIB_VERSION

_version = "0.10.2"
__version__ = _version
__version_info__ = tuple(int(part) for part in _version.split("."))
jaxlib_version = JAXLIB_VERSION
