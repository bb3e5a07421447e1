"""plax: composable transformations of numerical Python programs, on XLA."""
from plax.core.config import config, enable_x64  # noqa: F401
from plax.core import dtypes  # noqa: F401
from plax.core.dtypes import float0  # noqa: F401
from plax.core import errors  # noqa: F401
from plax.runtime.array import Array  # noqa: F401
from plax.runtime.xla import Device  # noqa: F401
from plax.api import (  # noqa: F401
    make_jaxpr, devices, local_devices, device_count, local_device_count, process_index,
    process_count, default_backend, device_put, device_get, block_until_ready, live_arrays,
    ShapeDtypeStruct, jit, eval_shape, disable_jit, named_call, named_scope, clear_caches,
    clear_backends, effects_barrier, ensure_compile_time_eval,
    typeof,
)
from plax.api_autodiff import (  # noqa: F401
    jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian, linear_transpose)
from plax.api_vmap import vmap  # noqa: F401
from plax.transforms.remat import checkpoint, remat, checkpoint_policies  # noqa: F401
from plax import tree_util, tree, lax, numpy, scipy, sharding, stages, test_util, ad_checkpoint  # noqa: F401
from plax.transforms.custom_derivatives import custom_jvp, custom_vjp, closure_convert  # noqa: F401,E402
