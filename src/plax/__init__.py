"""plax: composable transformations of numerical Python programs, on XLA."""
from plax.core.config import config, enable_x64  # noqa: F401
from plax.core.dtypes import float0  # noqa: F401
from plax import dtypes, errors  # noqa: F401
from plax.version import __version__, __version_info__  # noqa: F401
from plax.core.config import (  # noqa: F401
    debug_nans, debug_infs, debug_key_reuse, log_compiles, enable_checks, numpy_rank_promotion,
    threefry_partitionable, check_tracer_leaks, checking_leaks,
    numpy_dtype_promotion, default_matmul_precision, default_device)
from plax.runtime.array import Array  # noqa: F401
from plax.runtime.xla import Device  # noqa: F401
from plax.api import (  # noqa: F401
    make_jaxpr, devices, local_devices, device_count, local_device_count, process_index,
    process_count, default_backend, device_put, device_get, block_until_ready, live_arrays,
    ShapeDtypeStruct, jit, eval_shape, disable_jit, named_call, named_scope, clear_caches,
    clear_backends, effects_barrier, ensure_compile_time_eval, process_indices, host_id,
    host_count, host_ids, copy_to_host_async, print_environment_info,
    typeof,
)
from plax.api_autodiff import (  # noqa: F401
    jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian, linear_transpose)
from plax.api_autodiff import jacrev as jacobian  # noqa: F401
from plax.sharding.mesh import make_mesh, set_mesh  # noqa: F401
from plax.sharding import NamedSharding, PartitionSpec as P  # noqa: F401
from plax.runtime.array import Shard  # noqa: F401
from plax.api_arrays import (  # noqa: F401
    make_array_from_callback, make_array_from_single_device_arrays,
    make_array_from_process_local_data, device_put_sharded, device_put_replicated)
from plax import sharding, experimental, debug  # noqa: F401
from plax.api_vmap import vmap  # noqa: F401
from plax.api_shard_map import shard_map  # noqa: F401
from plax.api_pmap import pmap  # noqa: F401
from plax.transforms.remat import checkpoint, remat, checkpoint_policies  # noqa: F401
from plax import tree_util, tree, lax, numpy, scipy, sharding, stages, test_util, ad_checkpoint  # noqa: F401
from plax import random, nn  # noqa: F401,E402
from plax import core, flatten_util, typing, version  # noqa: F401,E402
from plax.drop_in import install_as_jax  # noqa: F401,E402
from plax.transforms.custom_derivatives import custom_jvp, custom_vjp, closure_convert  # noqa: F401,E402
from plax.transforms.custom_gradient import custom_gradient  # noqa: F401,E402
from plax.api_callbacks import pure_callback  # noqa: F401,E402
