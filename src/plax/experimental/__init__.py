"""plax.experimental: as ``jax.experimental`` (mesh_utils, shard_map, multihost_utils,
checkify, io_callback, hijax and its ``cur_qdd``)."""
from plax.api.callbacks import io_callback  # noqa: F401
from plax.core.hi_types import cur_qdd  # noqa: F401
