"""``jax._src.core``: the few core names libraries reach for privately."""
from plax.core.avals import ShapedArray, physical_aval  # noqa: F401
from plax.core.primitive import Primitive  # noqa: F401
from plax.core.trace import EvalTrace as _EvalTrace, current_trace as _current_trace


def trace_state_clean() -> bool:
    """Whether no transformation is tracing now (the current trace evaluates eagerly)."""
    return type(_current_trace()) is _EvalTrace
