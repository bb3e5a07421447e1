"""plax.experimental: as ``jax.experimental`` (mesh_utils, shard_map, multihost_utils,
checkify, io_callback, hijax and its ``cur_qdd``; the submodules shard_alike, compute_on,
control_deps, xla_metadata, layout, random, key_reuse, ode, jet, rnn and the others load
when imported)."""
from plax.api.callbacks import io_callback  # noqa: F401
from plax.core.dtypes import primal_tangent_dtype  # noqa: F401
from plax.runtime.array import EArray  # noqa: F401
from plax.core.hi_types import cur_qdd  # noqa: F401
