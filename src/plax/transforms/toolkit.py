"""The jaxpr toolkit: whole-jaxpr versions of each transformation.

A higher-order primitive (pjit, checkpoint, the custom-derivative calls, and
the control-flow primitives) holds jaxprs in its params; its rules transform
those bodies with these functions instead of re-implementing a trace each:

- ``jvp_jaxpr(closed, nonzeros, instantiate) -> (closed, out_nonzeros)``
- ``partial_eval_jaxpr(closed, unknowns, instantiate)
  -> (known, unknown, out_unknowns, num_res)``
- ``transpose_jaxpr(closed, linear_mask, nonzero_cts) -> closed``
- ``batch_jaxpr(closed, axis, dims, out_dims=None) -> (jaxpr, consts, out_dims)``
- ``dce_jaxpr(jaxpr, used_outputs, instantiate=False) -> (jaxpr, used_inputs)``

All but ``dce_jaxpr`` are cached per body (holding it weakly), so that the same
jit or loop transformed the same way reuses its transformed body, and with it
its compiled executable. ``consts_as_inputs`` turns a ClosedJaxpr into the
const-free body a primitive's params hold.
"""
from plax.core.dce import dce_closed, dce_jaxpr  # noqa: F401
from plax.core.jaxpr import consts_as_inputs, subjaxprs  # noqa: F401
from plax.transforms.jvp import jvp_jaxpr  # noqa: F401
from plax.transforms.linearize import partial_eval_jaxpr  # noqa: F401
from plax.transforms.transpose import transpose_jaxpr  # noqa: F401
from plax.transforms.vmap import batch_jaxpr  # noqa: F401
