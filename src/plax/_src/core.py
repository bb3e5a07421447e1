"""``jax._src.core``: plax's core (avals, tracers, primitives, the jaxpr IR, symbolic
dimensions) under JAX's names. What is not named here comes from ``plax.core`` (``jax.core``)
and ``plax.extend.core``."""
from plax import core as _public_core
from plax.core.avals import (AbstractValue, ManualAxisType, ShapedArray,  # noqa: F401
                             physical_aval, pytype_aval_mappings)
from plax.core.debug_info import DebugInfo, initial_result_paths  # noqa: F401
from plax.core.effects import Effect, no_effects  # noqa: F401
from plax.core.errors import (ConcretizationTypeError, InconclusiveDimensionOperation,  # noqa: F401
                              TracerArrayConversionError, TracerBoolConversionError,
                              TracerIntegerConversionError, UnexpectedTracerError)
from plax.core.hi_types import cur_qdd  # noqa: F401
from plax.core.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, JaxprTypeError, Literal,  # noqa: F401
                             Var, check_jaxpr, eval_jaxpr)
from plax.core.primitive import Primitive  # noqa: F401
from plax.core.symbolic_shapes import (dimension_as_value, is_constant_dim,  # noqa: F401
                                       is_symbolic_dim, max_dim, min_dim)
from plax.core.trace import (EvalTrace as _EvalTrace, Trace, Tracer,  # noqa: F401
                             concrete_or_error, current_trace as _current_trace, get_aval)
from plax.api.jit import typeof  # noqa: F401
from plax.api_util import shaped_abstractify  # noqa: F401
from plax.extend import core as _extend_core
from plax.extend.core import (AbstractToken, TraceTag, aval_mapping_handlers,  # noqa: F401
                              jaxprs_in_params, mapped_aval, primal_dtype_to_tangent_dtype,
                              set_current_trace, take_current_trace, unmapped_aval,
                              valid_jaxtype)
from plax.higher_order.call import call_p, closed_call_p  # noqa: F401
from plax.lowering.stablehlo import abstract_token  # noqa: F401
from plax.ref import freeze, new_ref  # noqa: F401
from plax.core.memory import MemorySpace  # noqa: F401

from plax._src import _face

_PRINTER = ("plax prints jaxprs with its own printer (plax.core.jaxpr), which has no "
            "pretty-printer documents, contexts or settings")
_REFUSED = {
    "JaxprPpContext": _PRINTER, "JaxprPpSettings": _PRINTER, "pp_kv_pair": _PRINTER,
}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public_core, _extend_core)


def trace_state_clean() -> bool:
    """Whether no transformation is tracing now (the current trace evaluates eagerly)."""
    return type(_current_trace()) is _EvalTrace


def call(f, *args):
    """Call the wrapped function ``f`` through ``call_p`` (one equation under a trace)."""
    return call_p.bind(f, *args)


def definitely_equal(x, y) -> bool:
    """Whether dimensions (or values) ``x`` and ``y`` are known to be equal; False when the
    comparison of symbolic dimensions is inconclusive."""
    if isinstance(x, Tracer) or isinstance(y, Tracer):
        return x is y
    if x is y:
        return True
    try:
        return bool(x == y)
    except InconclusiveDimensionOperation:
        return False


def definitely_equal_one_of_dim(d, dims) -> bool:
    return any(definitely_equal(d, other) for other in dims)


def is_constant_shape(shape) -> bool:
    """Whether every dimension of ``shape`` is an integer (none symbolic)."""
    return all(is_constant_dim(d) for d in shape)


def dilate_dim(d, dilation):
    """The size of ``d`` elements with ``dilation - 1`` holes between neighbours."""
    return d if definitely_equal(dilation, 1) else max_dim(1 + dilation * (d - 1), 0)


def stride_dim(d, window_size, window_stride):
    """How many windows of ``window_size`` fit in ``d`` stepping by ``window_stride``."""
    return max_dim((d - window_size) // window_stride + 1, 0)



def modify_spec_for_auto_manual(spec, mesh):
    """``spec`` naming only ``mesh``'s Explicit axes (Auto and Manual ones dropped from its
    entries and from its unreduced and reduced sets)."""
    from plax.sharding import PartitionSpec
    explicit = set(mesh.explicit_axes)
    entries = []
    for d in range(len(spec)):
        axes = tuple(a for a in spec.axes_of(d) if a in explicit)
        entries.append(spec[d] if spec[d] is PartitionSpec.UNCONSTRAINED else
                       None if not axes else axes[0] if len(axes) == 1 else axes)
    return PartitionSpec(*entries, unreduced=spec.unreduced & explicit,
                         reduced=spec.reduced & explicit)
